"""Many CG frames -> all-atom frames: :class:`~flashschnet.openmm.backmap.rebuild.Rebuilder` over the frames, in
this process, in ``workers`` processes (``concurrent.futures.ProcessPoolExecutor``, spawned: each builds its own
rebuilder once) or on the workers of a Dask scheduler (``scheduler``: one task per frame, each worker thread builds
its rebuilder once; a task whose worker dies is run again elsewhere by Dask), with a progress bar and one note per
frame that did not come out clean.

The first frame is always rebuilt here: it fixes the protonation states (and so the atoms) every other frame gets.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np

from .checks import FrameCheck
from .rebuild import BackmapSettings, Rebuilder
from .skeleton import Skeleton

_WORKER: Optional[Rebuilder] = None


def _start_worker(skeleton: Skeleton, settings: BackmapSettings, variants) -> None:
    """ProcessPoolExecutor initializer: this process's rebuilder."""
    import torch  # noqa: F401  (torch before openmm, as everywhere in the package)

    global _WORKER
    _WORKER = Rebuilder(skeleton, settings, variants)


def _rebuilt(k: int, rebuilder: Rebuilder, beads_nm: np.ndarray) -> tuple:
    """Frame ``k`` rebuilt: ``(k, positions, check, notes)``, what :func:`backmap_frames` collects from anywhere."""
    result = rebuilder.frame(beads_nm)
    return k, result.positions_nm, result.check, result.notes


def _work(k: int, beads_nm: np.ndarray):
    return _rebuilt(k, _WORKER, beads_nm)


_DASK = threading.local()       # a Dask worker thread's rebuilder: (key, Rebuilder)


def _dask_work(k: int, beads_nm: np.ndarray, skeleton: Skeleton, settings: BackmapSettings, variants):
    """One frame on a Dask worker; the thread's rebuilder is built on its first frame of this command."""
    key = (skeleton.text, skeleton.bead_index.tobytes(), settings, repr(variants))
    held = getattr(_DASK, "rebuilder", None)
    if held is None or held[0] != key:
        import torch  # noqa: F401  (torch before openmm, as everywhere in the package)

        _DASK.rebuilder = held = (key, Rebuilder(skeleton, settings, variants))
    return _rebuilt(k, held[1], beads_nm)


@dataclass
class Backmapped:
    """The frames rebuilt: ``topology`` (OpenMM, with hydrogens), ``positions_nm`` [F, n_atoms, 3] in its order,
    ``checks`` and ``notes`` per frame (a frame's notes: its problems, empty when it is clean)."""

    topology: object
    positions_nm: np.ndarray
    checks: List[FrameCheck]
    notes: List[List[str]]


def backmap_frames(skeleton: Skeleton, frames_nm: np.ndarray, settings: BackmapSettings = BackmapSettings(),
                   workers: int = 1, progress: bool = True, labels: Optional[Sequence[str]] = None,
                   echo: Callable[[str], None] = print, scheduler: Optional[str] = None) -> Backmapped:
    """Rebuild every frame of ``frames_nm`` [F, n_beads, 3] (nm).

    Parameters
    ----------
    skeleton : Skeleton
    frames_nm : numpy.ndarray
        Bead positions per frame, nm.
    settings : BackmapSettings
    workers : int
        Processes (1: all in this process).
    progress : bool
        Show a progress bar (tqdm, on stderr).
    labels : sequence of str, optional
        What to call each frame in notes (default ``"frame K"``).
    echo : callable
        Where the per-frame notes go (one line each, ``"note: frame K: ..."``).
    scheduler : str or distributed.Client, optional
        The address of a Dask scheduler (``tcp://host:8786``) or a client connected to one: the frames after the
        first are rebuilt on its workers (which need flashschnet installed) instead of in ``workers`` processes.
        A client given is left open.
    """
    frames_nm = np.asarray(frames_nm, dtype=np.float64)
    n = len(frames_nm)
    labels = list(labels) if labels is not None else [f"frame {k}" for k in range(n)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, unit="frame", desc="backmapping", dynamic_ncols=True)
    positions: List[Optional[np.ndarray]] = [None] * n
    checks: List[Optional[FrameCheck]] = [None] * n
    notes: List[List[str]] = [[] for _ in range(n)]

    def done(k, pos, check, problems):
        positions[k], checks[k], notes[k] = pos, check, problems
        if problems:
            line = f"note: {labels[k]}: " + "; ".join(problems)
            if bar is not None:
                bar.clear()
            echo(line)
            if bar is not None:
                bar.refresh()
        if bar is not None:
            bar.update(1)

    try:
        first = Rebuilder(skeleton, settings)
        done(*_rebuilt(0, first, frames_nm[0]))
        rest = list(range(1, n))
        if scheduler and rest:
            _on_dask(scheduler, skeleton, settings, first.variants, frames_nm, rest, done, echo)
        elif workers > 1 and len(rest) > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            with ProcessPoolExecutor(max_workers=min(workers, len(rest)), mp_context=multiprocessing.get_context("spawn"),
                                     initializer=_start_worker, initargs=(skeleton, settings, first.variants)) as pool:
                futures = [pool.submit(_work, k, frames_nm[k]) for k in rest]
                try:
                    for fut in as_completed(futures):
                        done(*fut.result())
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    raise
        else:
            for k in rest:
                done(*_rebuilt(k, first, frames_nm[k]))
    finally:
        if bar is not None:
            bar.close()
    return Backmapped(topology=first.topology, positions_nm=np.stack(positions), checks=checks, notes=notes)


def _on_dask(scheduler, skeleton: Skeleton, settings: BackmapSettings, variants, frames_nm: np.ndarray,
             rest: List[int], done: Callable, echo: Callable[[str], None]) -> None:
    """Frames ``rest`` rebuilt on the workers of the Dask scheduler at ``scheduler`` (an address, or a connected
    client); ``done`` gets each result."""
    from ..dask_client import connect_scheduler, results_as_completed

    own = isinstance(scheduler, str)
    client = connect_scheduler(scheduler, echo=echo) if own else scheduler
    try:
        for result in results_as_completed(client, _dask_work, [(k, frames_nm[k]) for k in rest],
                                           (skeleton, settings, variants)):
            done(*result)
    finally:
        if own:
            client.close()
