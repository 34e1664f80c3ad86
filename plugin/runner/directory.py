"""The run directory and the settings every run shares: ``--out`` checks, ``run.json`` and the resume rules,
the limits of the common run options."""
from __future__ import annotations

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence

from ...errors import InputError
from ..platforms import loaded_platforms, missing_platform


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
    from ...limits import check_finite, check_seed, check_threads

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
    if s.platform not in loaded_platforms():
        raise InputError(missing_platform(s.platform))


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


def write_dropped(path: str, dropped: List[dict]) -> None:
    """``dropped.json`` (atomic): the replicas a run dropped, ``[{replica, step, reason}]``; removed when
    nothing was dropped."""
    if not dropped:
        if os.path.exists(path):
            os.remove(path)
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dropped, f, indent=1)
    os.replace(tmp, path)
