"""A device.json of tools/device_checks.py rendered into docs/benchmarks.md's GPU section (between the markers
only; flashschnet.openmm.benchmark.device_report, run by tools/device_report.py), with the three targets' PASS /
FAIL / NOT MEASURED computed from the run."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from flashschnet.openmm.benchmark import device_report as dr

SCRIPT = ROOT / "tools" / "device_report.py"


def _ef(backend, R, ms, peak, **kw):
    return dict(dict(backend=backend, quantize="none", matmul="auto", cuda_graph=False, compress="none"), **kw,
                replicas=R, status="ok", seq=0, median_ms=ms, min_ms=ms, ns_per_day_per_replica=345.6 / ms,
                ns_per_day_aggregate=345.6 / ms * R, peak_extra_mb=peak, weights_kb=957.0, n_beads=290)


def _omm(backend, R, ms, force="TorchForce", **kw):
    return dict(dict(platform="CUDA", kind="openmm", variant="tf32" if backend != "reference" else "exact",
                     backend=backend, quantize="none", matmul="auto", compress="none", cuda_graph=False,
                     replicas=R, steps=50, openmm_force=force, network_force=force), **kw,
                status="ok", seq=0, ms_per_step=ms, ns_per_day_per_replica=345.6 / ms,
                ns_per_day_aggregate=345.6 / ms * R, peak_allocated_mb=120.0, gpu_used_mb=2000.0)


def synthetic():
    """A GPU device.json that meets every target: 64 x BPTI at 3 ms/step (7,373 ns/day), 20x the reference,
    5 % of its memory; a tf32 check that passes."""
    timings = [_ef("reference", 64, 40.0, 1000.0), _ef("triton", 64, 2.0, 50.0)]
    openmm = [_omm("triton", 64, 3.0), _omm("reference", 64, 60.0), _omm("triton", 64, 2.5, "TorchForce+CUDA graph"),
              dict(_omm("triton", 128, 1.0), status="skipped", reason="predicted 300 s > the 20 s left")]
    check = {"check": "tf32", "backend": "triton", "matmul": "auto", "rule": "measured <= 2 x predicted + 1e-06",
             "energy_predicted": 3e-4, "energy_measured": 4e-4, "energy_limit": 6.01e-4,
             "forces_predicted": 1e-3, "forces_measured": 1.5e-3, "forces_limit": 2.001e-3, "passed": True,
             "item": "tf32 check vs tf32-accuracy.json", "status": "ok", "seq": 1}
    corr = dict(backend="triton", quantize="none", matmul="auto", compress="none", item="triton+none", status="ok",
                seq=0, energy_rel_err_vs_oracle=4e-4, forces_rel_err_vs_oracle=1.5e-3, bitwise_repeatable=True,
                finite=True, energy_rel_diff_vs_reference=4e-4)
    def stage(results, skips=(), errors=()):
        return dict(status="error" if errors else "partial" if skips else "ok", wall_s=12.0, results=list(results),
                    skips=list(skips), errors=list(errors))
    return {"settings": {"device": "cuda", "smoke": False, "kernel_backend": "triton", "budget": 450.0,
                         "backends": ["reference", "torch", "triton"], "replicas": [1, 8, 64, 128],
                         "openmm_replicas": [1, 8, 64, 128], "openmm_steps": 50, "commit": "abc123" * 6 + "abcd",
                         "started_utc": "2026-12-03 06:00:00 UTC", "pdb": "flashschnet/data/4PTI_bpti.pdb (packaged)",
                         "oracle": "tests/data/oracles/mlcg_schnet_A.pt", "command": "python tools/device_checks.py"},
            "machine": {"gpus": ["NVIDIA H200, 580.65.06, 143771 MiB"], "python": "3.12.3", "torch": "2.11.0",
                        "torch_cuda": "13.0", "triton": "3.6.0", "numpy": "2.5.0", "openmm": "8.6.1",
                        "openmmtorch": "acellera-openmmtorch-cu13 1.10", "platforms": ["Reference", "CPU", "CUDA"],
                        "plugin_load_failures": []},
            "stages": {"environment": stage([{"item": "versions"}]), "compile": stage([{"item": "x"}]),
                       "correctness": stage([corr, check]), "timings": stage(timings),
                       "openmm": stage(openmm[:3], skips=[openmm[3]])},
            "timings": timings, "ratios": [], "openmm": openmm, "total_wall_s": 431.0, "passed": True}


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


def test_splice_replaces_only_between_the_markers(tmp_path):
    """The tool run as a program (both runs at once: each is mostly its imports): it rewrites only the section
    between the markers; with --stdout it prints the section and writes nothing."""
    original = f"# Benchmarks\n\nkeep\n\n## GPU (H200)\n\nintro\n\n{dr.BEGIN}\nold\n{dr.END}\n\ntail\n"
    doc, untouched = tmp_path / "benchmarks.md", tmp_path / "untouched.md"
    doc.write_text(original)
    untouched.write_text(original)
    dj = tmp_path / "device.json"
    dj.write_text(json.dumps(synthetic()))
    write, show = (subprocess.Popen([sys.executable, str(SCRIPT), str(dj), *extra], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                   for extra in (["--doc", str(doc)], ["--doc", str(untouched), "--stdout"]))
    (_, err), (shown, _) = write.communicate(timeout=300), show.communicate(timeout=300)
    assert write.returncode == 0, err
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nkeep\n\n## GPU (H200)\n\nintro\n\n" + dr.BEGIN + "\n")
    assert text.endswith(dr.END + "\n\ntail\n") and "\nold\n" not in text and "**PASS**" in text
    again = dr.splice(text, dr.render(synthetic()))
    assert again == text                                                       # idempotent
    # --stdout writes nothing
    assert show.returncode == 0 and "**PASS**" in shown and untouched.read_text() == original
    # no markers: a GPU section with them is appended
    appended = dr.splice("# B\n\ntext\n", "body\n")
    assert appended == f"# B\n\ntext\n\n## GPU (H200)\n\n{dr.BEGIN}\nbody\n{dr.END}\n"


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
