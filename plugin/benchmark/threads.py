"""The threads benchmark's configurations, clock and report (``python tools/benchmarks/threads_benchmark.py`` runs it):
ns/day of a CG run per thread choice, on an idle and on a loaded machine: is the default thread choice the best one?

* :data:`CONFIGS` -- the thread choices (``--threads``, the OpenMP variables) and :func:`resolve`,
  :func:`worker_env`: one configuration's label, environment and ``--threads`` on this machine;
* :class:`Clock` -- the reporter that times a run's steps after a warm-up and ends it after a time limit
  (:class:`TimeUp`); :func:`ns_per_day`, :func:`timed_steps`;
* :func:`summarise`, :func:`verdict`, :func:`render`, :func:`splice` -- per row the medians over the rounds, the
  best choice and how far the default is from it (the rule: at most :data:`TOLERANCE`), and the Markdown
  section between :data:`BEGIN` and :data:`END` of docs/benchmarks.md.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["BEGIN", "END", "SECTION", "DT_FS", "THREAD_ENV", "CONFIGS", "DEFAULT_CONFIGS", "MODELS", "LOADS",
           "TOLERANCE", "IDLE_NOISE_CORES", "cores", "resolve", "worker_env", "TimeUp", "Clock", "timed_steps",
           "ns_per_day", "summarise", "verdict", "background", "render", "splice"]

#: the markers of the section in docs/benchmarks.md, and its heading where the file has no markers
BEGIN, END = "<!-- threads:begin -->", "<!-- threads:end -->"
SECTION = "## Threads on an idle and a loaded machine"
#: the time step of the runs (fs)
DT_FS = 4.0

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


#: the models measured: name -> the run's ``compress``
MODELS = {"exact": "none", "compressed": "float32"}
#: the machine's loads: nothing else running, and one core kept busy
LOADS = ("idle", "loaded")
#: the rule the default keeps: never more than this much slower than the best choice, in any row
TOLERANCE = 0.20


# -- the clock of a run ---------------------------------------------------------------------------------------

class TimeUp(BaseException):
    """Raised by :class:`Clock` to end a run whose timed part reached its time limit (through run()'s
    ``except Exception``-free step loop: the outputs are closed, the temporary directory goes)."""


class Clock:
    """An OpenMM reporter noting (step, wall time) after every step; after ``warmup`` steps it ends the run
    (:class:`TimeUp`) once ``limit_s`` seconds of timed steps have passed."""

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
            raise TimeUp()


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


def worker_env(config: str, base: Optional[Dict[str, str]] = None, n_cores: Optional[int] = None) -> Dict[str, str]:
    """The environment of ``config``'s worker: ``base`` (os.environ) without :data:`THREAD_ENV`, plus its own."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in THREAD_ENV}
    env.update(resolve(config, n_cores)["env"])
    return env



# -- the report ------------------------------------------------------------------------------------------------

def twin_of(threads: Sequence[int], configs: Sequence[str], n_cores: Optional[int]) -> Optional[str]:
    """The configuration among ``configs`` that runs exactly what the default ran where it chose ``threads`` (one
    count in every round): the same thread count and no OpenMP variable set (``--threads 1`` where it chose 1,
    ``--threads {cores}`` where it kept PyTorch's count). None where there is none or the count varied."""
    if len(set(threads)) != 1:
        return None
    for c in configs:
        spec = CONFIGS.get(c)
        if c == "default" or spec is None or spec["env"] or spec["threads"] is None:
            continue
        if resolve(c, n_cores)["threads"] == threads[0]:
            return c
    return None


def summarise(report: Dict[str, Any], default: str = "default") -> List[Dict[str, Any]]:
    """One row per (load, model, replicas): each configuration's median ns/day over the rounds, the best one,
    and how much slower ``default`` is than the best (``default_loss``: 1 - default / best).

    Where another column ran exactly the default's settings (its ``twin``: :func:`twin_of`), the two columns are
    one configuration measured twice: ``pooled`` is the median over both columns' rounds and ``pooled_loss`` its
    loss against the best *other* configuration (``pooled_best``). The difference between the twins is noise,
    and the pooled median, with twice the rounds, is the better estimate of what the default runs at."""
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
        chose = picked.get((kind, model, replicas), [])
        twin = twin_of(chose, list(by_config), report["machine"].get("cores_available"))
        pooled = pooled_best = pooled_loss = None
        if twin is not None and by_config.get(default) and by_config.get(twin):
            pooled = statistics.median(by_config[default] + by_config[twin])
            others = {c: v for c, v in measured.items() if c not in (default, twin)}
            pooled_best = max(others, key=others.get) if others and max(others.values()) > pooled else None
            pooled_loss = 1.0 - pooled / others[pooled_best] if pooled_best else 0.0
        rows.append({"load": kind, "model": model, "replicas": replicas, "ns_per_day": med,
                     "samples": {c: len(v) for c, v in by_config.items()}, "best": best, "default_loss": loss,
                     "default_threads": sorted(set(chose)), "twin": twin, "pooled": pooled,
                     "pooled_best": pooled_best, "pooled_loss": pooled_loss})
    return rows


def _loss(row: Dict[str, Any]) -> Optional[float]:
    """A row's loss of the default: pooled with its twin where it has one, else its own column's."""
    return row["pooled_loss"] if row.get("pooled_loss") is not None else row["default_loss"]


def verdict(rows: Sequence[Dict[str, Any]], default: str = "default") -> Dict[str, Any]:
    """Whether ``default`` keeps within :data:`TOLERANCE` of the best choice in every row (its settings' loss:
    pooled with its twin where it has one, :func:`summarise`), and its worst row."""
    losses = [r for r in rows if _loss(r) is not None]
    if not losses:
        return {"ok": None, "worst": None, "worst_loss": None, "tolerance": TOLERANCE}
    worst = max(losses, key=_loss)
    return {"ok": all(_loss(r) <= TOLERANCE for r in losses), "tolerance": TOLERANCE,
            "worst": f"{worst['load']} {worst['model']} R={worst['replicas']}", "worst_loss": _loss(worst)}


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
             + " | best | default vs best | default's settings, pooled | vs best other | default's threads |")
    L.append("|---|---|--:|" + "".join("--:|" for _ in configs) + "---|--:|--:|--:|--:|")
    for r in rows:
        cells = []
        for c in configs:
            val = _fmt(r["ns_per_day"].get(c))
            cells.append(f"**{val}**" if c == r["best"] else val)
        loss = "–" if r["default_loss"] is None else f"{-100 * r['default_loss']:+.0f}%"
        pooled = "–" if r.get("pooled") is None else f"{_fmt(r['pooled'])} (with {labels.get(r['twin'], r['twin'])})"
        ploss = "–" if r.get("pooled_loss") is None else f"{-100 * r['pooled_loss']:+.0f}%"
        L.append(f"| {r['load']} | {r['model']} | {r['replicas']} | " + " | ".join(cells)
                 + f" | {labels.get(r['best'], r['best']) if r['best'] else '–'} | {loss} | {pooled} | {ploss} | "
                 + (",".join(map(str, r["default_threads"])) or "–") + " |")
    L.append("")
    same = [abs(1 - r["ns_per_day"]["default"] / r["ns_per_day"][r["twin"]]) for r in rows
            if r.get("twin") and r["ns_per_day"].get("default") and r["ns_per_day"].get(r["twin"])]
    if same:
        L += [f"Noise: where the default ran exactly another column's settings (its twin: `--threads 1` where it chose "
              f"1 thread, `--threads {m['cores_available']}` where it kept PyTorch's count; no OpenMP variable in "
              f"either), the two columns differ by {100 * statistics.median(same):.0f}% (median; at most "
              f"{100 * max(same):.0f}%). Such a pair is one configuration measured twice: the verdict below takes "
              "its pooled median (both columns' rounds) against the best other configuration.", ""]
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
    a :data:`SECTION` holding them appended (:func:`.device_report.splice`, with this section's markers)."""
    from .device_report import splice as splice_section

    return splice_section(doc, body, BEGIN, END, SECTION)
