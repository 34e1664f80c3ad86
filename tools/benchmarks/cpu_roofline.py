"""The CPU pair loops against the core's own limits: a roofline of :mod:`flashschnet.kernels.cpu_pairs`.

    python tools/benchmarks/cpu_roofline.py [--json docs/cpu-roofline.json] [--systems trpcage,bpti] [--replicas 1,8]
                                            [--threads 1,2] [--quick]

Measures the core's peaks and each table kernel's rate on trp-cage and BPTI
(:mod:`flashschnet.openmm.benchmark.cpu_roofline` says what and how), prints the table of docs/benchmarks.md
("CPU roofline") and writes ``--json`` (with the machine and the commit).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="trpcage,bpti")
    p.add_argument("--replicas", default="1,8")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--json", default=None)
    p.add_argument("--quick", action="store_true", help="a tenth of the peak measurements' work (for the tests)")
    args = p.parse_args(argv)
    from flashschnet.openmm.benchmark.cpu_roofline import kernels, peaks, render
    from flashschnet.openmm.benchmark.machine import run_machine

    peak = peaks(0.1 if args.quick else 1.0)
    report = {"machine": run_machine(ROOT), "peaks": peak, "systems": []}
    for name in args.systems.split(","):
        for r in (int(x) for x in args.replicas.split(",")):
            for t in (int(x) for x in args.threads.split(",")):
                report["systems"].append(kernels(name, r, t, peak))
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
