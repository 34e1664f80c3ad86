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


def add_run_arguments(p: argparse.ArgumentParser, dt_fs: float, report_interval: int, seed_help: str,
                      threads_help: str) -> None:
    """The options every simulation command shares (OpenMM units: fs, K, 1/ps; kJ/mol/nm)."""
    p.add_argument("--steps", type=int, required=True, help="total number of integration steps")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--platform", default="CPU", help="OpenMM platform: Reference, CPU, CUDA, OpenCL (default CPU)")
    p.add_argument("--seed", type=int, default=None, help=seed_help)
    p.add_argument("--dt", type=float, default=dt_fs, help=f"time step in fs (default {dt_fs:g})")
    p.add_argument("--temperature", type=float, default=300.0, help="temperature in K (default 300)")
    p.add_argument("--friction", type=float, default=1.0, help="Langevin friction in 1/ps (default 1)")
    p.add_argument("--report-interval", type=int, default=report_interval,
                   help=f"steps between frames/log rows (default {report_interval})")
    p.add_argument("--checkpoint-interval", type=int, default=None,
                   help="steps between checkpoints, a multiple of --report-interval (default 10 report intervals)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--threads", type=int, default=None, help=threads_help)
    p.add_argument("--max-force", type=float, default=1.0e5,
                   help="stop when a force component exceeds this, kJ/mol/nm (default 1e5)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


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
