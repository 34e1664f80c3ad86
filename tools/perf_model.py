"""Performance model of a triton-backend step (:mod:`flashschnet.openmm.benchmark.perf_model`): FLOPs and bytes
per kernel for R replicas of the packaged BPTI structure, and the H200 time they imply -- a prediction to hold a
GPU run against (docs/benchmarks.md quotes it).

    python tools/perf_model.py [--replicas 64] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json

from flashschnet.openmm.benchmark.perf_model import model


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="perf_model.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=64)
    p.add_argument("--json")
    a = p.parse_args(argv)
    m = model(a.replicas)
    print(f"BPTI: N = {m['N']} beads, T = {m['T']} tiles, {m['active_tile_pairs']} of {m['slots']} tile pairs "
          f"active; R = {m['R']}")
    print("| kernel | matmul | TFLOP/step | L2 MB | HBM MB | ms at peak | ms at 30 % |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in m["rows"]:
        print(f"| {r['kernel']} | {r['dot']} | {r['flops'] / 1e12:.3f} | {r['l2_bytes'] / 1e6:.0f} | "
              f"{r['hbm_bytes'] / 1e6:.0f} | {r['ms_at_peak']:.2f} | {r['ms_at_30pct']:.2f} |")
    for dot in ("bf16", "tf32"):
        for key in ("ms_at_peak", "ms_at_30pct"):
            ms = sum(r[key] for r in m["rows"] if r["dot"] in (dot, "-", "fp32"))
            nsday = m["R"] * 4e-6 * 86400 / (ms / 1e3)
            print(f"{dot}, {key}: {ms:.2f} ms/step -> {nsday:,.0f} ns/day aggregate at 4 fs")
            m[f"{dot}_{key}_ms"] = ms
            m[f"{dot}_{key}_ns_day"] = nsday
    if a.json:
        with open(a.json, "w") as f:
            json.dump(m, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
