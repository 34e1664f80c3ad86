"""flashschnet.openmm.benchmark.report: the Markdown tables of docs/benchmarks.md are the rendering of the committed
JSON reports (never typed by hand), and a skipped configuration reads as skipped, with its reason."""
from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from flashschnet.openmm.benchmark.report import compute_ratios, markdown

#: the CPU reports docs/benchmarks.md shows, each as its own table
CPU_REPORTS = ("benchmarks-cpu.json", "benchmarks-cpu-2threads.json", "benchmarks-cpu-quantized.json",
               "benchmarks-cpu-compressed.json")


@pytest.mark.parametrize("name", CPU_REPORTS)
def test_the_docs_cpu_tables_are_the_rendering_of_their_json(name):
    report = json.loads((ROOT / "docs" / name).read_text())
    rendered = markdown(report)
    assert rendered.count("\n") >= 1 + len(report["results"]), name
    assert rendered in (ROOT / "docs" / "benchmarks.md").read_text(), f"docs/benchmarks.md lacks markdown({name})"


def _result(backend, R, ms, mb, status="ok", **extra):
    out = {"backend": backend, "compress": "none", "quantize": "none", "replicas": R, "status": status}
    if status == "ok":
        out.update(median_ms=ms, min_ms=ms * 0.9, ns_per_day_per_replica=345.6 / ms, ns_per_day_aggregate=345.6 * R / ms,
                   peak_extra_mb=mb, weights_kb=10.0)
    out.update(extra)
    return out


def test_markdown_rows_ratios_and_skips():
    results = [_result("reference", 1, 100.0, 50.0), _result("torch", 1, 25.0, 5.0),
               _result("reference", 8, None, None, status="skipped", reason="predicted 28.1 GB > limit 16 GB"),
               _result("torch", 8, 200.0, 10.0, compress="float32")]
    report = {"results": results, "ratios": compute_ratios(results), "settings": {"default_rows": ["torch+tab-f32"]},
              "openmm": [{"backend": "torch", "compress": "none", "quantize": "none", "status": "ok", "platform": "CPU",
                          "replicas": 8, "steps": 10, "ms_per_step": 12.5, "ns_per_day_per_replica": 27.65,
                          "ns_per_day_aggregate": 221.2}]}
    lines = markdown(report).splitlines()
    assert lines[2] == "| reference | 1 | 100.0 | 90.0 | 3.456 | 3.456 | 50.0 | 10.0 | 1.00× | 100% |"
    assert lines[3] == "| torch | 1 | 25.0 | 22.5 | 13.82 | 13.82 | 5.0 | 10.0 | 4.00× | 10.0% |"
    assert lines[4] == "| reference | 8 | skipped: predicted 28.1 GB > limit 16 GB | | | | | | | |"
    assert lines[5].startswith("| torch+tab-f32 (default) | 8 | 200.0 |") and lines[5].endswith("| – | – |")
    assert lines[-1] == "| torch | CPU | 8 | 10 | 12.5 | 27.65 | 221.2 |"
