#!/usr/bin/env python
"""What filter compression costs, measured: a maintainer's report generator (run from a checkout).

    python tools/benchmarks/compression_report.py --out docs/compression.md --json docs/compression.json [--quick]

Writes the Markdown report (rendered from the JSON by :mod:`compression_render`; ``--from-json`` re-renders a
saved one) and the JSON (every number). Measured (helpers beside this file):

1. the error sweep (:mod:`compression_accuracy`): cubic and quintic Hermite tables, 64-512 knots (and cubic
   tables of the quintic ones' bytes), float64/float32/float16/bfloat16 storage, against the exact network in
   float64: filter ``W`` and ``dW/dr`` on a dense distance grid and on the frames' pair distances, energies and
   forces on the frames of three systems (the mlcg oracle, the real converted mlcg chignolin CA model, the
   oracle model on BPTI);
2. NVE energy drift, exact vs compressed (default knots; float32 and float16 tables), several runs from one
   shared state with the same velocity seeds, mean and standard error (:mod:`compression_dynamics`);
3. a Langevin run (default 10,000 steps) of the exact and the compressed model: stability.

``--quick``: a tiny sweep on the oracle system and a few dozen dynamics steps (for the tests; numbers of the
dynamics not meaningful).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:          # run as a script from anywhere: its helpers are beside it
    sys.path.insert(0, str(TOOLS))

import torch  # noqa: E402  (before openmm/openmmtorch)

from flashschnet.scripts._cli import SEED, THREADS, check_output_file, float_type, from_json, int_type  # noqa: E402

from compression_render import render  # noqa: E402

PROG = "tools/benchmarks/compression_report.py"


def _log(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    from compression_accuracy import REAL_MODEL

    p = argparse.ArgumentParser(
        prog=PROG, description="Measure the accuracy of tabulated filters (flashschnet.compress) against the exact "
                               "network: W, energy and force errors for a sweep of interpolants, knots and table "
                               "dtypes; NVE energy drift and Langevin stability. Writes Markdown and JSON.")
    p.add_argument("--out", default="docs/compression.md", help="Markdown report (default docs/compression.md)")
    p.add_argument("--json", default="docs/compression.json", help="JSON of every number (default docs/compression.json)")
    p.add_argument("--real-model", default=str(REAL_MODEL),
                   help="the real mlcg pickle (default ../shared/oracles/mlcg/real/real_cln_ca_model.pt; skipped, "
                        "with a note, if absent)")
    p.add_argument("--nve-runs", type=int_type(2, 100), default=5, help="NVE runs (velocity seeds) per model (default 5)")
    p.add_argument("--nve-steps", type=int_type(10), default=5000, help="steps per NVE run (default 5000)")
    p.add_argument("--nve-dt", type=float_type(0.0, 10.0, low_open=True), default=2.0,
                   help="NVE time step in fs (default 2)")
    p.add_argument("--langevin-steps", type=int_type(10), default=10000, help="Langevin steps per model (default 10000)")
    p.add_argument("--langevin-dt", type=float_type(0.0, 10.0, low_open=True), default=4.0,
                   help="Langevin time step in fs (default 4, as flashschnet-simulate)")
    p.add_argument("--equil-steps", type=int_type(1), default=1000,
                   help="Langevin steps of the exact model before the NVE runs (default 1000)")
    p.add_argument("--seed", type=SEED, default=7, help="seed of the BPTI displacements and the runs (default 7)")
    p.add_argument("--threads", type=THREADS, default=1, help="PyTorch CPU threads (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="tiny run for tests: oracle system, 64/128 knots, float32/float16, 40 NVE and 60 Langevin steps")
    p.add_argument("--from-json", default=None, metavar="JSON", help="do not measure: re-render --out from a saved JSON")
    return p


def machine() -> Dict[str, Any]:
    """Where it ran: CPU model, cores, threads, versions, date."""
    import openmm

    from flashschnet.openmm.benchmark.machine import cpu_model

    return {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}", "torch": torch.__version__,
            "openmm": openmm.version.version}


def measure(args, argv: Optional[List[str]]) -> Dict[str, Any]:
    """Run every measurement; the report dict that :func:`compression_render.render` renders."""
    import compression_accuracy as acc
    import compression_dynamics as dyn
    from flashschnet.transforms import DEFAULT_KIND, DEFAULT_KNOTS, TOLERANCE

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if args.quick:
        args.nve_runs, args.nve_steps, args.nve_interval = 2, 40, 4
        args.langevin_steps, args.langevin_interval, args.equil_steps = 60, 10, 20
    else:
        args.nve_interval, args.langevin_interval = 10, 100
    systems, notes = acc.load_systems(args.quick, Path(args.real_model), args.seed)
    points = acc.sweep_points(args.quick)
    rows, info = acc.sweep(systems, points, _log)
    t_sweep = time.perf_counter() - t0
    settings = {k: getattr(args, k) for k in ("equil_steps", "nve_runs", "nve_steps", "nve_dt", "nve_interval",
                                              "langevin_steps", "langevin_dt", "langevin_interval", "seed")}
    settings["nve_dtypes"] = ["float32"] if args.quick else ["float32", "float16"]
    dynamics = dyn.run_dynamics(Path(args.real_model), settings, _log)
    if dynamics["note"] and dynamics["note"] not in " ".join(notes):
        notes.append(dynamics["note"])
    command = "python " + PROG + (" " + " ".join(argv) if argv else "")
    return {"command": command, "quick": bool(args.quick), "machine": machine(),
            "defaults": {"kind": DEFAULT_KIND, "knots": DEFAULT_KNOTS, "tolerance": TOLERANCE, "force_bound": 1e-5},
            "sweep": {"kinds": list(acc.KINDS), "knots": list(acc.QUICK_KNOTS if args.quick else acc.KNOTS),
                      "dtypes": list(acc.QUICK_DTYPES if args.quick else acc.DTYPES), "grid_points": acc.GRID_POINTS,
                      "max_frame_pairs": acc.MAX_FRAME_PAIRS,
                      "systems": info, "rows": rows},
            "dynamics": dynamics, "notes": notes,
            "seconds": {"sweep": t_sweep, "dynamics": dynamics["seconds"], "total": time.perf_counter() - t0}}


def _dumps(report: Dict[str, Any]) -> str:
    """JSON, indented, with lists of numbers on one line."""
    import re

    text = json.dumps(report, indent=1)
    return re.sub(r"\[\s*([-+0-9.eE,\s]+?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text) + "\n"


def _write(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{path}.tmp"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.errors import FlashSchNetError

    try:
        check_output_file(args.out, "--out")
        if args.from_json is not None:
            _write(args.out, from_json(args.from_json, "--from-json", "a compression report JSON of this tool", render))
            return 0
        check_output_file(args.json, "--json")
        report = measure(args, argv if argv is not None else sys.argv[1:])
        _write(args.json, _dumps(report))
        _write(args.out, render(report))
        _log(f"wrote {args.out} and {args.json} in {report['seconds']['total']:.0f} s")
        return 0
    except FlashSchNetError as exc:
        _log(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
