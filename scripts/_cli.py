"""Small helpers shared by the command-line front ends (no torch import: ``--help`` stays fast)."""
from __future__ import annotations

import argparse
import platform
from typing import Iterable, List


def name_list(text: str, allowed: Iterable[str], what: str) -> List[str]:
    """Comma-separated names, each one of ``allowed``, duplicates dropped (argparse ``type=``)."""
    allowed = tuple(allowed)
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in allowed for n in names):
        raise argparse.ArgumentTypeError(f"{what} must be among {','.join(allowed)}; got {text!r}")
    return list(dict.fromkeys(names))


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def finish(prog: str, job, summary) -> int:
    """Run ``job(echo)`` and turn its outcome into an exit status, printing on stderr.

    0: done (``summary(result)`` is printed); 2: bad input (:class:`InputError`, one line, no traceback);
    3: the simulation blew up (:class:`SimulationInstabilityError`; the last good checkpoint is kept);
    130: interrupted.
    """
    import sys

    import torch  # noqa: F401  (torch before openmm/openmmtorch)

    from flashschnet.errors import InputError, SimulationInstabilityError

    err = lambda msg: print(f"{prog}: {msg}", file=sys.stderr)  # noqa: E731
    try:
        result = job(err)
    except InputError as exc:
        err(f"error: {exc}")
        return 2
    except SimulationInstabilityError as exc:
        err(f"simulation unstable: {exc}")
        return 3
    except KeyboardInterrupt:
        err("interrupted; continue with --resume (the last checkpoint is kept)")
        return 130
    err(summary(result))
    return 0
