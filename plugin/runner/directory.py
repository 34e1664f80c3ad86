"""The run directory: ``--out`` checks, ``run.json`` and the resume rules, the default report and checkpoint
intervals (the checks of the settings every run shares: :class:`~.settings.DynamicsSettings`)."""
from __future__ import annotations

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence

from ...errors import InputError
from ...safeload import read_json_object
from .resume import resume_settings


def open_run_dir(out: str, resume: bool, current: Dict[str, object], fixed: Sequence[str],
                 given: Optional[Iterable[str]] = None, files: Optional[Dict[str, Sequence[str]]] = None,
                 needed: Iterable[str] = (), defaults: Optional[Dict[str, object]] = None,
                 options: Optional[Dict[str, str]] = None, write: bool = True) -> Dict[str, object]:
    """Check that ``out`` can hold a new run, or, with ``resume``, holds one these settings may continue.

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
    given : iterable of str, optional
        The settings this invocation gave; a resumed run takes the others from ``run.json``. Default: those
        whose value is not None.
    files : dict, optional
        Input-file settings recorded by content (key -> members of a folder, ``()`` for a file); see
        :mod:`.resume`.
    needed : iterable of str
        File settings a resumed run reads (they must still exist with the recorded content).
    defaults : dict, optional
        Values of settings that run.json files written before the setting existed implicitly had.
    options : dict, optional
        Command-line spellings of settings, for messages (default ``--key-with-dashes``).
    write : bool
        Bring ``run.json`` up to date (False: only check, nothing written -- a caller that checks a resume before
        other long work, e.g. ``flashschnet-compare`` before MARTINI).

    Returns
    -------
    dict
        The settings to apply (empty for a new run): for a resumed run, ``run.json``'s values of those not given,
        and the given files' absolute paths. ``run.json`` is brought up to date (a new ``steps``, a moved
        file's path) unless the run is already at its step count (see :func:`resumed_step`).

    Raises
    ------
    InputError
        ``out`` already holds a run (without ``resume``), holds none (with it), a given setting differs from the
        run's (all of them listed), or a needed input file is gone or changed.
    """
    run_json = os.path.join(out, "run.json")
    ckpt = os.path.join(out, "checkpoint.chk")
    if not resume:
        if os.path.exists(run_json) or os.path.exists(ckpt):
            raise InputError(f"{out}: already holds a run; continue it with --resume or choose another --out")
        check_new_run_dir(out)
        return {}
    if os.path.exists(run_json) and not os.path.exists(ckpt):
        raise InputError(f"{out}: nothing to resume: the run there stopped before its first checkpoint (run.json "
                         "but no checkpoint.chk); remove the directory or choose another --out and start without "
                         "--resume")
    if not os.path.exists(run_json) or not os.path.exists(ckpt):
        raise InputError(f"{out}: nothing to resume (no run.json and checkpoint.chk); start without --resume")
    stored = read_run_json(out)
    check_run_files(out)                           # every file the resume reads or appends to, before any change
    if given is None:
        given = [k for k, v in current.items() if v is not None]
    values, record = resume_settings(out, stored, current, given, fixed, files=files or {}, needed=needed,
                                     defaults=defaults, options=options or {})
    steps = values.get("steps", current.get("steps"))
    if write and record != stored and (steps is None or resumed_step(out) < steps):
        write_run_json(out, record)
    return values


def check_run_files(out: str) -> Dict[str, object]:
    """The files of the run in ``out`` a resume reads or appends to, checked against each other and its checkpoint
    (:func:`flashschnet.openmm.run_checks.check_resumable`): any damage is one :class:`InputError` line naming the
    file and what to do. Returns the checkpoint's header."""
    from ..run_checks import check_resumable
    from ..run_reader import RunDir

    return check_resumable(RunDir(out, strict=True))


def read_run_json(out: str) -> Dict[str, object]:
    """``OUT/run.json`` as a dict; a file that is not a JSON object is one :class:`InputError` line."""
    return read_json_object(os.path.join(out, "run.json"), "it should be the run.json the run wrote")


def resumed_step(out: str) -> int:
    """The step of the checkpoint in ``out`` (where a resumed run starts)."""
    from ..reporters.files import read_checkpoint

    path = os.path.join(out, "checkpoint.chk")
    try:
        meta, _ = read_checkpoint(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); the run cannot be resumed "
                         "from it") from None
    try:
        return int(meta["step"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: its header records no step ({exc}); the run cannot be resumed from it") from None


def require_new_run_inputs(resume: bool, inputs: Sequence[tuple]) -> None:
    """A new run (not ``resume``) needs every input in ``inputs`` -- ``(name, value)`` pairs such as
    ``("--model", s.model)``; raise one :class:`InputError` naming all that are None."""
    missing = [name for name, value in inputs if value is None]
    if not resume and missing:
        raise InputError(f"give {' and '.join(missing)} for a new run (or --resume --out DIR to continue the run "
                         "in DIR with its own settings)")


def nothing_to_do(out: str, at: int, steps: int) -> str:
    """The line a resume prints when the run in ``out`` is already at step ``at`` >= ``steps``."""
    return (f"nothing to do: the run in {out} is at step {at}, and --steps is {steps}; give a larger --steps to "
            "extend it")


#: the largest step number a DCD file records (its header holds C ints)
MAX_DCD_STEP = 2**31 - 1

#: frames (besides step 0's) a run writes at the default report interval (:func:`default_report_interval`)
DEFAULT_FRAMES = 100


def default_report_interval(steps: int, checkpoint_interval: Optional[int] = None) -> int:
    """The report interval of a run that was given none: ``steps // 100`` (at least 1), so that a run writes
    about :data:`DEFAULT_FRAMES` frames after its step-0 frame (exactly 101 frames in all when ``steps`` is a
    multiple of 100; e.g. ``--steps 200`` -> 2, ``--steps 500`` -> 5, ``--steps 1000000`` -> 10000).

    With a ``checkpoint_interval`` given (>= 1), the interval is the largest divisor of it not above
    ``steps // 100``, as checkpoints must fall on report steps (``--checkpoint-interval 1000`` with ``--steps
    30000`` -> 250, not 300). The result is at most :data:`MAX_DCD_STEP`. Parallel tempering needs nothing more:
    the blocks meet at every report and every exchange step, whatever the two intervals are
    (:mod:`flashschnet.openmm.ensemble.driver`).
    """
    base = min(max(int(steps) // DEFAULT_FRAMES, 1), MAX_DCD_STEP)
    if checkpoint_interval is None or int(checkpoint_interval) < 1 or int(checkpoint_interval) % base == 0:
        return base
    c = int(checkpoint_interval)
    best, d = 1, 1
    while d * d <= c:
        if c % d == 0:
            for k in (d, c // d):
                if best < k <= base:
                    best = k
        d += 1
    return best


#: checkpoints at the default interval are at most this many steps apart (where the report interval allows)
MAX_DEFAULT_CHECKPOINT_STEPS = 10_000


def default_checkpoint_interval(report_interval: int) -> int:
    """The checkpoint interval of a run that was given none: 10 report intervals, but fewer where that would be
    more than :data:`MAX_DEFAULT_CHECKPOINT_STEPS` steps (and at least one), so a killed long run with the
    default report interval (``steps // 100``) loses minutes, not a tenth of the run: 100 -> 1000, 1000 -> 10000,
    3000 -> 9000, 20000 -> 20000."""
    r = int(report_interval)
    return r * max(1, min(10, MAX_DEFAULT_CHECKPOINT_STEPS // r))


def few_frames_warning(steps: int, report_interval: int) -> Optional[str]:
    """One line (for ``warning: ...``) when a run of ``steps`` steps writes fewer than 2 frames at ``report_interval``
    (only its step-0 frame: ``0 < steps < report_interval``), saying what to pass instead; None otherwise (a run of
    0 steps writes its starting state on purpose)."""
    if not 0 < int(steps) < int(report_interval):
        return None
    auto = default_report_interval(steps)
    return (f"--steps {steps} with --report-interval {report_interval} writes only the starting frame (step 0) and "
            f"its log row; leave --report-interval out (here {auto}: {int(steps) // auto + 1} frames) or pass "
            f"--steps of at least {report_interval}")


def run_dir(out: str) -> str:
    """``--out`` as an absolute path; an empty one is refused (it would mean the current directory)."""
    if not out or not str(out).strip():
        raise InputError("--out is empty; give the output directory")
    return os.path.abspath(out)


def check_new_run_dir(out: str) -> None:
    """Raise :class:`InputError` now, before any model is loaded, when ``out`` could not be made: it is a file, or
    the nearest folder that exists above it is not writable. Creates nothing (:func:`make_run_dir` does, later)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError(f"--out {out}: exists and is not a directory; choose another --out")
    above = out
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise InputError(f"--out {out}: {above} is a file, not a directory; choose another --out")
    if not os.access(above, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: {above} is not writable; choose a writable place")


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
    """``OUT/run.json`` (atomic: :func:`flashschnet.atomic.atomic_write`; a write that fails keeps the previous
    file and raises :class:`~flashschnet.errors.OutputError`)."""
    from ...atomic import atomic_write

    with atomic_write(os.path.join(out, "run.json"), "w", what="writing the run settings", encoding="utf-8") as f:
        json.dump(settings, f, indent=1)


def write_dropped(path: str, dropped: List[dict]) -> None:
    """``dropped.json`` (atomic): the replicas a run dropped, ``[{replica, step, reason}]``; removed when
    nothing was dropped."""
    from ...atomic import atomic_write

    if not dropped:
        if os.path.exists(path):
            os.remove(path)
        return
    with atomic_write(path, "w", what="writing the list of dropped replicas") as f:
        json.dump(dropped, f, indent=1)
