"""Threads on an idle and a loaded machine: ns/day of a CG run per thread choice, the default against the best.

    python tools/benchmarks/threads_benchmark.py [--quick] [--rounds 3] [--steps 200] [--replicas 1,2,4,8]
                                                 [--models exact,compressed] [--configs default,threads1,...]
                                                 [--loads idle,loaded] [--json docs/threads.json] [--update-doc [FILE]]
                                                 [--wait-quiet SECONDS]
    python tools/benchmarks/threads_benchmark.py --render docs/threads.json [--update-doc]    # no measuring

Every measurement is a fresh Python process (``--worker``: libgomp reads its variables once, when PyTorch loads,
so each configuration needs its own process and environment) that imports flashschnet as the command-line
programs do and calls :func:`flashschnet.openmm.simulate.run` -- the code behind ``flashschnet-simulate`` -- on
trp-cage (``examples/1L2Y_trpcage.pdb``) with ``examples/trpcage_trained.pt``, exact (``compress="none"``) and
with float32 filter tables (``compress="float32"``), for each replica count in turn. A run is ``--warmup``
untimed steps (TorchScript's first calls) and then ``--steps / R`` timed steps (at least 10), cut short after
``--cell-seconds``; a reporter notes the wall time after every step, so the setup (model load, System, Context)
is left out and the run's own frames, log rows and checkpoint are in. Reported: aggregate ns/day (R x per
replica, 4 fs steps).

Thread choices (:data:`CONFIGS`, ``{cores}`` = the cores this process may use, 2 on the 2-core machine; the
thread variables of the caller's environment are removed first, :data:`THREAD_ENV`):

* ``default``: nothing set: what ``flashschnet-simulate`` does by itself (:mod:`flashschnet.threads`: PyTorch on
  the cores that are free when the run starts);
* ``threads1``: ``--threads 1``;
* ``before``: ``--threads {cores}``, PyTorch's own default count with libgomp's default wait (spin about 3 ms):
  the baseline the ``default`` choice is measured against;
* ``passive`` / ``active``: ``--threads {cores}`` with ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep at
  once) / ``ACTIVE`` (they spin);
* not measured unless named in ``--configs``: ``threads2`` (``--threads 2``) and ``omm1`` (the default with
  OpenMM's CPU platform on one thread, ``OPENMM_CPU_THREADS=1``; OpenMM's default is one per core).

Loads: ``idle`` (nothing started; the cores other processes used meanwhile are measured from /proc/stat and the
section says so when the machine was not idle) and ``loaded`` (one core kept busy by a spinning process,
``python -c "while True: pass"``, started before the round's measurements and killed after them). Each round
measures every configuration under each load, in a shuffled order; the table gives the median over
``--rounds``, the best choice per row and how far the default is from it (the target: at most 20% slower).

Prints the section and writes the JSON (``--json``, default docs/threads.json; ``--json ''``: none);
``--update-doc [FILE]`` replaces the text between ``<!-- threads:begin -->`` and ``<!-- threads:end -->`` of
FILE (default docs/benchmarks.md). ``--quick``: 1 round, 100 steps, replicas 1 and 8 (about 2 minutes; the
full run about 15 on the 2-core machine). ``--wait-quiet SECONDS``: before each round and load, wait (at most
that long) until other processes use less than 0.15 cores.

The configurations (:data:`CONFIGS`, :data:`THREAD_ENV`), the run's clock and the report (rows, verdict, the
Markdown section) are :mod:`flashschnet.openmm.benchmark.threads`; this script measures.
"""
from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from flashschnet.openmm.benchmark.threads import (CONFIGS, DEFAULT_CONFIGS, DT_FS, LOADS, MODELS, Clock, TimeUp,
                                                  ns_per_day, render, resolve, splice, timed_steps, worker_env)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
PDB = ROOT / "examples" / "1L2Y_trpcage.pdb"
MODEL = ROOT / "examples" / "trpcage_trained.pt"
#: the worker's result line on stdout starts with this
RESULT = "THREADS-BENCHMARK-RESULT "


# -- the worker (one process per configuration and round) -----------------------------------------------------

def worker(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Measure every cell of ``spec`` in this process; the environment is the configuration's. flashschnet is
    imported first, as the command-line programs do (it may set the OpenMP defaults before torch loads)."""
    import tempfile

    from flashschnet.openmm.simulate import RunSettings, run

    import torch

    initial = torch.get_num_threads()
    cells = []
    for cell in spec["cells"]:
        with tempfile.TemporaryDirectory(prefix="threads-benchmark-") as tmp:
            clock = Clock(spec["warmup"], spec["cell_seconds"])
            total = spec["warmup"] + cell["steps"]
            report = 25
            s = RunSettings(pdb=spec["pdb"], model=spec["model"], out=os.path.join(tmp, "run"), steps=total,
                            replicas=cell["replicas"], seed=1, report_interval=report,
                            checkpoint_interval=report * -(-total // report), threads=spec["threads"],
                            compress=MODELS[cell["model"]])
            row = dict(cell)
            t0 = time.perf_counter()
            try:
                try:
                    run(s, progress=False, echo=lambda m: None, reporters=[clock])
                except TimeUp:
                    row["capped"] = True
                row["run_s"] = time.perf_counter() - t0
                row["timed_steps"] = clock.marks[-1][0] - spec["warmup"] if clock.marks else 0
                row["ns_per_day"] = ns_per_day(clock.marks, spec["warmup"], cell["replicas"])
            except Exception as exc:     # recorded in the table, the other cells go on
                row["error"] = f"{type(exc).__name__}: {exc}"
            row["torch_threads"] = torch.get_num_threads()      # what the run used
            cells.append(row)
    import openmm

    return {"cells": cells, "torch_version": torch.__version__, "openmm_version": openmm.version.version,
            "torch_initial_threads": initial,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "gomp_spincount": os.environ.get("GOMP_SPINCOUNT")}


# -- the driver -----------------------------------------------------------------------------------------------

def cpu_busy_s() -> Optional[tuple]:
    """(busy, steal): CPU seconds all processes of the machine have used since boot (``/proc/stat``: all but
    idle, iowait and steal) and those the hypervisor took (steal); None where that cannot be read."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    steal = fields[7] if len(fields) > 7 else 0
    return (sum(fields[:8]) - fields[3] - fields[4] - steal) / tick, steal / tick


def _children_cpu_s() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_worker(config: str, spec: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
    """One worker process for ``config``; its result, or ``{"error": ...}``. ``background_cores``: the cores
    other processes (the spinner included) kept busy on average while it ran (None where /proc/stat is
    unreadable)."""
    spec = dict(spec, threads=resolve(config)["threads"])
    busy0, own0, t0 = cpu_busy_s(), _children_cpu_s(), time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                              env=worker_env(config), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    busy1, own1, wall = cpu_busy_s(), _children_cpu_s(), time.perf_counter() - t0
    known = busy0 is not None and busy1 is not None and wall > 0
    extra = {"background_cores": max(0.0, (busy1[0] - busy0[0] - (own1 - own0)) / wall) if known else None,
             "steal_cores": (busy1[1] - busy0[1]) / wall if known else None}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT):
            return dict(json.loads(line[len(RESULT):]), **extra)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return dict({"error": f"exit {proc.returncode}: {tail}"}, **extra)


@contextmanager
def load(kind: str) -> Iterator[None]:
    """``loaded``: one process spinning on a core for the duration (killed after); ``idle``: nothing."""
    if kind == "idle":
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)          # let it take its core
        yield
    finally:
        spinner.kill()
        spinner.wait()


def wait_quiet(limit_s: float, quiet_cores: float = 0.15, sample_s: float = 2.0) -> Optional[float]:
    """Wait (at most ``limit_s`` seconds) until other processes use less than ``quiet_cores`` cores over
    ``sample_s``; the last sample (None where /proc/stat is unreadable)."""
    deadline = time.monotonic() + limit_s
    while True:
        b0, t0 = cpu_busy_s(), time.perf_counter()
        time.sleep(sample_s)
        b1 = cpu_busy_s()
        if b0 is None or b1 is None:
            return None
        busy = (b1[0] - b0[0]) / (time.perf_counter() - t0)
        if busy < quiet_cores or time.monotonic() >= deadline:
            print(f"other processes: {busy:.2f} cores busy" + ("" if busy < quiet_cores else
                                                                  f"; waited {limit_s:g} s, measuring anyway"),
                  flush=True)
            return busy


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def cpu_model() -> str:
    """The CPU's name as /proc/cpuinfo gives it (else :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or "unknown"


def busiest(n: int = 3) -> List[str]:
    """The ``n`` processes using the most CPU (``ps``), to tell what else ran; empty where ps is missing."""
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True,
                             timeout=10).stdout.splitlines()[1:n + 1]
    except (OSError, subprocess.SubprocessError):
        return []
    return [" ".join(line.split()) for line in out]


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    """Every configuration, load and round; the raw records and the machine."""
    cells = [{"model": m, "replicas": r, "steps": timed_steps(args.steps, r)}
             for m in args.models for r in args.replicas]
    spec = {"pdb": str(args.pdb), "model": str(args.model), "warmup": args.warmup,
            "cell_seconds": args.cell_seconds, "cells": cells}
    records: List[Dict[str, Any]] = []
    loads: List[Dict[str, Any]] = []
    versions: Dict[str, Any] = {}
    rng = random.Random(args.seed)
    t_start = time.perf_counter()
    for rnd in range(args.rounds):
        for kind in args.loads:
            order = list(args.configs)
            rng.shuffle(order)
            if args.wait_quiet:
                wait_quiet(args.wait_quiet)
            before = os.getloadavg()
            with load(kind):
                for config in order:
                    t0 = time.perf_counter()
                    res = run_worker(config, spec, args.timeout)
                    bg = res.get("background_cores")
                    print(f"round {rnd + 1}/{args.rounds} {kind:6s} {config:9s} {time.perf_counter() - t0:6.1f} s "
                          + ("" if bg is None else f"(others {bg:.2f}, steal {res.get('steal_cores') or 0:.2f} cores) ")
                          + (res["error"] if "error" in res else
                             " ".join(f"{c['model'][0]}{c['replicas']}:"
                                      + (f"{c['ns_per_day']:.3g}" if "ns_per_day" in c else "err")
                                      + f"/t{c.get('torch_threads')}"
                                      for c in res["cells"])), flush=True)
                    if "error" in res:
                        res = {"cells": [dict(c, error=res["error"]) for c in cells],
                               "background_cores": res.get("background_cores"), "steal_cores": res.get("steal_cores")}
                    else:
                        versions = {k: v for k, v in res.items() if k != "cells"} if not versions else versions
                    for c in res["cells"]:
                        records.append(dict(c, config=config, load=kind, round=rnd,
                                            background_cores=res.get("background_cores"),
                                            steal_cores=res.get("steal_cores"),
                                            omp_wait_policy=res.get("omp_wait_policy")))
            loads.append({"round": rnd, "load": kind, "loadavg_before": before, "loadavg_after": os.getloadavg(),
                          "busiest_after": busiest()})
    machine = {"cpu_model": cpu_model(), "cores": os.cpu_count(),
               "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
               "python": _platform.python_version(), "platform": _platform.platform(),
               "torch_version": versions.get("torch_version"), "openmm_version": versions.get("openmm_version"),
               "torch_default_threads": versions.get("torch_initial_threads")}
    settings = {"pdb": os.path.relpath(args.pdb, ROOT) if str(args.pdb).startswith(str(ROOT)) else str(args.pdb),
                "model": (os.path.relpath(args.model, ROOT) if str(args.model).startswith(str(ROOT))
                          else str(args.model)),
                "steps": args.steps, "warmup": args.warmup, "cell_seconds": args.cell_seconds,
                "rounds": args.rounds,
                "replicas": args.replicas, "models": args.models, "configs": args.configs, "loads": args.loads,
                "labels": {c: resolve(c)["label"] for c in args.configs},
                "dt_fs": DT_FS, "quick": args.quick, "command": command_line(args)}
    return {"machine": machine, "settings": settings, "loads": loads, "records": records,
            "wall_s": time.perf_counter() - t_start}


def command_line(args: argparse.Namespace) -> str:
    """The command that re-makes this report (from the repository root): the options that differ from the
    defaults (``--quick``'s included)."""
    parts = ["python tools/benchmarks/threads_benchmark.py"] + (["--quick"] if args.quick else [])
    defaults = {"rounds": 1 if args.quick else 3, "steps": 100 if args.quick else 200, "warmup": 5,
                "cell_seconds": 3.0, "replicas": [1, 8] if args.quick else [1, 2, 4, 8], "models": list(MODELS),
                "configs": list(DEFAULT_CONFIGS), "loads": list(LOADS)}
    for key, default in defaults.items():
        value = getattr(args, key)
        if value != default:
            text = ",".join(map(str, value)) if isinstance(value, list) else f"{value:g}" if isinstance(
                value, float) else str(value)
            parts.append(f"--{key.replace('_', '-')} {text}")
    if getattr(args, "update_doc", None) is not None:
        parts.append("--update-doc")
    return " ".join(parts)


def _names(text: str, allowed: Sequence[str], what: str) -> List[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in allowed]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"{what} must be among {','.join(allowed)}; got {text!r}")
    return list(dict.fromkeys(names))


def _ints(text: str) -> List[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 round, 100 steps, replicas 1,8")
    p.add_argument("--rounds", type=_positive, default=None, help="rounds (median over them; default 3)")
    p.add_argument("--steps", type=_positive, default=None, help="timed steps for one replica (default 200)")
    p.add_argument("--warmup", type=_positive, default=5, help="untimed steps first (default 5)")
    p.add_argument("--cell-seconds", type=float, default=None,
                   help="a cell's timed steps end after this many seconds at the latest (default 3)")
    p.add_argument("--replicas", type=_ints, default=None, help="replica counts (default 1,2,4,8)")
    p.add_argument("--models", type=lambda t: _names(t, list(MODELS), "--models"), default=list(MODELS))
    p.add_argument("--configs", type=lambda t: _names(t, list(CONFIGS), "--configs"), default=list(DEFAULT_CONFIGS),
                   help=f"among {','.join(CONFIGS)} (default {','.join(DEFAULT_CONFIGS)})")
    p.add_argument("--loads", type=lambda t: _names(t, list(LOADS), "--loads"), default=list(LOADS))
    p.add_argument("--pdb", type=Path, default=PDB)
    p.add_argument("--model", type=Path, default=MODEL)
    p.add_argument("--seed", type=int, default=1, help="of the configurations' shuffled order")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per worker process")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each round and load, wait up to this long for the other processes to use less "
                        "than 0.15 cores (default 0: do not wait)")
    p.add_argument("--json", type=Path, default=ROOT / "docs" / "threads.json", help="the JSON report ('' = none)")
    p.add_argument("--update-doc", type=Path, nargs="?", const=DOC, default=None, metavar="FILE",
                   help=f"replace the threads section of FILE (default {DOC.relative_to(ROOT)})")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="render an existing JSON report (no measurement)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker is not None:
        print(RESULT + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    signal.signal(signal.SIGTERM, _terminate)      # the spinner and the worker are ended on the way out
    args.cell_seconds = args.cell_seconds or 3.0
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.steps = args.steps or (100 if args.quick else 200)
    args.replicas = args.replicas or ([1, 8] if args.quick else [1, 2, 4, 8])
    if args.render is not None:
        report = json.loads(args.render.read_text())
    else:
        report = measure(args)
        if str(args.json):
            args.json.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.json.with_name(args.json.name + ".tmp")
            tmp.write_text(json.dumps(report, indent=1) + "\n")
            os.replace(tmp, args.json)
    body = render(report)
    print(body, end="")
    if args.update_doc is not None:
        doc = args.update_doc
        doc.write_text(splice(doc.read_text() if doc.exists() else "", body))
        print(f"wrote the threads section of {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
