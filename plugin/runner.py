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


def check_run_settings(s, max_dt_fs: float, dt_hint: str = "") -> None:
    """The checks every run's settings share (``steps``, ``dt_fs``, ``temperature_K``, ``friction_per_ps``,
    ``report_interval``, ``checkpoint_interval`` -- defaulted to 10 report intervals -- and ``platform``);
    raises :class:`InputError` naming the command-line option."""
    if s.steps < 0:
        raise InputError(f"--steps must be >= 0, got {s.steps}")
    if not (0.0 < s.dt_fs <= max_dt_fs):
        raise InputError(f"--dt {s.dt_fs} fs is outside (0, {max_dt_fs:g}]{dt_hint}")
    if s.temperature_K <= 0.0:
        raise InputError(f"--temperature must be positive, got {s.temperature_K}")
    if s.friction_per_ps < 0.0:
        raise InputError(f"--friction must be >= 0, got {s.friction_per_ps}")
    if s.report_interval < 1:
        raise InputError(f"--report-interval must be >= 1, got {s.report_interval}")
    if s.checkpoint_interval is None:
        s.checkpoint_interval = 10 * s.report_interval
    if s.checkpoint_interval < 1 or s.checkpoint_interval % s.report_interval:
        raise InputError(f"--checkpoint-interval {s.checkpoint_interval} must be a positive multiple of "
                         f"--report-interval {s.report_interval}")
    names = [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]
    if s.platform not in names:
        raise InputError(f"OpenMM platform {s.platform!r} is not available here; available: {', '.join(names)}")


def write_run_json(out: str, settings: Dict[str, object]) -> None:
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(settings, f, indent=1)


def checkpoint_hint(checkpoint, resumed_at: Optional[int] = None) -> Callable[[], str]:
    """A function saying where the last good checkpoint of ``checkpoint`` (a CheckpointReporter) is, for
    error messages; ``resumed_at``: the step of the checkpoint a resumed run started from."""
    def hint() -> str:
        step = checkpoint.last_step if checkpoint.last_step is not None else resumed_at
        return f"last good checkpoint: step {step} in {checkpoint.path}" if step is not None else "no checkpoint yet"

    return hint


def integrate(simulation, steps: int, report_interval: int, health, checkpoint, hint: Callable[[], str],
              outputs: Sequence = (), clock=None, check_first: bool = True, progress: bool = True,
              desc: str = "") -> Tuple[int, float]:
    """Step ``simulation`` up to step ``steps`` in report-interval chunks; return ``(steps done, wall s)``.

    ``health`` (a :class:`~flashschnet.openmm.reporters.HealthReporter`) checks the state first (unless
    ``check_first`` is False, e.g. on resume) and again with a final checkpoint when the run ends off the
    checkpoint schedule; an OpenMM exception becomes :class:`SimulationInstabilityError` naming the step and
    ``hint()`` (where the last good checkpoint is). ``outputs`` (objects with ``close()``) are closed at the
    end, whatever happens; ``clock`` (an object with ``start_clock(step)``, the CSV log) starts the speed
    clock.
    """
    def check_and_checkpoint() -> None:   # outside the reporters' schedule: the start and a ragged end
        health.report(simulation, simulation.context.getState(getEnergy=True, getForces=True, getPositions=True))
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
            n = min(report_interval - simulation.currentStep % report_interval, steps - simulation.currentStep)
            try:
                simulation.step(n)
            except openmm.OpenMMException as exc:
                raise SimulationInstabilityError(
                    f"step {simulation.currentStep}: OpenMM stopped: {str(exc).splitlines()[0]}; {hint()}") from None
            if bar is not None:
                bar.update(n)
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
