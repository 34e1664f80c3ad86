"""flashschnet.openmm.benchmark.device_report: a device.json of tools/device/device_checks.py rendered into
docs/benchmarks.md's section of the run after the kernel rewrite -- the targets' PASS / FAIL / NOT MEASURED
computed from the run (a made-up GPU run that meets them, one that misses them, a CPU smoke run labelled as
such), the old and new trees side by side, lysozyme, OpenMM's share, MARTINI, the first GPU run's report still
rendering, the doc's markers (the first run's section kept), and the report left unmutated."""
from __future__ import annotations

import copy

import pytest

from flashschnet.openmm.benchmark import device_report as dr
from tests.conftest import ROOT
from tests.helpers.benchmark_reports import synthetic


def ef(R, ms, peak, tree="current", structure="bpti", backend="triton", compress="float32", graph=False, **kw):
    return dict(dict(kind="energy_forces", tree=tree, structure=structure, backend=backend, compress=compress,
                     quantize="none", matmul="auto", cuda_graph=graph, replicas=R, status="ok", median_ms=ms,
                     ns_per_day_per_replica=345.6 / ms, ns_per_day_aggregate=345.6 / ms * R, peak_extra_mb=peak,
                     n_beads=284 if structure == "bpti" else 645, seq=0), **kw)


def omm(R, ms, force="TorchForce", kind="openmm", tree="current", backend="triton", compress="float32", **kw):
    return dict(dict(kind=kind, tree=tree, structure="bpti", backend=backend, compress=compress, quantize="none",
                     matmul="auto", cuda_graph=False, replicas=R, platform="CUDA", steps=50, openmm_force=force,
                     force=force, status="ok", ms_per_step=ms, ns_per_day_per_replica=345.6 / ms,
                     ns_per_day_aggregate=345.6 / ms * R, peak_allocated_mb=100.0, gpu_used_mb=900.0, seq=0), **kw)


def gpu_report():
    """A GPU run after the kernel rewrite that meets every target: 0.2 ms per step at R = 1, 14,746 ns/day at 64
    (54x the reference), energy_forces 66x the reference with 0.54 % of its memory."""
    timings = [ef(1, 0.3, 5.0, graph=True), ef(64, 0.9, 150.0, graph=True), ef(64, 1.0, 100.0),
               ef(64, 60.0, 28000.0, backend="reference", compress="none"), ef(1, 0.5, 8.0, structure="lysozyme",
                                                                               graph=True),
               ef(64, 20.0, 240.0, tree="baseline", graph=True), ef(1, 4.0, 5.0, tree="baseline", graph=True)]
    openmm = [omm(1, 0.25), omm(1, 0.2, "TorchForce+CUDA graph"), omm(64, 1.5), omm(64, 80.0, backend="reference",
                                                                                       compress="none"),
              omm(1, 0.1, kind="overhead", backend="none", compress="none"),
              omm(64, 0.3, kind="overhead", backend="none", compress="none"),
              omm(1, 0.05, "TorchForce+CUDA graph", kind="overhead", backend="none", compress="none"),
              omm(1, 4.0, "TorchForce+CUDA graph", tree="baseline"),
              dict(omm(64, 1.0, tree="baseline", compress="none"), status="skipped", reason="stage deadline: 0 s left")]
    martini = [dict(kind="martini", processes=1, status="ok", platform="CUDA", ms_per_step=0.0864,
                    ns_per_day_per_replica=20000.0, ns_per_day_aggregate=20000.0, seq=0, item="m1"),
               dict(kind="martini", processes=4, status="ok", platform="CUDA", ms_per_step=0.216,
                    ns_per_day_per_replica=8000.0, ns_per_day_aggregate=32000.0, overlap_s=2.9, seq=1, item="m4",
                    per_process=[dict(status="ok", ns_per_day_per_replica=8000.0)] * 4)]
    report = synthetic()
    report["settings"].update(openmm_replicas=[1, 8, 64], replicas=[1, 64], baseline_commit="f4fff81e" * 5)
    report.update(timings=timings, openmm=openmm, martini=martini, ratios=[])
    report["stages"].update(timings=dict(report["stages"]["timings"], results=timings),
                            openmm=dict(report["stages"]["openmm"], results=openmm[:-1], skips=openmm[-1:]),
                            martini=dict(status="ok", wall_s=20.0, results=martini, skips=[], errors=[]))
    return report


def test_gpu_run_meets_every_target():
    report = gpu_report()
    got = dr.targets(report)
    assert [t["status"] for t in got] == ["PASS"] * 5, got
    assert got[0]["value"] == pytest.approx(0.2) and "TorchForce+CUDA graph" in got[0]["detail"]
    assert got[1]["value"] == pytest.approx(345.6 / 1.5 * 64)
    assert got[2]["value"] == pytest.approx(80.0 / 1.5) and got[3]["value"] == pytest.approx(60.0 / 0.9)
    assert got[4]["value"] == pytest.approx(150.0 / 28000.0)                   # the larger of the default rows
    text = dr.render(report)
    for needed in ("NVIDIA H200, 580.65.06", "baseline (the last commit before the kernel rewrite): `f4fff81e",
                   "**PASS**", "Old and new side by side", "| energy_forces | triton+tab-f32/graph | 64 | 0.900 | "
                   "20.000 | **22.22x** |", "| OpenMM CUDA | triton+tab-f32 [TorchForce+CUDA graph] | 1 | 0.200 | "
                   "4.000 | **20.00x** |", "not run", "| TorchForce | 64 | 0.300 | 1.500 | 1.200 | 20% |",
                   "| 4 | CUDA | 0.216 | 8,000 / 8,000 / 8,000 / 8,000 | 32,000 | 2.90 |",
                   "| per replica | 1,728 (triton+tab-f32 [TorchForce+CUDA graph], R=1) | 20,000 (1 process) | "
                   "**0.09x** |", "| aggregate vs 4 processes | 14,746 (triton+tab-f32 [TorchForce], R=64) | 32,000 "
                   "(4 processes) | **0.46x** |", "Lysozyme (645 beads) beside BPTI (284 beads)", "| 1.67x | 0.73x |",
                   "tf32 | triton, auto", "passed (no errors)", "Errors: none.", "stage deadline: 0 s left"):
        assert needed in text, needed
    assert "Not a GPU run" not in text and "FAIL" not in text


def test_missed_and_unmeasured_targets():
    report = gpu_report()
    for o in report["openmm"]:
        if o["kind"] == "openmm" and o["tree"] == "current" and o["backend"] == "triton" and o["replicas"] == 1:
            o.update(ms_per_step=0.5, ns_per_day_per_replica=691.2)
    assert [t["status"] for t in dr.targets(report)] == ["FAIL", "PASS", "PASS", "PASS", "PASS"]
    assert "**FAIL**" in dr.render(report)
    report = gpu_report()
    report["openmm"] = [o for o in report["openmm"] if o["backend"] != "reference"]
    report["timings"] = [r for r in report["timings"] if r["backend"] != "reference"]
    report["passed"] = False
    report["stages"]["openmm"]["errors"] = [{"item": "OpenMM CUDA x", "status": "error", "error": "Boom: one line"}]
    got = dr.targets(report)
    assert [t["status"] for t in got] == ["PASS", "PASS", "NOT MEASURED", "NOT MEASURED", "NOT MEASURED"]
    text = dr.render(report)
    assert "no ok OpenMM row of the reference [TorchForce] at R=64" in text and "FAILED (errors below)" in text
    assert "Errors (1):" in text and "- openmm: OpenMM CUDA x: Boom: one line" in text


def test_cpu_smoke_is_labelled_and_the_first_runs_report_still_renders():
    report = gpu_report()
    report["settings"].update(device="cpu", smoke=True, kernel_backend="torch", openmm_replicas=[1, 2])
    report["machine"] = {"cpu_model": "AMD EPYC", "cores": 2, "threads": 1}
    text = dr.render(report)
    assert text.startswith("**Not a GPU run.**") and "CPU smoke rehearsal" in text
    assert "R = 1 and 2, CPU smoke: not the GPU numbers" in text and "CPU: AMD EPYC" in text
    old = synthetic()                       # the first GPU run's shape: no tree, no structure, no baseline rows
    assert [t["status"] for t in dr.targets(old)][2] == "NOT MEASURED" and "GPU run of" in dr.render(old)
    assert "Old and new side by side" not in dr.render(old)


def test_the_doc_keeps_the_first_runs_section():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert text.count(dr.FIRST_BEGIN) == 1 and text.count(dr.FIRST_END) == 1 and "## GPU (H200)" in text
    assert "GPU run of 2026-12-04" in text.split(dr.FIRST_BEGIN, 1)[1].split(dr.FIRST_END, 1)[0]
    assert text.count(dr.BEGIN) <= 1 and dr.BEGIN != dr.FIRST_BEGIN
    again = dr.splice(text, "new body\n")                      # the new run: its own section, the old one kept
    assert again.count(dr.FIRST_BEGIN) == 1 and again.split(dr.FIRST_BEGIN, 1)[1].split(dr.FIRST_END, 1)[0] == \
        text.split(dr.FIRST_BEGIN, 1)[1].split(dr.FIRST_END, 1)[0]
    assert f"{dr.BEGIN}\nnew body\n{dr.END}" in again and dr.splice(again, "new body\n") == again


def test_report_is_not_mutated():
    report = gpu_report()
    before = copy.deepcopy(report)
    dr.render(report)
    dr.short(report)
    assert report == before
