"""What every run in this package shares, whichever engine supplies the forces (the CG network or MARTINI):
the output directory's ``run.json`` and its resume checks, and the step loop with health checks, checkpoints
and a progress bar.

Both :func:`flashschnet.openmm.simulate.run` and :func:`flashschnet.openmm.martini.run.run_martini` read
top to bottom as: settings -> :func:`open_run_dir` -> build the Simulation -> reporters ->
:func:`integrate`.
"""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np
import openmm

from ..errors import InputError, SimulationInstabilityError


def open_run_dir(out: str, resume: bool, current: Dict[str, object], fixed: Sequence[str],
                 inherit: Iterable[str] = (), defaults: Optional[Dict[str, object]] = None) -> Dict[str, object]:
    """Check that ``out`` can hold a new run (or, with ``resume``, holds one started with the same settings).

    Parameters
    ----------
    out : str
        Output directory (absolute).
    resume : bool
        Continue the run in ``out`` (needs ``run.json`` and ``checkpoint.chk`` there).
    current : dict
        This invocation's settings.
    fixed : sequence of str
        Settings a resumed run must share with the run it continues.
    inherit : iterable of str
        Settings that, left unset (``None``) on resume, take the stored value.
    defaults : dict, optional
        Values of settings that run.json files written before the setting existed implicitly had.

    Returns
    -------
    dict
        The inherited values (empty for a new run); the caller applies them.

    Raises
    ------
    InputError
        ``out`` already holds a run (without ``resume``), holds none (with it), or a fixed setting differs.
    """
    run_json = os.path.join(out, "run.json")
    ckpt = os.path.join(out, "checkpoint.chk")
    if not resume:
        if os.path.exists(run_json) or os.path.exists(ckpt):
            raise InputError(f"{out}: already holds a run; continue it with --resume or choose another --out")
        return {}
    if os.path.exists(run_json) and not os.path.exists(ckpt):
        raise InputError(f"{out}: nothing to resume: the run there stopped before its first checkpoint (run.json "
                         "but no checkpoint.chk); remove the directory or choose another --out and start without "
                         "--resume")
    if not os.path.exists(run_json) or not os.path.exists(ckpt):
        raise InputError(f"{out}: nothing to resume (no run.json and checkpoint.chk); start without --resume")
    with open(run_json) as f:
        old = json.load(f)
    inherit, defaults, inherited = set(inherit), defaults or {}, {}
    for key in fixed:
        new_value = current.get(key)
        if key in inherit and new_value is None:
            inherited[key] = old.get(key)
        elif old.get(key, defaults.get(key)) != new_value:
            raise InputError(f"{out}: --resume with {key}={new_value!r}, but the run was started with "
                             f"{old.get(key)!r}; use the same settings")
    return inherited


#: the largest step number a DCD file records (its header holds C ints)
MAX_DCD_STEP = 2**31 - 1


def check_run_settings(s, max_dt_fs: float, dt_hint: str = "") -> None:
    """The checks every run's settings share (``steps``, ``dt_fs``, ``temperature_K``, ``friction_per_ps``,
    ``report_interval``, ``checkpoint_interval`` -- defaulted to 10 report intervals --, ``platform``, and,
    where the settings have them, ``seed``, ``threads`` and ``max_force``; see :mod:`flashschnet.limits`);
    raises :class:`InputError` naming the command-line option."""
    from ..limits import check_finite, check_seed, check_threads

    if s.steps < 0:
        raise InputError(f"--steps must be >= 0, got {s.steps}")
    if not (0.0 < s.dt_fs <= max_dt_fs):
        raise InputError(f"--dt {s.dt_fs} fs is outside (0, {max_dt_fs:g}]{dt_hint}")
    check_finite(s.temperature_K, "--temperature", "K", positive=True)
    check_finite(s.friction_per_ps, "--friction", "1/ps", nonnegative=True)
    if not 1 <= s.report_interval <= MAX_DCD_STEP:
        raise InputError(f"--report-interval must be between 1 and {MAX_DCD_STEP} (DCD files hold step numbers as "
                         f"C ints), got {s.report_interval}")
    check_seed(getattr(s, "seed", None))
    check_threads(getattr(s, "threads", None))
    max_force = getattr(s, "max_force", 1.0)
    if not max_force > 0.0:
        raise InputError(f"--max-force must be positive (kJ/mol/nm; inf: no limit), got {max_force}")
    if s.checkpoint_interval is None:
        s.checkpoint_interval = 10 * s.report_interval
    if s.checkpoint_interval < 1 or s.checkpoint_interval % s.report_interval:
        raise InputError(f"--checkpoint-interval {s.checkpoint_interval} must be a positive multiple of "
                         f"--report-interval {s.report_interval}")
    names = [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]
    if s.platform not in names:
        raise InputError(f"OpenMM platform {s.platform!r} is not available here; available: {', '.join(names)}")


def run_dir(out: str) -> str:
    """``--out`` as an absolute path; an empty one is refused (it would mean the current directory)."""
    if not out or not str(out).strip():
        raise InputError("--out is empty; give the output directory")
    return os.path.abspath(out)


def make_run_dir(out: str) -> None:
    """Create the output directory ``out`` (and its parents), or raise :class:`InputError` saying why not."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"--out {out}: exists and is not a directory; choose another --out")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot create the directory ({exc.strerror or type(exc).__name__}); "
                         "choose a writable place") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: the directory is not writable; choose a writable place")


def write_run_json(out: str, settings: Dict[str, object]) -> None:
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(settings, f, indent=1)


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


def integrate(simulation, steps: int, report_interval: int, health, checkpoint, hint: Callable[[], str],
              outputs: Sequence = (), clock=None, check_first: bool = True, progress: bool = True,
              desc: str = "") -> Tuple[int, float]:
    """Step ``simulation`` up to step ``steps`` in report-interval chunks; return ``(steps done, wall s)``.

    ``health`` (a :class:`~flashschnet.openmm.reporters.HealthReporter`) checks the state first (unless
    ``check_first`` is False, e.g. on resume) and again with a final checkpoint when the run ends off the
    checkpoint schedule. When OpenMM refuses to go on (an ``OpenMMException``, e.g. "Particle coordinate is
    NaN" from the CPU platform, which checks every force evaluation), ``health.rescue`` may drop the replicas
    at fault (policy ``"drop"``); then the run goes on, and the reports the failure skipped are made (a failure
    in the state fetched for the reports themselves). Otherwise the exception becomes
    :class:`SimulationInstabilityError` naming the step and ``hint()`` (where the last good checkpoint is).
    ``outputs`` (objects with ``close()``) are closed at the end, whatever happens; ``clock`` (an object with
    ``start_clock(step)``, the CSV log) starts the speed clock.
    """
    def failed(exc: Exception) -> bool:
        """True when health dropped the replicas that made OpenMM fail (go on); raises otherwise."""
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        rescue = getattr(health, "rescue", None)
        if rescue is not None and rescue(simulation, message):
            return True
        raise SimulationInstabilityError(
            f"step {simulation.currentStep}: OpenMM stopped: {message}; {hint()}") from None

    def full_state():
        while True:
            try:
                return simulation.context.getState(getEnergy=True, getForces=True, getPositions=True,
                                                   getVelocities=True)
            except openmm.OpenMMException as exc:
                failed(exc)

    def check_and_checkpoint() -> None:   # outside the reporters' schedule: the start and a ragged end
        health.report(simulation, full_state())
        checkpoint.save(simulation)

    start = simulation.currentStep
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max(steps - start, 0), unit="step", desc=desc, dynamic_ncols=True)
    if clock is not None:
        clock.start_clock(start)
    t0 = time.perf_counter()
    try:
        if check_first:   # the starting structure, before the first step
            check_and_checkpoint()
        while simulation.currentStep < steps:
            before = simulation.currentStep
            n = min(report_interval - before % report_interval, steps - before)
            due = [r for r in simulation.reporters if _steps_to_report(r, simulation) == n]
            try:
                simulation.step(n)
            except openmm.OpenMMException as exc:
                failed(exc)
                if simulation.currentStep == before + n:   # the steps were done, their reports were not
                    state = full_state()
                    for reporter in due:
                        reporter.report(simulation, state)
            if bar is not None:
                bar.update(simulation.currentStep - before)
        if checkpoint.last_step != simulation.currentStep:   # the last step was not a checkpoint step
            check_and_checkpoint()
    finally:
        if bar is not None:
            bar.close()
        for o in outputs:
            o.close()
    return simulation.currentStep - start, time.perf_counter() - t0


def ns_per_day(steps: int, dt_ps: float, wall_s: float) -> float:
    """Simulated nanoseconds per wall-clock day (NaN for an empty or instant run)."""
    return steps * dt_ps * 1e-3 / (wall_s / 86400.0) if wall_s > 0 and steps > 0 else float("nan")
