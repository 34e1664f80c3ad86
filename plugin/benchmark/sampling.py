"""The sampling benchmark: MARTINI 3 and FlashSchNet configurations on one PDB, on the same cores, in one
invocation: ns/day per replica and aggregate, and the statistical inefficiency and effective samples per
wall-clock hour (ESS/hour) of Rg and Q (:mod:`flashschnet.openmm.sampling`, through
:func:`flashschnet.openmm.compare.summarise`, the numbers ``flashschnet-compare`` reports).

Each configuration is a real run of the product (``flashschnet-martini`` / ``flashschnet-simulate`` through their
Python entry points) into its own folder, then analysed as ``flashschnet-compare`` analyses its two runs. The
maintainer's front end is ``tools/benchmarks/sampling_benchmark.py`` (table, JSON, docs/sampling.md).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

#: frames per run (the analysis uses the second half)
FRAMES = 200


@dataclass
class Config:
    """One row: ``kind`` "martini" or "flashschnet"; ``ns`` simulated per replica; ``options``: settings fields."""

    name: str
    kind: str
    ns: float
    threads: int = 1
    replicas: int = 1
    options: Dict[str, object] = field(default_factory=dict)
    workers: Optional[int] = None        # FlashSchNet: the replicas in this many processes of one thread (the
    #                                      ``threads`` column is then the cores they use)


def run_config(cfg: Config, pdb: str, model: Optional[str], forcefield_dir: str, out: str,
               echo: Callable[[str], None] = print, seed: int = 1) -> Dict[str, object]:
    """Run ``cfg`` into ``out`` (a new folder) and analyse it; returns the row."""
    from ..compare import analyse_flashschnet, analyse_martini, summarise

    t0 = time.perf_counter()
    if cfg.kind == "martini":
        from ..martini.run import MartiniSettings, run_martini

        s = MartiniSettings(pdb=pdb, forcefield_dir=forcefield_dir, out=out, steps=0, seed=seed, threads=cfg.threads,
                            **cfg.options)
        s.steps = max(int(round(cfg.ns * 1e6 / s.step_fs)), FRAMES)
        s.report_interval = max(s.steps // FRAMES, 1)
        s.steps = s.report_interval * FRAMES
        run_martini(s, progress=False, echo=lambda m: None)
        run = analyse_martini(out)
    else:
        from ..simulate import RunSettings, run

        s = RunSettings(pdb=pdb, model=model, out=out, steps=0, seed=seed,
                        threads=None if cfg.workers else cfg.threads, workers=cfg.workers, replicas=cfg.replicas,
                        **cfg.options)
        s.steps = max(int(round(cfg.ns * 1e6 / s.step_fs)), FRAMES)
        s.report_interval = max(s.steps // FRAMES, 1)
        s.steps = s.report_interval * FRAMES
        run(s, progress=False, echo=lambda m: None)
        run = analyse_flashschnet(out)
    summary = summarise(run)
    speed = run["speed"]["ns_per_day"]
    row = {"name": cfg.name, "kind": cfg.kind, "threads": cfg.threads, "replicas": run["replicas"],
           "step_fs": run["dt_fs"], "simulated_ns_per_replica": run["speed"]["steps"] * run["dt_fs"] * 1e-6,
           "ns_per_day_per_replica": speed, "ns_per_day_aggregate": speed * run["replicas"],
           "wall_s": time.perf_counter() - t0, "options": dict(cfg.options),
           "rg_nm": summary["rg"], "q": summary["q"], "sampling": summary["sampling"],
           "series": {"rg": summary["series"]["rg"], "q": summary["series"]["q"], "times_ns": summary["times_ns"]}}
    echo(f"{cfg.name:28s} {speed:9.4g} ns/day/replica x {row['replicas']}  ({row['wall_s']:.0f} s)")
    return row


def ess_per_hour(row: Dict[str, object], key: str) -> Optional[Dict[str, object]]:
    """The aggregate ESS/hour of observable ``key`` ("rg" or "q") in a row: ``{"value", "error", "bound"}`` (bound
    "upper" when too few effective samples made it an upper bound), or None where not measured."""
    obs = ((row.get("sampling") or {}).get("observables") or {}).get(key)
    if not isinstance(obs, dict) or not isinstance(obs.get("ess_per_hour_aggregate"), dict):
        return None
    return dict(obs["ess_per_hour_aggregate"], bound="upper" if obs.get("bound") == "lower" else None)


def ratios(rows: List[Dict[str, object]]) -> None:
    """Set each FlashSchNet row's ``vs_martini_per_replica`` and ``vs_martini_aggregate``: its ns/day over that of
    the MARTINI 3 row (elastic network, not Go) with the same threads, in the same invocation."""
    martini = {r["threads"]: r for r in rows if r["kind"] == "martini" and not r["options"].get("go")}
    for r in rows:
        m = martini.get(r["threads"])
        if r["kind"] == "flashschnet" and m:
            r["vs_martini_per_replica"] = r["ns_per_day_per_replica"] / m["ns_per_day_per_replica"]
            r["vs_martini_aggregate"] = r["ns_per_day_aggregate"] / m["ns_per_day_aggregate"]


def table(rows: List[Dict[str, object]]) -> str:
    """The benchmark's Markdown table (speed, and ESS/hour of Rg and Q with their errors)."""
    def ess(row, name):
        e = ess_per_hour(row, name)
        if not e or e.get("value") is None:
            return "n/a"
        v, err = e["value"], e.get("error")
        bound = "<= " if e.get("bound") == "upper" else ""
        return f"{bound}{v:.3g}" + (f" ± {err:.2g}" if err else "")

    def ratio(row):
        v = row.get("vs_martini_aggregate")
        return "-" if v is None else f"{v:.2f}×"

    lines = ["| configuration | threads | replicas | step (fs) | ns/day per replica | ns/day aggregate | "
             "vs MARTINI 3 (aggregate, same threads) | ESS/hour Rg | ESS/hour Q |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['threads']} | {r['replicas']} | {r['step_fs']:g} | "
                     f"{r['ns_per_day_per_replica']:.4g} | {r['ns_per_day_aggregate']:.4g} | {ratio(r)} | "
                     f"{ess(r, 'rg')} | {ess(r, 'q')} |")
    return "\n".join(lines) + "\n"
