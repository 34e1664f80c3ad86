"""Small helpers shared by the command-line front ends (no torch import: ``--help`` stays fast)."""
from __future__ import annotations

import argparse
import math
from typing import Any, Callable, Iterable, List, Optional, TypeVar

T = TypeVar("T")


def name_list(text: str, allowed: Iterable[str], what: str) -> List[str]:
    """Comma-separated names, each one of ``allowed``, duplicates dropped (argparse ``type=``)."""
    allowed = tuple(allowed)
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in allowed for n in names):
        raise argparse.ArgumentTypeError(f"{what} must be among {','.join(allowed)}; got {text!r}")
    return list(dict.fromkeys(names))


def backend_list(text: str) -> List[str]:
    """argparse ``type=``: comma-separated backend names (:data:`flashschnet.names.BACKENDS`)."""
    from flashschnet.names import BACKENDS

    return name_list(text, BACKENDS, "backends")


def int_type(low: Optional[int] = None, high: Optional[int] = None):
    """argparse ``type=``: an integer within ``[low, high]`` (either bound may be None)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            where = (f"between {low} and {high}" if low is not None and high is not None else
                     f">= {low}" if low is not None else f"<= {high}")
            raise argparse.ArgumentTypeError(f"must be {where}, got {value}")
        return value

    return parse


def float_type(low: Optional[float] = None, high: Optional[float] = None, low_open: bool = False,
               allow_inf: bool = False, high_open: bool = False):
    """argparse ``type=``: a number (finite unless ``allow_inf``; never NaN) within ``[low, high]`` (open at
    either end with ``low_open`` / ``high_open``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        bad = (math.isnan(value) or (math.isinf(value) and not allow_inf)
               or (low is not None and (value <= low if low_open else value < low))
               or (high is not None and (value >= high if high_open else value > high)))
        if bad:
            lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
            hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
            where = " and ".join(x for x in (lo, hi) if x)
            raise argparse.ArgumentTypeError(f"must be a {'' if allow_inf else 'finite '}number"
                                             f"{' ' + where if where else ''}, got {text!r}")
        return value

    return parse


#: the option types every command shares (limits: see flashschnet.limits)
SEED = int_type(1, 2**31 - 1)
THREADS = int_type(1, 1024)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, ``PROG: error: MESSAGE (PROG --help: the options)``,
    exit status 2 -- like every other error of the commands -- instead of argparse's usage block above it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help: the options)\n")


def check_output_file(path: str, option: str) -> None:
    """An output file can be written at ``path``: not empty, not a directory, its folder exists (or can be
    created: it is, here); raises InputError naming ``option``."""
    import os

    from flashschnet.errors import InputError

    if not path or not path.strip():
        raise InputError(f"{option} is empty; give a file name")
    if os.path.isdir(path):
        raise InputError(f"{option} {path}: is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise InputError(f"{option} {path}: {parent} is not a directory")
    _writable_dir(parent, f"{option} {path}")


def check_output_dir(path: str, option: str) -> None:
    """Create the output directory ``path`` (and parents) or raise InputError naming ``option``."""
    import os

    from flashschnet.errors import InputError

    if not path or not path.strip():
        raise InputError(f"{option} is empty; give a directory")
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"{option} {path}: exists and is not a directory")
    _writable_dir(path, f"{option} {path}")


def from_json(path: str, option: str, what: str, use: Callable[[Any], T]) -> T:
    """``use(the JSON document at path)``; a one-line InputError naming ``option`` and ``path`` when the file is
    missing or unreadable, or is not ``what`` (not JSON, or ``use`` finds a key, type or index it needs missing)."""
    import json
    import os

    from flashschnet.errors import InputError

    if not os.path.isfile(path):
        raise InputError(f"{option} {path}: {'not a file' if os.path.exists(path) else 'no such file'}")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return use(doc)
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise InputError(f"{option} {path}: not {what} ({type(exc).__name__}: {first})") from None


def _writable_dir(directory: str, what: str) -> None:
    """Create ``directory`` (and parents) if needed; InputError starting with ``what`` when that fails or it is
    not writable."""
    import os

    from flashschnet.errors import InputError

    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{what}: cannot create {directory} ({exc.strerror or type(exc).__name__})") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"{what}: {directory} is not writable")


def add_run_arguments(p: argparse.ArgumentParser, dt_fs: float, seed_help: str,
                      threads_help: str, platform_help: str = "CPU") -> None:
    """The options every simulation command shares (OpenMM units: fs, K, 1/ps; kJ/mol/nm). Every option that is a
    setting of the run defaults to None: given or not is what ``--resume`` needs to know (a resumed run takes the
    settings it is not given from its run.json); the defaults named in the help apply to a new run."""
    p.add_argument("--steps", type=int, default=None,
                   help="total number of integration steps (with --resume: default the run's own)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--platform", default=None,
                   help=f"OpenMM platform: Reference, CPU, CUDA, OpenCL (default {platform_help})")
    p.add_argument("--seed", type=int, default=None, help=seed_help + " (1 to 2147483647; default: a random one, "
                                                                    "recorded in run.json)")
    p.add_argument("--dt", type=float, default=None, help=f"time step in fs (default {dt_fs:g})")
    p.add_argument("--temperature", type=float, default=None, help="temperature in K (default 300)")
    p.add_argument("--friction", type=float, default=None, help="Langevin friction in 1/ps (default 1)")
    p.add_argument("--report-interval", type=int, default=None,
                   help="steps between frames/log rows (step 0, the starting state, is the first), at most "
                        "2147483647 (default: --steps // 100, about 100 frames; a divisor of --checkpoint-interval "
                        "when that is given)")
    p.add_argument("--checkpoint-interval", type=int, default=None,
                   help="steps between checkpoints, a multiple of --report-interval (default 10 report intervals, at most "
                        "10000 steps apart where the report interval allows)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its last checkpoint, with the settings in its run.json (the "
                        "input files are found by content: a moved model is fine, a different one is refused); "
                        "options given must agree with them, --steps may extend the run")
    p.add_argument("--threads", type=int, default=None, help=threads_help + " (1 to 1024)")
    p.add_argument("--max-force", type=float, default=None,
                   help="stop when a force component exceeds this, kJ/mol/nm (default 1e5)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def given_settings(args: argparse.Namespace, settings, exclude=("out",)) -> dict:
    """The run settings the command line gave: ``{field: value}`` for each field of the ``settings`` dataclass (but
    ``exclude``) whose option is on the command line with a value other than None (the run's own settings fill the
    rest; see :func:`add_run_arguments`). A field's option is :func:`flashschnet.openmm.runner.flag` of it, the one
    map of run settings to command-line flags (``dt_fs`` -> ``--dt``, dest ``dt``)."""
    from dataclasses import fields

    from flashschnet.openmm.runner import flag

    given = {}
    for f in fields(settings):
        value = getattr(args, flag(f.name).lstrip("-").replace("-", "_").lower(), None)
        if f.name not in exclude and value is not None:
            given[f.name] = value
    return given


#: optional dependency (import name) -> the extra of setup.py that installs it (``pip install 'flashschnet[X]'``);
#: martinize2 and insane (extra ``martini``) are run as programs: flashschnet.openmm.martini.prepare names the extra
EXTRAS = {"matplotlib": "analysis", "tables": "analysis", "pymbar": "analysis", "openmmml": "openmmml",
          "dask": "cluster", "distributed": "cluster"}


def missing_extra_message(module: str) -> str:
    """One line: ``module`` is missing, and the ``pip install`` of the extra that brings it."""
    return f"{module} is not installed (an optional dependency); pip install 'flashschnet[{EXTRAS[module]}]'"


def require_extras(*modules: str) -> None:
    """Raise :class:`~flashschnet.errors.InputError` (one line naming the extra to install) unless every one of
    the optional ``modules`` (keys of :data:`EXTRAS`) can be imported; call it before the work starts."""
    import importlib.util

    from flashschnet.errors import InputError

    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise InputError(missing_extra_message(module))


#: the exit statuses of an output that could not be written (flashschnet.errors.os_error_status), for help texts
WRITE_FAILURE_STATUSES = ("5 an output could not be written: no space left (ENOSPC, EDQUOT, EFBIG); 6 not allowed to "
                          "write it (EROFS, EACCES, EPERM); 7 another I/O error (EIO, ...) -- one line naming the file "
                          "and what to do")


def exit_statuses(*others: str) -> str:
    """A help epilog listing a command's exit statuses: 0, 2, ``others`` (e.g. ``"3 the simulation blew up"``),
    then :data:`WRITE_FAILURE_STATUSES`."""
    return "Exit status: " + "; ".join(("0 done", "2 bad input (one line naming the file or option)", *others,
                                        WRITE_FAILURE_STATUSES)) + "."


def _checkpoint_step(run_dir: str):
    """The step of ``run_dir/checkpoint.chk`` (:func:`flashschnet.openmm.runner.resumed_step`), or None when there
    is no readable one."""
    import os

    from flashschnet.errors import InputError

    try:
        from flashschnet.openmm.runner.directory import resumed_step

        return resumed_step(os.path.abspath(run_dir))
    except (ImportError, InputError):
        return None


def write_failure(exc: BaseException, run_dir=None, then: str = "then run the command again"):
    """``(exit status, one line)`` for an OSError (or an exception an OSError caused, see
    :func:`flashschnet.errors.find_os_error`), or None when ``exc`` is not one.

    The line says what failed (an :class:`~flashschnet.errors.OutputError` names the output), the file, the OS's
    reason and what to do. ``run_dir``: the run directory of a simulation command; the line then adds where the
    run stands: the last good checkpoint (its step) is kept and ``--resume`` continues once the cause is gone,
    or, without a checkpoint yet, that the run must start again; otherwise it ends with ``then``."""
    import errno
    import os

    from flashschnet.errors import OutputError, find_os_error, os_error_fix, os_error_status

    failure = find_os_error(exc)
    if failure is None:
        return None
    if isinstance(failure, OutputError):
        line = str(failure)
    else:
        code = errno.errorcode.get(failure.errno) if failure.errno is not None else None
        reason = failure.strerror or (str(failure).splitlines()[0] if str(failure) else type(failure).__name__)
        files = " -> ".join(str(f) for f in (failure.filename, failure.filename2) if f is not None)
        line = f"{files + ': ' if files else ''}{reason}{f' ({code})' if code else ''}; {os_error_fix(failure.errno)}"
    if run_dir is not None:
        step = _checkpoint_step(run_dir)
        if step is not None:
            line += f"; then continue with --resume: the last good checkpoint (step {step}) is kept"
        elif os.path.exists(os.path.join(run_dir, "run.json")):
            line += (f"; no checkpoint was written yet: then remove {run_dir} (or choose another --out) and start "
                     "again")
        else:
            line += f"; {then}"
    else:
        line += f"; {then}"
    return os_error_status(failure.errno), line


def finish(prog: str, job, summary, run_dir=None, then: str = "then run the command again") -> int:
    """Run ``job(echo)`` and turn its outcome into an exit status, printing on stderr.

    0: done (``summary(result)`` is printed); 2: bad input (:class:`InputError`, one line, no traceback) or a
    missing optional dependency (one line naming the extra to install, see :data:`EXTRAS`);
    3: the simulation blew up (:class:`SimulationInstabilityError`; the last good checkpoint is kept);
    4: the Dask cluster of an ensemble cannot go on (:class:`ClusterError`: no worker left, the scheduler gone;
    the last checkpoint is kept); 5, 6, 7: an output could not be written (an :class:`OutputError` or any other
    OSError, also one that caused another exception: no space left, not allowed to write, another I/O error; one
    line, see :func:`write_failure`; ``run_dir``: the run directory of a simulation command, whose checkpoint the
    line names; ``then``: how to go on otherwise); 130: interrupted.
    """
    import sys

    import torch  # noqa: F401  (torch before openmm/openmmtorch)

    from flashschnet.errors import ClusterError, InputError, SimulationInstabilityError

    err = lambda msg: print(f"{prog}: {msg}", file=sys.stderr)  # noqa: E731
    try:
        result = job(err)
    except InputError as exc:
        err(f"error: {exc}")
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in EXTRAS:
            raise
        err(f"error: {missing_extra_message(exc.name.split('.')[0])}")
        return 2
    except SimulationInstabilityError as exc:
        err(f"simulation unstable: {exc}")
        return 3
    except ClusterError as exc:
        err(f"cluster failed: {exc}; continue with --resume (the last checkpoint is kept)")
        return 4
    except KeyboardInterrupt:
        err("interrupted; continue with --resume (the last checkpoint is kept)")
        return 130
    except Exception as exc:          # an OSError, or an exception one caused: one line, no traceback
        failed = write_failure(exc, run_dir, then)
        if failed is None:
            raise
        err(f"error: {failed[1]}")
        return failed[0]
    err(summary(result))
    return 0
