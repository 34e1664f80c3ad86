"""Performance model of a triton-backend network call on one H200 (:mod:`flashschnet.openmm.benchmark.perf_model`):
the old kernels' model calibrated on docs/device-h200.json and docs/gpu-kernel-profile.json, and the new kernels'
predictions (BPTI; lysozyme when ../shared/structures/1HEL_lysozyme.pdb exists). Prints the doc section.

    python tools/device/perf_model.py [--json docs/perf-model.json] [--update-doc] [--lysozyme PDB]

``--update-doc`` replaces the text between the perf-model markers of docs/benchmarks.md with the section.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from flashschnet.openmm.benchmark.perf_model import LYSOZYME, ROOT, model, render, update_doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="perf_model.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the model's result here (docs/perf-model.json)")
    p.add_argument("--update-doc", action="store_true", help="rewrite the section in docs/benchmarks.md")
    p.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    p.add_argument("--lysozyme", default=str(LYSOZYME), help="lysozyme PDB (skipped when absent)")
    a = p.parse_args(argv)
    m = json.loads(json.dumps(model(a.lysozyme)))          # the doc is rendered from the JSON's own values
    section = render(m)
    print(section)
    if a.json:
        Path(a.json).write_text(json.dumps(m, indent=1) + "\n")
    if a.update_doc:
        doc = Path(a.doc)
        doc.write_text(update_doc(doc.read_text(), section))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
