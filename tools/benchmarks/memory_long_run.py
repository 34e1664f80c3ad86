#!/usr/bin/env python
"""Does memory stay flat over a long flashschnet-simulate run?

Runs ``--steps`` steps of a small system through :func:`flashschnet.openmm.simulate.run` with the normal
reporters (health checks, one DCD per replica, the CSV log, checkpoints), samples this process's resident set
size (``VmRSS`` in ``/proc/self/status``) every ``--sample-every`` steps, prints a table, writes the samples as
JSON (``--out``) and reports, over the samples from ``--warmup`` on, the growth (last minus first), the
baseline growth (the smaller of the last two samples minus the smaller of the first two: blind to a
one-sample spike, which a leak is not) and the least-squares slope in MB per 10,000 steps. Linux only
(``/proc``).

A sample may catch a transient peak: in a 100,000-step run of the placeholder model RSS sat at 715.2-715.3 MB
after the warm-up, but four of its seventeen samples read +2 to +16 MB, back to the baseline at the next one
(transient allocations, not a trend; their cause was not traced).

    python tools/benchmarks/memory_long_run.py            # 100,000 steps of trp-cage, placeholder model, CPU
    python tools/benchmarks/memory_long_run.py --steps 12000 --sample-every 1000 --warmup 4000 --report-interval 20 \\
        --model tiny --out mem.json                        # the quick version tests/integration/test_long_runs.py runs

``--model tiny`` builds a random-weight network on the fly (:func:`flashschnet.tiny.tiny_model`: 16 channels,
one interaction block, 8 A cutoff; priors fitted to the PDB): about 2-3 ms per step for trp-cage on one core
instead of 55-85 ms for the placeholder (128 channels, three blocks, 15 A).
``--hoard-states`` keeps every reported State alive (a deliberate leak of one state per report), to show
that the growth bound catches such a leak. ``--max-growth-mb X`` makes the exit status 1 when the baseline
growth after the warm-up exceeds X MB.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def rss_mb() -> float:
    """Resident set size of this process in MB (10^6 bytes), from ``VmRSS`` in ``/proc/self/status``."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6          # the kernel reports kB (KiB)
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


class RSSSampler:
    """OpenMM reporter: every ``every`` steps, append ``{step, rss_mb, py_objects, elapsed_s}`` to ``samples``."""

    def __init__(self, every: int):
        self.every = int(every)
        self.samples: List[dict] = []
        self.t0 = time.perf_counter()

    def describeNextReport(self, simulation):
        return {"steps": self.every - simulation.currentStep % self.every, "periodic": False, "include": []}

    def report(self, simulation, state):
        self.samples.append({"step": int(simulation.currentStep), "rss_mb": round(rss_mb(), 3),
                             "py_objects": len(gc.get_objects()),
                             "elapsed_s": round(time.perf_counter() - self.t0, 2)})


class StateHoard:
    """OpenMM reporter that keeps every State it is given (positions, velocities, forces, energy): a
    deliberate leak of one state per report."""

    def __init__(self, every: int):
        self.every = int(every)
        self.kept = []

    def describeNextReport(self, simulation):
        return {"steps": self.every - simulation.currentStep % self.every, "periodic": False,
                "include": ["positions", "velocities", "forces", "energy"]}

    def report(self, simulation, state):
        self.kept.append(state)


def summarize(samples: List[dict], warmup: int) -> dict:
    """Of the samples with ``step >= warmup``: growth (last minus first, MB), baseline growth (min of the last
    two minus min of the first two, MB) and least-squares slope (MB per 10,000 steps)."""
    after = [s for s in samples if s["step"] >= warmup]
    out = {"warmup_steps": int(warmup), "samples_after_warmup": len(after), "growth_mb_after_warmup": None,
           "baseline_growth_mb_after_warmup": None, "slope_mb_per_10k_steps": None}
    if len(after) >= 1:
        out["growth_mb_after_warmup"] = round(after[-1]["rss_mb"] - after[0]["rss_mb"], 3)
        rss = [s["rss_mb"] for s in after]
        out["baseline_growth_mb_after_warmup"] = round(min(rss[-2:]) - min(rss[:2]), 3)
    if len(after) >= 2:
        steps = np.array([s["step"] for s in after], dtype=float)
        rss = np.array([s["rss_mb"] for s in after])
        out["slope_mb_per_10k_steps"] = round(float(np.polyfit(steps, rss, 1)[0]) * 1e4, 4)
    if samples:
        out["peak_rss_mb"] = max(s["rss_mb"] for s in samples)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="RSS of a long flashschnet-simulate run, sampled every few thousand "
                                            "steps; growth and slope after a warm-up.")
    p.add_argument("--pdb", default=str(ROOT / "examples" / "1L2Y_trpcage.pdb"))
    p.add_argument("--model", default=str(ROOT / "examples" / "trpcage_placeholder.pt"),
                   help="model file, or 'tiny' (a small random-weight network built on the fly)")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--sample-every", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=20_000, help="steps before the first sample the slope uses")
    p.add_argument("--report-interval", type=int, default=1000)
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--platform", default="CPU")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default=None, help="where the run writes (default: a temporary folder, removed)")
    p.add_argument("--out", default=None, help="write the samples and the summary here (JSON)")
    p.add_argument("--hoard-states", action="store_true", help="keep every reported State (a deliberate leak)")
    p.add_argument("--max-growth-mb", type=float, default=None,
                   help="exit status 1 when the growth after the warm-up exceeds this")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from flashschnet.openmm.simulate import RunSettings, run
    from flashschnet.tiny import tiny_model

    work = args.workdir or tempfile.mkdtemp(prefix="flashschnet-memory-")
    os.makedirs(work, exist_ok=True)
    try:
        model = tiny_model(args.pdb, os.path.join(work, "tiny.pt")) if args.model == "tiny" else args.model
        settings = RunSettings(pdb=args.pdb, model=model, out=os.path.join(work, "run"), steps=args.steps,
                               replicas=args.replicas, platform=args.platform, seed=args.seed,
                               report_interval=args.report_interval, threads=args.threads)
        sampler = RSSSampler(args.sample_every)
        extra = [sampler] + ([StateHoard(args.report_interval)] if args.hoard_states else [])
        rss_start = rss_mb()
        t0 = time.perf_counter()
        result = run(settings, progress=False, echo=lambda m: print(m, file=sys.stderr), reporters=extra)
        wall = time.perf_counter() - t0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    summary = summarize(sampler.samples, args.warmup)
    report = {"settings": {k: v for k, v in vars(args).items()}, "model": model if args.model != "tiny" else "tiny",
              "n_beads": result.n_beads, "rss_before_run_mb": round(rss_start, 3), "wall_s": round(wall, 1),
              "ms_per_step": round(1e3 * wall / max(args.steps, 1), 3), "samples": sampler.samples, **summary}
    base = next((s["rss_mb"] for s in sampler.samples if s["step"] >= args.warmup), None)
    print(f"{'step':>8} {'RSS MB':>9} {'vs warm-up':>10} {'Python objects':>15} {'elapsed s':>10}")
    for s in sampler.samples:
        delta = f"{s['rss_mb'] - base:+.2f}" if base is not None and s["step"] >= args.warmup else ""
        print(f"{s['step']:>8} {s['rss_mb']:>9.2f} {delta:>10} {s['py_objects']:>15} {s['elapsed_s']:>10.1f}")
    print(f"{args.steps} steps, {result.replicas} x {result.n_beads} beads, {report['ms_per_step']} ms/step; "
          f"RSS before the run {rss_start:.1f} MB, peak {summary.get('peak_rss_mb')} MB; after {args.warmup} warm-up "
          f"steps: growth {summary['growth_mb_after_warmup']} MB (baseline "
          f"{summary['baseline_growth_mb_after_warmup']} MB), slope {summary['slope_mb_per_10k_steps']} MB per 10k steps")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    growth = summary["baseline_growth_mb_after_warmup"]
    if args.max_growth_mb is not None and (growth is None or growth > args.max_growth_mb):
        print(f"memory grew by {growth} MB after the warm-up (baseline), more than {args.max_growth_mb} MB",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
