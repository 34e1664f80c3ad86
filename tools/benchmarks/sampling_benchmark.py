"""The sampling benchmark of docs/sampling.md: MARTINI 3 and FlashSchNet, one invocation, the same cores.

    python tools/benchmarks/sampling_benchmark.py --inner inner.pt --json docs/sampling.json --out /tmp/sampling

Per protein (trp-cage with the trained model; BPTI with a placeholder model made here by
``examples/make_placeholder_model.py``: random network weights and priors fitted to the BPTI structure, so its speed
is real and its sampling is not a trained model's), one real run per configuration
(:mod:`flashschnet.openmm.benchmark.sampling`): MARTINI 3 with its elastic network and with its Go model (20 fs),
FlashSchNet exact (``--compress none``), the default (float32 filter tables; 1 and 4 packed replicas), float16
tables, the default at a 5 fs step (the measured single-step limit) and distilled multiple time stepping (``--mts``,
trp-cage only: ``--inner`` is distilled from the trained model). One PyTorch/OpenMM thread unless the row says 2.
Prints the Markdown table and writes ``--json`` (every row with its Rg and Q series, the machine, the commit).

Simulated time is per configuration (``--scale`` multiplies it): the speed is what matters in short runs; ESS/hour
of such runs are mostly bounds (said in the table as <=).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def configs(protein: str, inner: str, scale: float):
    """The rows of one protein (:class:`flashschnet.openmm.benchmark.sampling.Config`)."""
    from flashschnet.openmm.benchmark.sampling import Config

    big = protein == "bpti"
    ns = (lambda x: x * scale * (0.4 if big else 1.0))
    rows = [Config("MARTINI 3 (elastic network)", "martini", ns(0.2)),
            Config("MARTINI 3 (elastic network)", "martini", ns(0.2), threads=2),
            Config("MARTINI 3 + Go", "martini", ns(0.2), options={"go": True, "elastic": False}),
            Config("FlashSchNet exact", "flashschnet", ns(0.01), options={"compress": "none"}),
            Config("FlashSchNet default", "flashschnet", ns(0.05)),
            Config("FlashSchNet default", "flashschnet", ns(0.05), threads=2),
            Config("FlashSchNet default", "flashschnet", ns(0.02), replicas=4),
            Config("FlashSchNet default, 2 processes", "flashschnet", ns(0.02), threads=2, replicas=8, workers=2),
            Config("FlashSchNet float16 tables", "flashschnet", ns(0.05), options={"compress": "float16"}),
            Config("FlashSchNet default, 5 fs", "flashschnet", ns(0.05), options={"dt_fs": 5.0})]
    if not big and inner:
        for outer, dt in ((5.0, 2.5), (6.0, 2.0)):
            rows.append(Config(f"FlashSchNet DMTS {outer:g}/{dt:g} fs", "flashschnet", ns(0.05),
                               options={"mts": inner, "outer_dt_fs": outer, "dt_fs": dt}))
    return rows


def machine() -> dict:
    from flashschnet.openmm.benchmark.machine import run_machine

    return run_machine(ROOT)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--proteins", default="trpcage,bpti", help="comma-separated: trpcage, bpti")
    p.add_argument("--inner", default=None, help="inner model distilled from examples/trpcage_trained.pt (DMTS rows)")
    p.add_argument("--forcefield-dir", default=os.path.join(os.path.dirname(ROOT), "shared", "martini", "m3"),
                   help="MARTINI 3 force-field folder (default ../shared/martini/m3)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every row's simulated time")
    p.add_argument("--out", required=True, help="a new folder for the runs")
    p.add_argument("--json", required=True)
    p.add_argument("--update", action="store_true",
                   help="keep the other proteins of an existing --json (each protein records its own machine and date)")
    args = p.parse_args(argv)
    from flashschnet.openmm.benchmark.sampling import ratios, run_config, table

    inputs = {"trpcage": (os.path.join(EXAMPLES, "1L2Y_trpcage.pdb"), os.path.join(EXAMPLES, "trpcage_trained.pt")),
              "bpti": (os.path.join(EXAMPLES, "4PTI_bpti.pdb"), os.path.join(args.out, "bpti_placeholder.pt"))}
    report = {"machine": machine(), "settings": vars(args), "proteins": {}}
    if args.update and os.path.exists(args.json):
        with open(args.json) as f:
            report["proteins"] = json.load(f).get("proteins", {})
    for protein in args.proteins.split(","):
        pdb, model = inputs[protein]
        if protein == "bpti":               # the placeholder's priors are fitted to the structure they run on
            os.makedirs(args.out, exist_ok=True)
            subprocess.run([sys.executable, os.path.join(EXAMPLES, "make_placeholder_model.py"), "--pdb", pdb,
                            "--out", model], check=True)
        rows = []
        for i, cfg in enumerate(configs(protein, args.inner, args.scale)):
            out = os.path.join(args.out, protein, f"{i:02d}")
            rows.append(run_config(cfg, pdb, model, args.forcefield_dir, out))
        ratios(rows)
        report["proteins"][protein] = {"pdb": pdb, "model": model, "machine": machine(), "rows": rows}
        print(f"\n## {protein} ({report['machine']['cpu']}, {report['machine']['date']})\n")
        print(table(rows))
        with open(args.json, "w") as f:         # after each protein: a partial report survives an interruption
            json.dump(report, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
