"""One backmapping command, end to end: read the CG frames (:mod:`.inputs`), check them against the reference
(:mod:`.skeleton`), rebuild every frame (:mod:`.workers`), write the files (:mod:`.output`). What
``flashschnet-backmap`` runs.

Every input is checked before anything is written or any frame rebuilt; the output folder is created only then.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Callable, Optional

from ...errors import InputError
from .workers import backmap_frames
from .inputs import run_frames, structure_frames
from .output import FILES, drop_hydrogens, write_backmapped
from ..runner.directory import make_run_dir
from .rebuild import BackmapSettings
from .skeleton import build_skeleton


def backmap(out: str, run_dir: Optional[str] = None, structure: Optional[str] = None,
            reference: Optional[str] = None, replica: Optional[int] = None, temperature_K: Optional[float] = None,
            frames: Optional[str] = None, hydrogens: bool = False, workers: int = 1,
            settings: BackmapSettings = BackmapSettings(), progress: bool = True,
            echo: Callable[[str], None] = print, scheduler: Optional[str] = None, force: bool = False) -> dict:
    """Backmap the frames of a run directory (``run_dir``) or of a CG structure (``structure`` with
    ``reference``) to all atoms; write ``out/backmapped.pdb``, ``backmapped.dcd``, ``topology_allatom.pdb`` and
    ``backmap.json``.

    Parameters
    ----------
    out : str
        Output folder (created if needed).
    run_dir, structure : str
        Exactly one: a ``flashschnet-simulate`` run directory, or a 5-bead CG PDB file (every MODEL a frame).
    reference : str, optional
        The all-atom PDB the CG structure was mapped from; default (run directories only) the run's
        ``cleaned.pdb``; required with ``structure``.
    replica, temperature_K : optional
        Which trajectory of a run directory (see :func:`~flashschnet.openmm.backmap.inputs.run_frames`).
    frames : str, optional
        ``START:STOP:STEP`` (:func:`~flashschnet.openmm.backmap.inputs.frame_selection`).
    hydrogens : bool
        Keep the hydrogens (otherwise heavy atoms only).
    workers : int
        Processes rebuilding frames.
    scheduler : str, optional
        Instead: the address of a Dask scheduler whose workers rebuild the frames.
    settings : BackmapSettings
    progress : bool
        A progress bar.
    echo : callable
        Notes, one line each (``"note: ..."``): one per frame that did not come out clean.
    force : bool
        Overwrite the files of an earlier backmap in ``out`` (otherwise refused, as ``flashschnet-analyze``
        refuses to overwrite a report without ``--force``).

    Returns
    -------
    dict
        ``backmap.json``'s content, plus ``"files"`` (name -> path).

    Raises
    ------
    InputError
        Bad input (one line); nothing is written then.
    OutputError
        The files could not be written (none is left half-written).
    """
    if (run_dir is None) == (structure is None):
        raise InputError("give a run directory or --structure CG.pdb (one of them)")
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if scheduler is not None and workers != 1:
        raise InputError("give one of --workers N (processes here) and --scheduler ADDRESS (a Dask cluster)")
    if not out or not str(out).strip():
        raise InputError("--out is empty; give a directory")
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"--out {out}: exists and is not a directory")
    existing = [n for n in FILES if os.path.exists(os.path.join(out, n))]
    if existing and not force:
        raise InputError(f"{os.path.join(out, existing[0])}: a backmap is already there; pass --force to overwrite "
                         "it or choose another --out")
    if run_dir is not None:
        cg = run_frames(run_dir, replica, temperature_K, frames, reference)
    else:
        if reference is None:
            raise InputError("--structure needs --reference: the all-atom PDB the CG structure was mapped from")
        if replica is not None or temperature_K is not None:
            raise InputError("--replica and --temperature choose a trajectory of a run directory; a --structure has "
                             "none")
        cg = structure_frames(structure, reference, frames)
    for line in cg.notes:
        echo(f"note: {line}")
    skeleton = build_skeleton(cg.topology, cg.reference, cg.topology_source)
    if settings.side_chains == "faspr":
        from .faspr import faspr_executable

        faspr_executable()                      # missing FASPR: one line, before anything is written
    if skeleton.mapping == "ca":
        from .pulchra import check_pulchra

        check_pulchra()
    client = None
    if scheduler is not None:                   # an unreachable scheduler: one line, before anything is written
        from ..dask_client import connect_scheduler

        client = connect_scheduler(scheduler, echo=echo)
    try:
        make_run_dir(out)
        t0 = time.perf_counter()
        labels = [f"frame {k}" for k in cg.frames]
        done = backmap_frames(skeleton, cg.positions_nm, settings, workers=workers, progress=progress, labels=labels,
                              echo=echo, scheduler=client)
        seconds = time.perf_counter() - t0
    finally:
        if client is not None:
            client.close()
    topology, positions = done.topology, done.positions_nm
    if not hydrogens:
        topology, positions = drop_hydrogens(topology, positions)
    per_frame = []
    for k, check, notes in zip(cg.frames, done.checks, done.notes):
        per_frame.append({"frame": k, "clashes": len(check.clashes),
                          "closest_clash_nm": min((c[2] for c in check.clashes), default=None),
                          "d_chirality_residues": check.d_residues, "new_cis_after_residues": check.new_cis,
                          "max_deviation_nm": check.max_deviation_nm, "converged": check.converged, "notes": notes})
    summary = {"source": os.path.abspath(cg.source), "topology": os.path.abspath(cg.topology_source),
               "reference": os.path.abspath(cg.reference), "what": cg.what, "frames": cg.frames,
               "hydrogens": bool(hydrogens), "atoms": topology.getNumAtoms(), "workers": workers,
               "scheduler": scheduler, "mapping": skeleton.mapping,
               "settings": asdict(settings), "seconds": seconds, "frames_per_second": len(cg.frames) / seconds,
               "frames_with_notes": sum(1 for n in done.notes if n), "per_frame": per_frame,
               "input_warnings": list(cg.damage)}
    files = write_backmapped(out, topology, positions, summary, cg.first_step, cg.interval, cg.dt_ps)
    return dict(summary, files=files)
