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
    notes : list of str
        What to say about the input (``note:`` lines), ``damage`` among them: what the run directory's files lacked
        (:attr:`~flashschnet.openmm.run_reader.RunDir.notes`; backmap.json's ``input_warnings``).
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
    damage: List[str] = field(default_factory=list)


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
    ``frames``: :func:`frame_selection`; ``reference``: default the run's ``cleaned.pdb``.

    The run is read by :class:`~flashschnet.openmm.run_reader.RunDir`, with its answers to damaged files (one line,
    or a note in ``notes`` and the part that is whole) and the options checked against the run as
    ``flashschnet-analyze`` checks them (:mod:`flashschnet.openmm.run_options`)."""
    from ..run_checks import check_rungs
    from ..run_options import replica_choice, temperature_choice
    from ..run_reader import RunDir, whole_pdb

    if replica is not None and temperature_K is not None:
        raise InputError("--replica and --temperature: give one of them")
    run = RunDir(run_dir)
    top_path = run.topology_path
    if not os.path.isfile(top_path):
        raise InputError(f"{top_path}: missing; the run directory needs the topology.pdb flashschnet-simulate "
                         "wrote (give a run directory, or a CG structure with --structure)")
    if run.kind != "flashschnet":
        raise InputError(f"{run_dir}: a flashschnet-martini run; flashschnet-backmap rebuilds flashschnet-simulate "
                         "runs (5-bead CG beads) only")
    run.settings()                      # run.json: another run's or unreadable is one line; missing, a note
    ladder = run.ladder() if replica is None else None     # --replica needs no ladder (a killed tempering run has none)
    notes, asked = [], replica is not None
    if temperature_K is not None:
        near = temperature_choice("--temperature", temperature_K, run, ladder,
                                  f"choose its trajectory with --replica (0 to {max(run.trajectories)})")
        path, what = ladder[near], f"{near:.1f} K"
    elif replica is not None or not ladder:
        replica = replica_choice("--replica", [0 if replica is None else int(replica)], run)[0]
        path, what = run.trajectories[replica], f"replica {replica}"
        if asked and os.path.isfile(run.file("walkers.csv")):
            notes.append(f"{run_dir}: a parallel-tempering run; --replica {replica} is walker {replica}, whose "
                         "trajectory visits every temperature of the ladder (choose one temperature with "
                         "--temperature)")
    else:
        t0 = min(ladder)
        path, what = ladder[t0], f"{t0:.1f} K"
        notes.append(f"{run_dir}: a parallel-tempering run; backmapping its lowest temperature, {t0:.1f} K "
                     "(choose another with --temperature)")
    run.topology()                      # cut short, or not of the trajectories' atoms: one line
    run.checkpoint()                    # what the trajectories are checked against (notes)
    if ladder and path in ladder.values():
        check_rungs(run, ladder, f"delete it and write it again from the walkers' trajectories with "
                                 f"flashschnet-simulate --resume --out {run.path}")
    pdb = _read_cg_pdb(top_path, "")
    head = run.header(path)
    xyz = run.frames(path)
    selected = frame_selection(frames, len(xyz), path)
    xyz = xyz[np.asarray(selected, dtype=np.int64)]
    ref = reference
    if reference is None:                        # the run's own: whole, as the run wrote it
        ref = run.file("cleaned.pdb")
        fix = ("restore the cleaned.pdb the run wrote, or give the all-atom PDB the run was started from with "
               "--reference")
        whole_pdb(ref, fix)
        read_openmm_pdb(ref, ref, "missing", fix, fix)
    return CGFrames(topology=pdb.topology, source=path, topology_source=top_path, reference=ref, positions_nm=xyz,
                    frames=list(selected), what=what, first_step=head.first_step + head.interval * selected.start,
                    interval=head.interval * selected.step, dt_ps=head.dt_ps, notes=run.notes + notes,
                    damage=list(run.notes))


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
