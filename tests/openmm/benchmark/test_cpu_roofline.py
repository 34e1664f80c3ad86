"""flashschnet.openmm.benchmark.cpu_roofline: docs/benchmarks.md's "CPU roofline" table is the rendering of
docs/cpu-roofline.json (``tools/benchmarks/cpu_roofline.py`` measures; tests/tools/benchmarks/test_cpu_roofline.py runs
it)."""
from __future__ import annotations

import json

from tests.conftest import ROOT
from flashschnet.openmm.benchmark.cpu_roofline import render


def test_the_docs_table_is_the_rendering_of_its_json():
    report = json.loads((ROOT / "docs" / "cpu-roofline.json").read_text())
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    assert render(report) in doc
    assert all(0 < k["of_bound"] < 3 for s in report["systems"] for k in s["kernels"] if "of_bound" in k)
