"""What a backmapping reads: the CG frames (a run directory's trajectory, or a CG structure's models), the CG
topology that names the beads, and the reference that names the residues.

* :func:`run_frames` -- a run directory of ``flashschnet-simulate``: ``topology.pdb``, one trajectory
  (``replica_RRR.dcd``, or a parallel-tempering run's ``T<K>.dcd``), ``cleaned.pdb`` as the reference;
* :func:`structure_frames` -- a CG PDB file (every MODEL a frame) and a reference given by the user;
* :func:`frame_selection` -- ``--frames START:STOP:STEP`` within a trajectory.

Bad input is an :class:`~flashschnet.errors.InputError`, one line naming the file or option and what to do.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ...errors import InputError
from .skeleton import read_openmm_pdb


@dataclass
class CGFrames:
    """Selected CG frames and where they come from.

    Attributes
    ----------
    topology : openmm.app.Topology
        One copy of the CG molecule (the beads of one frame).
    source : str
        The CG file (trajectory or structure), for messages.
    topology_source : str
        The file ``topology`` was read from.
    reference : str
        The all-atom reference PDB.
    positions_nm : numpy.ndarray [F, n_beads, 3]
    frames : list of int
        Their indices in the trajectory (or the structure's models).
    what : str
        ``"replica 0"``, ``"300.0 K"`` or ``"structure"``.
    first_step, interval, dt_ps : int, int, float
        For the output DCD: the step of the first selected frame, steps between selected frames, time step (ps).
    """

    topology: object
    source: str
    topology_source: str
    reference: str
    positions_nm: np.ndarray
    frames: List[int]
    what: str
    first_step: int = 0
    interval: int = 1
    dt_ps: float = 0.0
    notes: List[str] = field(default_factory=list)


def frame_selection(text: Optional[str], n_frames: int, source: str) -> range:
    """The frames ``--frames START:STOP:STEP`` selects among ``n_frames`` (Python slice rules, none negative;
    any part may be left out; a single number K is frame K). InputError when the text is malformed, names a frame
    past the last, or selects none."""
    if n_frames < 1:
        raise InputError(f"{source}: no complete frame; give a trajectory with frames")
    if text is None or not text.strip():
        return range(n_frames)
    parts = text.strip().split(":")
    try:
        if len(parts) > 3:
            raise ValueError
        vals = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise InputError(f"--frames {text!r}: expected START:STOP:STEP (non-negative integers, any part may be "
                         "left out), e.g. 0:100:10") from None
    if len(vals) == 1:
        vals = [vals[0], vals[0] + 1 if vals[0] is not None else None, None]
    start, stop, step = (vals + [None, None])[:3]
    if any(v is not None and v < 0 for v in (start, stop)) or (step is not None and step < 1):
        raise InputError(f"--frames {text!r}: START and STOP must be >= 0 and STEP >= 1")
    start = 0 if start is None else start
    stop = n_frames if stop is None else stop
    if start >= n_frames or stop > n_frames:
        raise InputError(f"--frames {text}: {source} has {n_frames} frames (0 to {n_frames - 1}); choose frames "
                         "within them")
    selected = range(start, stop, step or 1)
    if len(selected) == 0:
        raise InputError(f"--frames {text}: selects no frame (START must be below STOP)")
    return selected


def _read_cg_pdb(path: str, option: str):
    """An OpenMM PDBFile of a CG structure; InputError when missing or unreadable."""
    return read_openmm_pdb(path, f"{option}{path}", "missing", "give the CG structure (the topology.pdb "
                           "flashschnet-simulate writes)", "give the CG structure")


def run_frames(run_dir: str, replica: Optional[int] = None, temperature_K: Optional[float] = None,
               frames: Optional[str] = None, reference: Optional[str] = None) -> CGFrames:
    """The CG frames of a run directory: ``replica`` (default 0) or, in a parallel-tempering run, the
    trajectory at ``temperature_K`` (default: the lowest of its ladder, when no replica is asked for);
    ``frames``: :func:`frame_selection`; ``reference``: default the run's ``cleaned.pdb``."""
    from ..dcd import read_dcd, read_header
    from ..run_reader import RunDir

    if not os.path.isdir(run_dir):
        raise InputError(f"{run_dir}: no such directory; give the --out directory of flashschnet-simulate")
    top_path = os.path.join(run_dir, "topology.pdb")
    if not os.path.isfile(top_path):
        raise InputError(f"{top_path}: missing; the run directory needs the topology.pdb flashschnet-simulate "
                         "wrote (give a run directory, or a CG structure with --structure)")
    run = RunDir(run_dir)
    if run.kind != "flashschnet":
        raise InputError(f"{run_dir}: a flashschnet-martini run; flashschnet-backmap rebuilds flashschnet-simulate "
                         "runs (5-bead CG beads) only")
    if replica is not None and temperature_K is not None:
        raise InputError("--replica and --temperature: give one of them")
    ladder = run.ladder() if replica is None else None     # --replica needs no ladder (a killed tempering run has none)
    notes = []
    if temperature_K is not None:
        if not ladder:
            raise InputError(f"--temperature {temperature_K:g}: {run_dir} is not a parallel-tempering run; choose its "
                             f"trajectory with --replica (0 to {max(run.trajectories)})")
        near = min(ladder, key=lambda t: abs(t - temperature_K))
        if abs(near - temperature_K) > 0.05:
            raise InputError(f"--temperature {temperature_K:g}: not a temperature of {run_dir}; its ladder is "
                             + ", ".join(f"{t:g}" for t in ladder) + " K")
        path, what = ladder[near], f"{near:.1f} K"
    elif replica is not None or not ladder:
        replica = 0 if replica is None else int(replica)
        if replica not in run.trajectories:
            raise InputError(f"--replica {replica}: {run_dir} has replicas {min(run.trajectories)} to "
                             f"{max(run.trajectories)}")
        path, what = run.trajectories[replica], f"replica {replica}"
    else:
        t0 = min(ladder)
        path, what = ladder[t0], f"{t0:.1f} K"
        notes.append(f"{run_dir}: a parallel-tempering run; backmapping its lowest temperature, {t0:.1f} K "
                     "(choose another with --temperature)")
    pdb = _read_cg_pdb(top_path, "")
    head = read_header(path)
    n_beads = pdb.topology.getNumAtoms()
    if head.atoms != n_beads:
        raise InputError(f"{path}: {head.atoms} atoms per frame, but {top_path} has {n_beads}; the trajectory is "
                         "not of this run")
    selected = frame_selection(frames, head.complete_frames, path)
    xyz = read_dcd(path)[np.asarray(selected, dtype=np.int64)]
    ref = reference if reference is not None else os.path.join(run_dir, "cleaned.pdb")
    return CGFrames(topology=pdb.topology, source=path, topology_source=top_path, reference=ref, positions_nm=xyz,
                    frames=list(selected), what=what, first_step=head.first_step + head.interval * selected.start,
                    interval=head.interval * selected.step, dt_ps=head.dt_ps, notes=notes)


def structure_frames(structure: str, reference: str, frames: Optional[str] = None) -> CGFrames:
    """The CG frames of a CG PDB file (each MODEL one frame; ``frames`` selects among them)."""
    import openmm.unit as unit

    pdb = _read_cg_pdb(structure, "--structure ")
    n = pdb.getNumFrames()
    selected = frame_selection(frames, n, structure)
    xyz = np.stack([np.asarray(pdb.getPositions(asNumpy=True, frame=k).value_in_unit(unit.nanometer),
                               dtype=np.float64) for k in selected])
    return CGFrames(topology=pdb.topology, source=structure, topology_source=structure, reference=reference,
                    positions_nm=xyz, frames=list(selected), what="structure", first_step=selected.start,
                    interval=selected.step)
