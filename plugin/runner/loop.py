"""The step loop every run shares: report-interval chunks, health checks, checkpoints, a progress bar, and
what happens when OpenMM refuses to go on."""
from __future__ import annotations

import time
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import openmm

from ...errors import SimulationInstabilityError


def freeze_replicas(simulation, replicas: Sequence[int], n_beads: int, positions_nm: Dict[int, np.ndarray]) -> None:
    """Freeze replicas of a packed System in place (replica ``r`` owns particles ``r*N .. r*N+N-1``).

    Their particles get mass 0 in the System (OpenMM's integrators never move a massless particle), their
    positions become ``positions_nm[r]`` ([N, 3], nm; e.g. the last good frame) and their velocities 0; the
    Context is reinitialised with ``preserveState=True`` (the other replicas' positions and velocities, the
    time and the integrator's random state are kept bitwise). A frozen replica still has forces computed,
    but no force couples two replicas, so they act on nobody else; restoring finite positions keeps its
    contribution to the total energy finite.
    """
    context, system = simulation.context, simulation.system
    for r in replicas:
        for i in range(r * n_beads, (r + 1) * n_beads):
            system.setParticleMass(i, 0.0)
    context.reinitialize(preserveState=True)
    state = context.getState(getPositions=True, getVelocities=True)
    pos = state.getPositions(asNumpy=True).value_in_unit(openmm.unit.nanometer).copy()
    vel = state.getVelocities(asNumpy=True).value_in_unit(openmm.unit.nanometer / openmm.unit.picosecond).copy()
    for r in replicas:
        block = np.asarray(positions_nm[r], dtype=float).reshape(n_beads, 3)
        if not np.isfinite(block).all():
            raise ValueError(f"replica {r}: no finite positions to freeze it at")
        pos[r * n_beads:(r + 1) * n_beads] = block
        vel[r * n_beads:(r + 1) * n_beads] = 0.0
    context.setPositions(pos)
    context.setVelocities(vel)


def drop_replicas(simulation, health, bad: Sequence[Tuple[int, str]], n_beads: int, step: int,
                  reporters: Sequence = (), label: Callable[[int], object] = int,
                  hint: Optional[Callable[[], str]] = None) -> None:
    """Drop the replicas ``bad`` (``[(r, reason)]``) of a packed Context: each frozen at its last good frame
    (``health.last_good``, :func:`freeze_replicas`) and no longer written by ``reporters`` (each with an
    ``active`` mask). What a plain run and an ensemble's block do alike (``--on-blowup drop``); the bookkeeping
    (``dropped.json``, the checkpoint, the messages) is theirs. A replica with no good frame to be frozen at is a
    :class:`SimulationInstabilityError` naming it as ``label(r)`` (a walker's number in a block), with ``hint()``
    where the last good checkpoint is."""
    for r, reason in bad:
        if not np.isfinite(health.last_good[r]).all():
            raise SimulationInstabilityError(f"step {step}: replica {label(r)}: {reason}; it has no good frame to "
                                             "be frozen at" + (f"; stopping ({hint()})" if hint else ""))
    freeze_replicas(simulation, [r for r, _ in bad], n_beads, {r: health.last_good[r] for r, _ in bad})
    for r, _ in bad:
        for reporter in reporters:
            reporter.active[r] = False


def checkpoint_hint(checkpoint, resumed_at: Optional[int] = None) -> Callable[[], str]:
    """A function saying where the last good checkpoint of ``checkpoint`` (a CheckpointReporter) is, for
    error messages; ``resumed_at``: the step of the checkpoint a resumed run started from."""
    def hint() -> str:
        step = checkpoint.last_step if checkpoint.last_step is not None else resumed_at
        return f"last good checkpoint: step {step} in {checkpoint.path}" if step is not None else "no checkpoint yet"

    return hint


def _steps_to_report(reporter, simulation) -> int:
    report = reporter.describeNextReport(simulation)
    return int(report["steps"] if isinstance(report, dict) else report[0])     # dict, or OpenMM's old tuple


def _refused(simulation, exc: Exception, health, hint: Optional[Callable[[], str]]) -> None:
    """OpenMM refused to go on (``exc``): return when ``health.rescue`` dropped the replicas at fault (the run goes
    on); raise :class:`SimulationInstabilityError` naming the step (and ``hint()``) otherwise."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    rescue = getattr(health, "rescue", None)
    if rescue is not None and rescue(simulation, message):
        return
    raise SimulationInstabilityError(f"step {simulation.currentStep}: OpenMM stopped: {message}"
                                     + (f"; {hint()}" if hint is not None else "")) from None


def full_state(simulation, health, hint: Optional[Callable[[], str]] = None):
    """The state (energy, forces, positions, velocities) the reporters and checks read; when OpenMM refuses it,
    as :func:`step_with_rescue`."""
    while True:
        try:
            return simulation.context.getState(getEnergy=True, getForces=True, getPositions=True, getVelocities=True)
        except openmm.OpenMMException as exc:
            _refused(simulation, exc, health, hint)


def step_with_rescue(simulation, n: int, health, hint: Optional[Callable[[], str]] = None) -> None:
    """``simulation.step(n)`` -- one chunk of the step loop of plain runs (:func:`integrate`) and of an ensemble's
    walker blocks (:meth:`flashschnet.openmm.ensemble.block.WalkerBlock.advance`).

    When OpenMM refuses to go on (an ``OpenMMException``, e.g. "Particle coordinate is NaN" from the CPU platform,
    which checks every force evaluation), ``health.rescue`` may drop the replicas at fault (policy ``"drop"``); then
    the run goes on, and the reports due at the end of the ``n`` steps that the failure skipped are made (a failure
    in the state fetched for the reports themselves). Otherwise the exception becomes
    :class:`SimulationInstabilityError` naming the step and ``hint()`` (where the last good checkpoint is), when
    given.
    """
    before = simulation.currentStep
    due = [r for r in simulation.reporters if _steps_to_report(r, simulation) == n]
    try:
        simulation.step(n)
    except openmm.OpenMMException as exc:
        _refused(simulation, exc, health, hint)
        if simulation.currentStep == before + n:   # the steps were done, their reports were not
            state = full_state(simulation, health, hint)
            for reporter in due:
                reporter.report(simulation, state)


def integrate(simulation, steps: int, report_interval: int, health, checkpoint, hint: Callable[[], str],
              outputs: Sequence = (), clock=None, check_first: bool = True, progress: bool = True,
              desc: str = "", start_reports: Sequence = ()) -> Tuple[int, float]:
    """Step ``simulation`` up to step ``steps`` in report-interval chunks; return ``(steps done, wall s)``.

    ``health`` (a :class:`~flashschnet.openmm.reporters.HealthReporter`) checks the state first (unless
    ``check_first`` is False, e.g. on resume) and again with a final checkpoint when the run ends off the
    checkpoint schedule. Each chunk is :func:`step_with_rescue` (what happens when OpenMM refuses to go on;
    ``hint()`` says where the last good checkpoint is).
    ``outputs`` (objects with ``close()``) are closed at the end, whatever happens; ``clock`` (an object with
    ``start_clock(step)``, the CSV log) starts the speed clock. ``start_reports`` (reporters; with
    ``check_first``) record the starting state once it passed the check, before its checkpoint: a new run's
    step-0 frame and log row.
    """
    def check_and_checkpoint(reporters: Sequence = (), snapshot_first: bool = False) -> None:
        # off the schedule: the start, a ragged end. At the end the checkpoint is taken before the state is read:
        # a custom integrator's energy (the multiple-time-step one) draws random numbers on the CPU and Reference
        # platforms, and the run that goes on uninterrupted does not read that state
        blob = simulation.context.createCheckpoint() if snapshot_first else None
        state = full_state(simulation, health, hint)
        health.report(simulation, state)
        for reporter in reporters:
            reporter.report(simulation, state)
        checkpoint.save(simulation, blob)

    start = simulation.currentStep
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max(steps - start, 0), unit="step", desc=desc, dynamic_ncols=True)
    if clock is not None:
        clock.start_clock(start)
    t0 = time.perf_counter()
    try:
        if check_first:   # the starting structure, before the first step (and its frame, its log row)
            check_and_checkpoint(start_reports)
        while simulation.currentStep < steps:
            before = simulation.currentStep
            step_with_rescue(simulation, min(report_interval - before % report_interval, steps - before), health,
                             hint)
            if bar is not None:
                bar.update(simulation.currentStep - before)
        if checkpoint.last_step != simulation.currentStep:   # the last step was not a checkpoint step
            check_and_checkpoint(snapshot_first=True)
    finally:
        if bar is not None:
            bar.close()
        for o in outputs:
            o.close()
    return simulation.currentStep - start, time.perf_counter() - t0
