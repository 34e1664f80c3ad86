"""Ensemble and parallel-tempering throughput on this machine, side by side in one invocation.

    python tools/benchmarks/ensemble_scaling.py [--pdb PDB] [--model MODEL] [--walkers 4] [--steps 2000]
                                                [--json docs/ensembles.json] [--quick]

Each configuration is one :func:`flashschnet.openmm.simulate.run` of ``--walkers`` walkers (a geometric ladder
300-400 K) into a fresh directory, timed by the run itself (aggregate ns/day over its step loop, the model
load and the Dask cluster's start outside it; and in steady state: the median over the log's report intervals
after the first, which holds the warm-up), with the run's own breakdown
(:attr:`~flashschnet.openmm.ensemble.EnsembleResult.timings`):

* the single-process path (one packed Context) with 2 and 1 PyTorch threads;
* a local Dask cluster of 1 worker (1 block) and of 2 workers (2 blocks), 1 thread per worker;
* the per-exchange overhead: each path at two exchange intervals (one per report, every 10 steps), the
  difference in steady-state wall time per report interval over the difference in exchanges (the exchanges' energy evaluation, the round trip, the swaps and new temperatures),
  and the same from the breakdown;
* a pure ensemble (no exchanges) on 2 workers.

Prints a table and writes the JSON (``--json``); ``docs/ensembles.md`` quotes it. ``--quick``: a few hundred
steps or fewer (for the tests), a report every 100 steps (every half of ``--steps``, at least 20, when fewer).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch  # noqa: F401  (torch before openmm)

ROOT = Path(__file__).resolve().parents[2]


def _run(workdir: str, name: str, pdb: str, model: str, steps: int, walkers: int, exchange: int, report: int,
         threads, workers=None, blocks=None, tempering: bool = True) -> dict:
    from flashschnet.openmm.simulate import RunSettings, run

    s = RunSettings(pdb=pdb, model=model, out=os.path.join(workdir, name), steps=steps, seed=7, report_interval=report,
                    checkpoint_interval=steps, threads=threads, workers=workers, blocks=blocks,
                    temperatures=f"300:400:{walkers}" if tempering else None, exchange_interval=exchange,
                    replicas=1 if tempering else walkers)
    t0 = time.perf_counter()
    r = run(s, progress=False, echo=lambda m: None)
    total = time.perf_counter() - t0
    t = dict(r.timings)
    with open(os.path.join(workdir, name, "log.csv")) as f:
        import csv

        speeds = {}
        for rec in csv.DictReader(f):
            speeds.setdefault(int(rec["step"]), float(rec["ns_per_day"]))
    # per report interval (step 0's row has no speed), the first (warm-up) left out
    steady = [v for k, v in sorted(speeds.items()) if k > 0][1:]
    steady_agg = walkers * statistics.median(steady) if steady else float("nan")
    row = {"config": name, "workers": workers or 0, "blocks": blocks or 1, "threads": threads, "walkers": walkers,
           "steps": steps, "exchange_interval": exchange if tempering else None,
           "ns_per_day_aggregate": r.ns_per_day_per_replica * r.replicas, "loop_s": t.get("loop"),
           "steady_ns_per_day_aggregate": steady_agg,
           "steady_s_per_report": report * 4e-6 * 86400 * walkers / steady_agg if steady else None,
           "total_s": total, "acceptance": r.acceptance}
    row.update({f"t_{k}": v for k, v in t.items() if k != "loop"})
    if t.get("segments"):
        row["overhead_per_segment_ms"] = 1e3 * (t["advance"] - t["block_steps"] + t["exchange"]) / t["segments"]
    return row


def measure(pdb: str, model: str, walkers: int, steps: int, quick: bool) -> dict:
    from flashschnet.openmm.benchmark.machine import machine_info

    report = min(100, max(20, steps // 2)) if quick else 500     # --quick: at least 2 report intervals
    rare, often = report, 10                 # exchange intervals: one per report, and every 10 steps
    rows = []
    with tempfile.TemporaryDirectory() as work:
        configs = [
            ("process-2threads", dict(threads=2)),
            ("process-1thread", dict(threads=1)),
            ("dask-1worker", dict(threads=1, workers=1, blocks=1)),
            ("dask-2workers", dict(threads=1, workers=2, blocks=2)),
        ]
        for name, kw in configs:
            for exchange in (rare, often):
                rows.append(_run(work, f"{name}-x{exchange}", pdb, model, steps, walkers, exchange, report, **kw))
                print(_line(rows[-1]), flush=True)
        rows.append(_run(work, "dask-2workers-ensemble", pdb, model, steps, walkers, rare, report, threads=1,
                         workers=2, blocks=2, tempering=False))
        print(_line(rows[-1]), flush=True)
    overhead = {}
    for name, _ in configs:
        a = next(r for r in rows if r["config"] == f"{name}-x{rare}")
        b = next(r for r in rows if r["config"] == f"{name}-x{often}")
        per_report = report // often - report // rare          # more exchanges per report interval
        overhead[name] = {
            "per_exchange_ms_from_wall": 1e3 * (b["steady_s_per_report"] - a["steady_s_per_report"]) / per_report,
            "per_exchange_ms_from_breakdown": b["overhead_per_segment_ms"],
            "energy_eval_ms": 1e3 * b["t_block_energies"] / b["t_segments"],
            "step_ms": 1e3 * a["t_block_steps"] / a["steps"],
        }
    return {"machine": machine_info("cpu", 2), "pdb": os.path.basename(pdb), "model": os.path.basename(model),
            "walkers": walkers, "steps": steps, "report_interval": report, "rows": rows, "overhead": overhead}


def _line(r: dict) -> str:
    return (f"{r['config']:28s} {r['ns_per_day_aggregate']:9.2f} ns/day aggregate ({r['steady_ns_per_day_aggregate']:.2f} "
            f"steady)   loop {r['loop_s']:7.2f} s   "
            f"exchanges {r.get('t_exchanges', 0):4d}   overhead/segment {r.get('overhead_per_segment_ms', float('nan')):7.2f} ms")


def table(report: dict) -> str:
    lines = [f"{'configuration':28s} {'ns/day agg':>10s} {'steady':>8s} {'loop s':>8s} {'exchanges':>9s} "
             f"{'ovh/seg ms':>10s}"]
    for r in report["rows"]:
        lines.append(f"{r['config']:28s} {r['ns_per_day_aggregate']:10.2f} {r['steady_ns_per_day_aggregate']:8.2f} "
                     f"{r['loop_s']:8.2f} "
                     f"{r.get('t_exchanges', 0):9d} {r.get('overhead_per_segment_ms', float('nan')):10.2f}")
    lines.append("")
    lines.append(f"{'path':20s} {'per exchange (wall fit) ms':>27s} {'(breakdown) ms':>15s} {'energies ms':>12s} "
                 f"{'step ms':>8s}")
    for name, o in report["overhead"].items():
        fit = o["per_exchange_ms_from_wall"]
        lines.append(f"{name:20s} {fit if fit is not None else float('nan'):27.2f} "
                     f"{o['per_exchange_ms_from_breakdown']:15.2f} {o['energy_eval_ms']:12.2f} {o['step_ms']:8.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pdb", default=str(ROOT / "examples" / "1L2Y_trpcage.pdb"))
    p.add_argument("--model", default=str(ROOT / "examples" / "trpcage_trained.pt"))
    p.add_argument("--walkers", type=int, default=4)
    p.add_argument("--steps", type=int, default=None, help="steps per configuration (default 2000; --quick 200)")
    p.add_argument("--json", default=None, help="write the report here")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    steps = a.steps or (200 if a.quick else 2000)
    report = measure(a.pdb, a.model, a.walkers, steps, a.quick)
    print(table(report))
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
