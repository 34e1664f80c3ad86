"""An ensemble run from start to finish, whatever force field builds its walkers' System.

:func:`run_ensemble` is what ``flashschnet-simulate --temperatures/--blocks/--workers/--scheduler`` runs once the
CG run (:func:`flashschnet.openmm.simulate.run`) has checked its input and made the block builder
(:class:`flashschnet.openmm.cg_setup.CGBuilder`): the blocks (in this process, or Dask actors: :mod:`.cluster`),
the run directory and the CG run's own start files, the driving loop (:func:`.driver.drive`), and a
:class:`~flashschnet.openmm.runner.RunResult` as a plain run reports it. :func:`finish_rung_files` completes the
per-temperature trajectories of a run that stopped after its last checkpoint but before it wrote them.
"""
from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence

from ...limits import check_replicas
from ..runner import RunResult, make_run_dir
from .demux import demultiplex, rung_trajectory
from .driver import EnsemblePlan, LocalBlocks, block_specs, drive


def run_ensemble(plan: EnsemblePlan, builder, particles: int, trajectory_topology, write_start: Callable[[], None],
                 resume: bool = False, progress: bool = True, echo: Callable[[str], None] = print,
                 workers: Optional[int] = None, scheduler: Optional[str] = None,
                 notes: Sequence[str] = ()) -> RunResult:
    """Run (or resume) ``plan`` on blocks of walkers built by ``builder`` (see :mod:`.block`).

    Parameters
    ----------
    plan : EnsemblePlan
    builder : callable
        ``builder(replicas) -> BlockSystem`` (picklable for Dask workers).
    particles : int
        Particles of one walker (the largest block's System is checked against the limits first).
    trajectory_topology : openmm.app.Topology
        One walker's topology (the per-temperature trajectories).
    write_start : callable
        Writes a new run's own files (``run.json``, the structures) once the run directory exists.
    workers, scheduler
        A local Dask cluster of ``workers`` processes, or the existing one at ``scheduler``; neither: the blocks
        run in this process.
    notes : sequence of str
        The result's notes (the force field's, e.g. the CG mapping's).

    The size and the Dask cluster are checked before the first file is written. Raises what
    :func:`~.driver.drive` raises; the blocks are closed whatever happens.
    """
    specs = block_specs(plan)
    check_replicas(max(len(sp.walkers) for sp in specs), particles)
    blocks = None
    if workers is not None or scheduler:
        from .cluster import DaskBlocks

        blocks = DaskBlocks(builder, specs, workers=workers, scheduler=scheduler,
                            threads_per_worker=plan.threads or 1, echo=echo)
    try:
        make_run_dir(plan.out)
        if not resume:
            write_start()
        if blocks is None:
            blocks = LocalBlocks(builder, specs)
        what = (f"parallel tempering: {plan.walkers} walkers at {', '.join(f'{t:.1f}' for t in plan.temperatures_K)} K, "
                f"exchanges every {plan.exchange_interval} steps" if plan.tempering
                else f"ensemble: {plan.walkers} replicas")
        echo(f"note: {what}; {plan.blocks} block(s) of {', '.join(str(len(sp.walkers)) for sp in specs)} walkers"
             + (f" on {workers} local Dask workers" if workers else f" on the Dask cluster at {scheduler}"
                if scheduler else " in this process"))
        r = drive(plan, blocks, specs, resume=resume, progress=progress, echo=echo,
                  trajectory_topology=trajectory_topology)
    finally:
        if blocks is not None:
            blocks.close()
    return RunResult(out=plan.out, steps_done=r.steps_done, replicas=r.walkers, n_beads=particles,
                     ns_per_day_per_replica=r.ns_per_day_aggregate / r.walkers, notes=list(notes),
                     dropped=r.dropped, on_blowup=plan.on_blowup,
                     temperatures_K=r.temperatures_K if plan.tempering else [], acceptance=r.acceptance,
                     rollbacks=r.rollbacks, timings=r.timings)


def finish_rung_files(out: str, temperatures_K: Sequence[float], report_interval: int, dt_ps: float,
                      topology: Callable[[], object], damaged_rungs: Callable[[str, Sequence[float]], List[str]],
                      echo: Callable[[str], None] = print) -> None:
    """A tempering run at its step count whose per-temperature files (``T<K>.dcd``) are missing, older than
    ``walkers.csv`` (the run stopped, e.g. on a full disk, after its last checkpoint but before it demultiplexed),
    or damaged (``damaged_rungs(out, temperatures_K)`` lists the problems: the caller passes
    :func:`flashschnet.openmm.run_checks.damaged_rungs`, a reader of run directories, which this package does not
    import): write them now from the walker files, as the end of the run would have. ``topology()``: one walker's topology (called only when there is
    something to write)."""
    log = os.path.join(out, "walkers.csv")
    if not os.path.exists(log):
        return
    missing = [os.path.basename(rung_trajectory(out, t)) for t in temperatures_K
               if not os.path.exists(rung_trajectory(out, t))]
    stale = [t for t in temperatures_K if os.path.exists(rung_trajectory(out, t))
             and os.path.getmtime(rung_trajectory(out, t)) < os.path.getmtime(log)]
    damaged = [] if missing or stale else damaged_rungs(out, temperatures_K)
    if not missing and not stale and not damaged:
        return
    demultiplex(out, temperatures_K, report_interval, topology(), dt_ps, len(temperatures_K))
    why = damaged or ([f"{', '.join(missing)}: missing"] if missing else [])
    echo(f"note: {'; '.join(why) + '; ' if why else ''}wrote the per-temperature trajectories "
         f"({len(temperatures_K)} T<K>.dcd files) from the walkers' (replica_WWW.dcd, walkers.csv): the run had not "
         "finished them" + (" whole" if why else ""))
