"""flashschnet.openmm.benchmark.device_report: a device.json of tools/device_checks.py rendered into
docs/benchmarks.md's GPU section, with the three targets' PASS / FAIL / NOT MEASURED computed from the run (a
synthetic GPU run that meets them, one that misses them, a CPU smoke run labelled as such), the doc's markers, and
the report left unmutated."""
from __future__ import annotations

import copy

import pytest

from tests.conftest import ROOT
from flashschnet.openmm.benchmark import device_report as dr
from tests.helpers.benchmark_reports import synthetic


def test_gpu_run_meets_every_target():
    report = synthetic()
    got = {t["name"].split(",")[0].split(" (")[0]: t for t in dr.targets(report)}
    assert [t["status"] for t in dr.targets(report)] == ["PASS", "PASS", "PASS"]
    assert got["aggregate ns/day"]["value"] == pytest.approx(345.6 / 3.0 * 64)
    assert got["speed-up over the reference backend"]["value"] == pytest.approx(20.0)
    assert got["peak memory vs the reference backend"]["value"] == pytest.approx(0.05)
    text = dr.render(report)
    for needed in ("NVIDIA H200, 580.65.06", "torch 2.11.0", "openmmtorch acellera-openmmtorch-cu13 1.10",
                   "abc123", "**PASS**", "tf32 | triton, auto", "3.00e-04 / 4.00e-04 / 6.01e-04",
                   "TorchForce+CUDA graph", "predicted 300 s > the 20 s left", "passed (no errors)", "Errors: none."):
        assert needed in text, needed
    assert "No GPU run has happened yet" not in text and "FAIL" not in text


def test_a_missed_target_says_fail():
    report = synthetic()
    slow = report["openmm"][0]
    slow.update(ms_per_step=6.0, ns_per_day_per_replica=57.6, ns_per_day_aggregate=57.6 * 64)   # 3,686 ns/day, 10x
    status = [t["status"] for t in dr.targets(report)]
    assert status == ["FAIL", "FAIL", "PASS"]
    assert "**FAIL**" in dr.render(report)
    # a reference row missing: NOT MEASURED, with what is missing; a failed tf32 check and an error are shown
    report = synthetic()
    report["openmm"] = [o for o in report["openmm"] if o["backend"] != "reference"]
    report["stages"]["correctness"]["results"][1].update(passed=False)
    report["stages"]["correctness"]["errors"] = [{"item": "tf32 check", "check": "tf32", "status": "error",
                                                  "error": "FAIL: measured over the limit"}]
    report["passed"] = False
    assert [t["status"] for t in dr.targets(report)] == ["PASS", "NOT MEASURED", "PASS"]
    text = dr.render(report)
    assert "no ok OpenMM row of reference [TorchForce] R=64" in text and "FAILED (errors below)" in text
    assert "Errors (1):" in text and "FAIL: measured over the limit" in text


def test_cpu_smoke_is_labelled_and_not_a_gpu_run():
    report = synthetic()
    report["settings"].update(device="cpu", smoke=True, kernel_backend="torch", openmm_replicas=[1, 2])
    report["machine"] = {"cpu_model": "AMD EPYC", "cores": 2, "threads": 1}
    for o in report["openmm"] + report["timings"]:
        o.update(replicas=2, backend="torch" if o["backend"] == "triton" else o["backend"])
    text = dr.render(report)
    assert text.startswith("**No GPU run has happened yet.**") and "CPU smoke rehearsal" in text
    assert "R = 2, CPU smoke: not the GPU numbers" in text and "CPU: AMD EPYC" in text


def test_the_doc_has_the_markers_and_says_whether_a_gpu_run_happened():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert text.count(dr.BEGIN) == 1 and text.count(dr.END) == 1 and "## GPU (H200)" in text
    section = text.split(dr.BEGIN, 1)[1].split(dr.END, 1)[0]
    if "GPU run of" not in section:                       # no device run rendered yet: say so, honestly
        assert "No GPU run has happened yet" in text


def test_synthetic_report_is_not_mutated():
    report = synthetic()
    before = copy.deepcopy(report)
    dr.render(report)
    assert report == before
