"""All-atom backmapping of 5-bead and CA CG structures and trajectories (``flashschnet-backmap``).

5 beads: N, CA, C, O and CB come from their beads. CA: CA from its bead, N, C and O rebuilt from the CA trace by
PULCHRA (:mod:`.pulchra`), CB in ideal geometry on them. Side chains: packed on each frame's backbone by FASPR
(:mod:`.faspr`; or pdbfixer's residue templates, ``BackmapSettings(side_chains="templates")``), placed along the CB
bead; OXT at each C-terminus; then a short energy minimisation in amber14 + GBn2 with harmonic restraints on the
atoms that sit on beads removes clashes; every frame is checked (clashes, CA chirality, cis peptide bonds,
restraint deviation) and each one that is not clean gets a note. See docs/backmapping.md for what it achieves.

* :func:`backmap` -- a run directory or a CG structure in, ``backmapped.pdb`` / ``.dcd`` / ``topology_allatom.pdb``
  out (:mod:`.command`);
* :func:`build_skeleton`, :class:`Rebuilder`, :func:`backmap_frames` -- the steps, for frames held in memory;
* :mod:`.checks` -- the geometry checks; :mod:`.quality` -- RMSDs from the original structure.
"""
from .checks import FrameCheck, check_frame
from .command import backmap
from .inputs import CGFrames, frame_selection, run_frames, structure_frames
from .output import drop_hydrogens, write_backmapped
from .quality import beads_of, compare
from .rebuild import BackmapSettings, FrameResult, Rebuilder
from .skeleton import Skeleton, build_skeleton
from .workers import Backmapped, backmap_frames

__all__ = ["Backmapped", "BackmapSettings", "CGFrames", "FrameCheck", "FrameResult", "Rebuilder", "Skeleton",
           "backmap", "backmap_frames", "beads_of", "build_skeleton", "check_frame", "compare", "drop_hydrogens", "frame_selection",
           "run_frames", "structure_frames", "write_backmapped"]
