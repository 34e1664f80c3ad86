"""Threads on an idle and a loaded machine: ns/day of a CG run per thread choice (issue 27, item 7).

    python tools/threads_benchmark.py [--quick] [--rounds 3] [--steps 200] [--replicas 1,2,4,8]
                                      [--models exact,compressed] [--configs default,threads1,...]
                                      [--loads idle,loaded] [--json docs/threads.json] [--update-doc [FILE]]
                                      [--wait-quiet SECONDS]
    python tools/threads_benchmark.py --render docs/threads.json [--update-doc]    # no measuring

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
* ``before``: the behaviour before issue 27, ``--threads {cores}`` (PyTorch's default count; libgomp's default
  wait: spin about 3 ms);
* ``passive`` / ``active``: ``--threads {cores}`` with ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep at
  once) / ``ACTIVE`` (they spin);
* not measured unless named in ``--configs``: ``threads2`` (``--threads 2``) and ``omm1`` (the default with
  OpenMM's CPU platform on one thread, ``OPENMM_CPU_THREADS=1``; OpenMM's default is one per core).

Loads: ``idle`` (nothing started; the cores other processes used meanwhile are measured from /proc/stat and the
section says so when the machine was not idle) and ``loaded`` (one core kept busy by a spinning process,
``python -c "while True: pass"``, started before the round's measurements and killed after them). Each round
measures every configuration under each load, in a shuffled order; the table gives the median over
``--rounds``, the best choice per row and how far the default is from it (issue 27's rule: at most 20%).

Prints the section and writes the JSON (``--json``, default docs/threads.json; ``--json ''``: none);
``--update-doc [FILE]`` replaces the text between ``<!-- threads:begin -->`` and ``<!-- threads:end -->`` of
FILE (default docs/benchmarks.md). ``--quick``: 1 round, 100 steps, replicas 1 and 8 (about 2 minutes; the
full run about 15 on the 2-core machine). ``--wait-quiet SECONDS``: before each round and load, wait (at most
that long) until other processes use less than 0.15 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import random
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- threads:begin -->", "<!-- threads:end -->"
SECTION = "## Threads on an idle and a loaded machine"
PDB = ROOT / "examples" / "1L2Y_trpcage.pdb"
MODEL = ROOT / "examples" / "trpcage_trained.pt"
DT_FS = 4.0
#: the worker's result line on stdout starts with this
RESULT = "THREADS-BENCHMARK-RESULT "
#: thread variables removed from every worker's environment before its configuration's are set
THREAD_ENV = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENMM_CPU_THREADS",
              "OMP_PROC_BIND", "OMP_DYNAMIC")

#: name -> what the table calls it, the environment and ``--threads`` (None: not given); ``{cores}`` stands for the
#: number of cores this process may use (PyTorch's and OpenMM's default thread count on such a machine)
CONFIGS: Dict[str, Dict[str, Any]] = {
    "default": {"label": "default", "env": {}, "threads": None},
    "threads1": {"label": "--threads 1", "env": {}, "threads": 1},
    "before": {"label": "--threads {cores} (before)", "env": {}, "threads": "{cores}"},
    "passive": {"label": "--threads {cores} OMP_WAIT_POLICY=PASSIVE", "env": {"OMP_WAIT_POLICY": "PASSIVE"},
                "threads": "{cores}"},
    "active": {"label": "--threads {cores} OMP_WAIT_POLICY=ACTIVE", "env": {"OMP_WAIT_POLICY": "ACTIVE"},
               "threads": "{cores}"},
    "threads2": {"label": "--threads 2", "env": {}, "threads": 2},
    "omm1": {"label": "default, OPENMM_CPU_THREADS=1", "env": {"OPENMM_CPU_THREADS": "1"}, "threads": None},
}
#: the configurations measured unless --configs names others
DEFAULT_CONFIGS = ("default", "threads1", "before", "passive", "active")


def cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def resolve(config: str, n_cores: Optional[int] = None) -> Dict[str, Any]:
    """``config`` of :data:`CONFIGS` with ``{cores}`` replaced by ``n_cores`` (default :func:`cores`)."""
    n = str(cores() if n_cores is None else n_cores)
    c = CONFIGS[config]
    threads = c["threads"]
    return {"label": c["label"].replace("{cores}", n), "env": {k: v.replace("{cores}", n) for k, v in c["env"].items()},
            "threads": int(threads.replace("{cores}", n)) if isinstance(threads, str) else threads}


MODELS = {"exact": "none", "compressed": "float32"}
LOADS = ("idle", "loaded")
#: the rule of issue 27: the default is never more than this much slower than the best choice, in any row
TOLERANCE = 0.20


# -- the worker (one process per configuration and round) -----------------------------------------------------

class _TimeUp(BaseException):
    """Raised by :class:`_Clock` to end a run whose timed part reached its time limit (through run()'s
    ``except Exception``-free step loop: the outputs are closed, the temporary directory goes)."""


class _Clock:
    """An OpenMM reporter noting (step, wall time) after every step; after ``warmup`` steps it ends the run
    (:class:`_TimeUp`) once ``limit_s`` seconds of timed steps have passed."""

    def __init__(self, warmup: int, limit_s: float):
        self.warmup, self.limit_s = warmup, limit_s
        self.marks: List[tuple] = []
        self._start: Optional[float] = None

    def describeNextReport(self, simulation):
        return {"steps": 1, "periodic": False, "include": []}

    def report(self, simulation, state):
        now, step = time.perf_counter(), simulation.currentStep
        self.marks.append((step, now))
        if step == self.warmup:
            self._start = now
        elif step > self.warmup and self._start is not None and now - self._start >= self.limit_s:
            raise _TimeUp()


def timed_steps(steps: int, replicas: int) -> int:
    """The timed steps of a cell of ``replicas``: ``steps / replicas``, at least 10."""
    return max(10, int(round(steps / replicas)))


def ns_per_day(marks: Sequence[tuple], warmup: int, replicas: int) -> float:
    """Aggregate ns/day (``replicas`` x 4 fs steps) between the mark at step ``warmup`` and the last mark."""
    start = [t for s, t in marks if s == warmup]
    if not start or marks[-1][0] <= warmup:
        raise ValueError(f"no timed steps after the warm-up (marks at steps {[s for s, _ in marks]})")
    steps = marks[-1][0] - warmup
    return replicas * steps * DT_FS * 1e-6 * 86400.0 / (marks[-1][1] - start[-1])


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
            clock = _Clock(spec["warmup"], spec["cell_seconds"])
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
                except _TimeUp:
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

def worker_env(config: str, base: Optional[Dict[str, str]] = None, n_cores: Optional[int] = None) -> Dict[str, str]:
    """The environment of ``config``'s worker: ``base`` (os.environ) without :data:`THREAD_ENV`, plus its own."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in THREAD_ENV}
    env.update(resolve(config, n_cores)["env"])
    return env


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
    parts = ["python tools/threads_benchmark.py"] + (["--quick"] if args.quick else [])
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


def summarise(report: Dict[str, Any], default: str = "default") -> List[Dict[str, Any]]:
    """One row per (load, model, replicas): each configuration's median ns/day over the rounds, the best one,
    and how much slower ``default`` is than the best (``default_loss``: 1 - default / best)."""
    groups: Dict[tuple, Dict[str, List[float]]] = {}
    picked: Dict[tuple, List[int]] = {}
    for r in report["records"]:
        key = (r["load"], r["model"], r["replicas"])
        groups.setdefault(key, {}).setdefault(r["config"], [])
        if "ns_per_day" in r:
            groups[key][r["config"]].append(r["ns_per_day"])
            if r["config"] == default and r.get("torch_threads"):
                picked.setdefault(key, []).append(int(r["torch_threads"]))
    order = {k: i for i, k in enumerate(LOADS)}
    rows = []
    for (kind, model, replicas), by_config in sorted(groups.items(),
                                                      key=lambda kv: (order.get(kv[0][0], 9), kv[0][1] != "exact",
                                                                      kv[0][1], kv[0][2])):
        med = {c: (statistics.median(v) if v else None) for c, v in by_config.items()}
        measured = {c: v for c, v in med.items() if v is not None}
        best = max(measured, key=measured.get) if measured else None
        loss = (1.0 - measured[default] / measured[best]) if best and default in measured else None
        rows.append({"load": kind, "model": model, "replicas": replicas, "ns_per_day": med,
                     "samples": {c: len(v) for c, v in by_config.items()}, "best": best, "default_loss": loss,
                     "default_threads": sorted(set(picked.get((kind, model, replicas), [])))})
    return rows


def verdict(rows: Sequence[Dict[str, Any]], default: str = "default") -> Dict[str, Any]:
    """Whether ``default`` keeps within :data:`TOLERANCE` of the best choice in every row, and its worst row."""
    losses = [r for r in rows if r["default_loss"] is not None]
    if not losses:
        return {"ok": None, "worst": None, "worst_loss": None, "tolerance": TOLERANCE}
    worst = max(losses, key=lambda r: r["default_loss"])
    return {"ok": all(r["default_loss"] <= TOLERANCE for r in losses), "tolerance": TOLERANCE,
            "worst": f"{worst['load']} {worst['model']} R={worst['replicas']}", "worst_loss": worst["default_loss"]}


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "–"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def background(report: Dict[str, Any], key: str = "background_cores") -> Dict[str, Optional[float]]:
    """Per load: the median over its worker processes of the cores other processes kept busy meanwhile
    (``loaded``: the spinner's core included; ``key="steal_cores"``: the cores the hypervisor took)."""
    out: Dict[str, Optional[float]] = {}
    for kind in LOADS:
        per_worker = {(r["round"], r["config"]): r.get(key) for r in report["records"] if r["load"] == kind}
        values = [v for v in per_worker.values() if v is not None]
        if per_worker:
            out[kind] = statistics.median(values) if values else None
    return out


#: idle measurements with more than this many cores busy elsewhere are flagged as not idle
IDLE_NOISE_CORES = 0.25


def render(report: Dict[str, Any]) -> str:
    """The Markdown section (between the markers) for ``report``."""
    rows = summarise(report)
    m, s = report["machine"], report["settings"]
    configs = [c for c in s["configs"] if c in CONFIGS]
    labels = dict({c: resolve(c, m.get("cores_available"))["label"] for c in configs}, **s.get("labels", {}))
    v = verdict(rows)
    n = s["rounds"]
    L = [f"Made by `{s['command']}` (writes `docs/threads.json` and this section; {n} round{'s' if n != 1 else ''}, "
         f"median; {report.get('wall_s', 0) / 60:.0f} min). Machine: {m['cores']}-core {m['cpu_model']} "
         f"({m['cores_available']} cores available), {m['platform']}, Python {m['python']}, PyTorch "
         f"{m['torch_version']} ({m['torch_default_threads']} threads by default), OpenMM {m['openmm_version']}. "
         f"Run: `flashschnet.openmm.simulate.run` (what `flashschnet-simulate` runs) on `{s['pdb']}` with "
         f"`{s['model']}`, exact and with float32 filter tables (`--compress float32`); {s['warmup']} warm-up "
         f"steps, then {s['steps']} / R steps (4 fs), at most {s['cell_seconds']:g} s, timed from the end of the "
         "warm-up (the run's frames, log rows and checkpoint included, the setup not); aggregate ns/day (R x per "
         "replica). *loaded*: one core kept busy by `python -c \"while True: pass\"`.", ""]
    bg, steal = background(report), background(report, "steal_cores")
    L.append("Load: " + "; ".join(
        f"{x['load']} round {x['round'] + 1}: load average {' '.join(f'{a:.2f}' for a in x['loadavg_before'])} "
        "before" for x in report["loads"]) + ". Cores kept busy by other processes while the workers ran (median, "
        "from /proc/stat): " + ", ".join(f"{k} {'–' if val is None else f'{val:.2f}'}" for k, val in bg.items())
        + "; taken by the hypervisor (steal): "
        + ", ".join(f"{k} {'–' if val is None else f'{val:.2f}'}" for k, val in steal.items()) + ".")
    if (bg.get("idle") or 0) > IDLE_NOISE_CORES:
        L.append(f"**The idle rows were not measured on an idle machine** (other processes kept "
                 f"{bg['idle']:.2f} cores busy): re-run the command on a quiet machine.")
    else:
        noisy = sorted({(r["round"], r["config"], r["background_cores"]) for r in report["records"]
                        if r["load"] == "idle" and (r.get("background_cores") or 0) > IDLE_NOISE_CORES})
        if noisy:
            L.append("Idle measurements during which other processes kept cores busy (left in: they pull their "
                     "column's medians down; re-run on a quiet machine): " + ", ".join(
                         f"round {rnd + 1} {labels.get(c, c)} ({b:.2f} cores)" for rnd, c, b in noisy) + ".")
    L.append("")
    L.append("| load | model | R | " + " | ".join(labels[c] for c in configs)
             + " | best | default vs best | default's threads |")
    L.append("|---|---|--:|" + "".join("--:|" for _ in configs) + "---|--:|--:|")
    for r in rows:
        cells = []
        for c in configs:
            val = _fmt(r["ns_per_day"].get(c))
            cells.append(f"**{val}**" if c == r["best"] else val)
        loss = "–" if r["default_loss"] is None else f"{-100 * r['default_loss']:+.0f}%"
        L.append(f"| {r['load']} | {r['model']} | {r['replicas']} | " + " | ".join(cells)
                 + f" | {labels.get(r['best'], r['best']) if r['best'] else '–'} | {loss} | "
                 + (",".join(map(str, r["default_threads"])) or "–") + " |")
    L.append("")
    same = [abs(1 - r["ns_per_day"]["default"] / r["ns_per_day"]["threads1"]) for r in rows
            if r["default_threads"] == [1] and r["ns_per_day"].get("default") and r["ns_per_day"].get("threads1")]
    if same:
        L += [f"Noise: where the default chose 1 thread it ran exactly `--threads 1`'s settings; those pairs of "
              f"columns differ by {100 * statistics.median(same):.0f}% (median; at most {100 * max(same):.0f}%).", ""]
    if v["ok"] is None:
        L.append("The default was not measured.")
    else:
        L.append(f"The default {'keeps' if v['ok'] else 'does NOT keep'} within {100 * TOLERANCE:.0f}% of the best "
                 f"choice in every row (worst: {v['worst']}, {100 * v['worst_loss']:.0f}% slower than the best).")
    errors = sorted({r.get("error") for r in report["records"] if r.get("error")})
    if errors:
        L += ["", "Errors: " + "; ".join(errors)]
    return "\n".join(L) + "\n"


def splice(doc: str, body: str) -> str:
    """``doc`` with the text between :data:`BEGIN` and :data:`END` replaced by ``body``; without the markers,
    a :data:`SECTION` holding them appended (device_report's splice, with this section's markers)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:                                  # a sibling tool, wherever this one was loaded from
        sys.path.insert(0, here)
    from device_report import splice as splice_section

    return splice_section(doc, body, BEGIN, END, SECTION)


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
