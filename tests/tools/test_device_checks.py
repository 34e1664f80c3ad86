"""tools/device_checks.py (the GPU checks tools/device_benchmark.sh runs on a lent device machine), run here in its
``--smoke`` mode: the same five stages, each in its own process, at tiny sizes on the CPU (backends reference and
torch; the OpenMM rows through the TorchForce on the CPU platform, the CUDA-graph rows skipped with the reason),
rendered by tools/device_report.py's code as a CPU rehearsal; the exit status on errors and the skips past the
deadlines. The module's own tests (the precision check, the OpenMM plan: flashschnet.openmm.benchmark.device_checks)
are tests/openmm/benchmark/test_device_checks.py."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SHARED
from tests.helpers.benchmark_reports import PREDICTION
from flashschnet.openmm.benchmark import device_report

SCRIPT = ROOT / "tools" / "device_checks.py"
STAGES = ["environment", "compile", "correctness", "timings", "openmm"]


def run_checks(*args: str, timeout: float, rc: int = 0) -> str:
    """Run the script (cwd the repository root) with ``args``; its stdout. On a timeout its stage processes are
    killed with it (its own process group)."""
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"device_checks.py {' '.join(args)} took over {timeout} s:\n{out[-3000:]}")
    assert proc.returncode == rc, out[-3000:]
    return out


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke run's device.json and printed output (the OpenMM rows at R = 2 only, to stay fast)."""
    out = tmp_path_factory.mktemp("device")
    pred = out / "prediction.json"
    pred.write_text(json.dumps(PREDICTION))
    stdout = run_checks("--device", "cpu", "--smoke", "--openmm-replicas", "2", "--prediction", str(pred),
                        "--out", str(out), timeout=240)
    return json.loads((out / "device.json").read_text()), stdout


def test_every_stage_runs_without_errors(smoke):
    report, stdout = smoke
    assert list(report["stages"]) == STAGES and report["passed"] is True
    for name, stage in report["stages"].items():
        assert stage["errors"] == [], (name, stage["errors"])
        assert stage["results"], name
        assert stage["status"] in ("ok", "partial") and stage["wall_s"] > 0
    assert report["stages"]["environment"]["skips"][0]["item"] == "nvidia-smi"      # --device cpu
    assert report["machine"]["device"] == "cpu" and report["total_wall_s"] < 200
    assert "openmmtorch" in report["machine"] and "cannot load" not in report["machine"]["openmmtorch"]
    assert report["settings"]["commit"] is None or len(report["settings"]["commit"]) >= 40
    shares = report["settings"]["shares"]                  # each stage's share of the budget
    assert list(shares) == STAGES and sum(shares.values()) == pytest.approx(1.0)
    for text in ("== device checks: stages", "plugin load failures", "speed-up vs ref", "OpenMM (packed replicas",
                 "passed (no errors)"):
        assert text in stdout


def test_compile_and_correctness_numbers(smoke):
    report, stdout = smoke
    compiled = report["stages"]["compile"]["results"]
    assert [(r["quantize"], r["dtype"]) for r in compiled] == [("none", "float32"), ("bf16", "float32"),
                                                               ("fp16", "float32"), ("none", "float64")]
    assert all(r["backend"] == "torch" and r["finite"] and r["first_call_s"] > 0 and r["second_call_s"] > 0
               for r in compiled)
    results = report["stages"]["correctness"]["results"]
    rows = {(r["backend"], r["quantize"]): r for r in results if "check" not in r}
    assert set(rows) == {(b, q) for b in ("reference", "torch") for q in ("none", "bf16", "fp16")}
    for (backend, variant), r in rows.items():
        tol = 1e-4 if variant == "none" else 5e-2                  # float32 / 16-bit weights, vs the float64 oracle
        assert r["finite"] and 0 < r["energy_rel_err_vs_oracle"] < tol and 0 < r["forces_rel_err_vs_oracle"] < tol
        if backend == "torch":                                      # deterministic reductions; same maths as reference
            assert r["bitwise_repeatable"]
            assert r["forces_rel_diff_vs_reference"] < 1e-5 and r["energy_rel_diff_vs_reference"] < 1e-5
    # the precision check on a CPU: ieee (the torch backend's exact float32 products) vs the prediction; tf32 skipped
    (check,) = [r for r in results if "check" in r]
    assert check["check"] == "ieee" and check["backend"] == "torch" and check["passed"] is True
    assert check["energy_measured"] == rows["torch", "none"]["energy_rel_err_vs_oracle"]
    assert check["energy_limit"] == pytest.approx(2 * 1e-5 + 1e-6)
    skips = report["stages"]["correctness"]["skips"]
    assert [s["check"] for s in skips] == ["tf32"] and "exact float32" in skips[0]["reason"]
    assert "ieee check (torch, matmul auto)" in stdout and "PASS" in stdout


def test_timings_and_openmm_numbers(smoke):
    report, stdout = smoke
    rows = report["timings"]
    assert [(r["backend"], r["quantize"], r["replicas"]) for r in rows] == [
        (b, q, R) for R in (1, 2) for b, q in (("reference", "none"), ("torch", "none"), ("torch", "bf16"))]
    for r in rows:
        assert r["status"] == "ok" and r["outputs_finite"] and r["n_beads"] > 20
        assert 0 < r["min_ms"] <= r["median_ms"] and len(r["times_ms"]) == 2
        assert r["ns_per_day_aggregate"] == pytest.approx(r["replicas"] * 4e-6 * 86400 / (r["median_ms"] / 1e3))
    assert {(q["label"], q["replicas"]) for q in report["ratios"]} == {(n, R) for n in ("torch", "torch+bf16")
                                                                      for R in (1, 2)}
    assert all(q["speedup_vs_reference"] > 0 for q in report["ratios"])

    omm = report["openmm"]
    ok = [o for o in omm if o["status"] == "ok" and o["kind"] == "openmm"]
    # every variant of the kernel backend through the TorchForce, the reference's TorchForce, the PythonForce
    assert {(o["variant"], o["backend"], o["openmm_force"]) for o in ok} == (
        {(v, "torch", "TorchForce") for v in ("tf32", "bf16 products", "bf16 weights", "float32 tables")}
        | {("exact", "reference", "TorchForce"), ("tf32", "torch", "PythonForce")})
    for o in ok:
        assert o["platform"] == "CPU" and o["replicas"] == 2 and o["steps"] == 3 and o["positions_finite"]
        assert o["ns_per_day_aggregate"] == pytest.approx(2 * o["ns_per_day_per_replica"]) and o["ms_per_step"] > 0
        assert math.isfinite(o["final_potential_kJ_mol"]) and o["torch_cuda_graph"] is False
        assert o["network_force"].startswith("TorchForce" if o["openmm_force"] == "TorchForce" else "openmm.Python")
    # the CUDA-graph rows: skipped on the CPU platform, with the reason
    graphs = [o for o in omm if o.get("openmm_force") == "TorchForce+CUDA graph"]
    assert len(graphs) == 4 and all(o["status"] == "skipped" and "CUDA platform" in o["reason"] for o in graphs)
    # the 1-GPU parallel-tempering row: the same System (TorchForce) as 2 walkers, an exchange every 3 steps
    (pt,) = [o for o in omm if o["kind"] == "tempering"]
    assert pt["status"] == "ok" and pt["platform"] == "CPU" and pt["walkers"] == 2 and pt["steps"] == 3
    assert pt["openmm_force"] == "TorchForce" and pt["exchanges"] == 1 and pt["exchange_interval"] == 3
    assert pt["ns_per_day_aggregate"] == pytest.approx(2 * pt["ns_per_day_per_replica"]) and pt["ms_per_step"] > 0
    assert " +PT" in stdout and "[TorchForce+CUDA graph]" in stdout
    # the MARTINI 3 row on the same platform (BPTI, the committed system; needs the force-field files)
    martini = [o for o in report["stages"]["openmm"]["results"] + report["stages"]["openmm"]["skips"]
               if o.get("kind") == "martini"]
    if (SHARED / "martini" / "m3" / "martini_v3.0.0.itp").exists() or (ROOT / ".martini_ff").is_dir():
        (m,) = martini
        assert m["status"] == "ok" and m["platform"] == "CPU" and m["replicas"] == 1
        assert m["particles"] > 1000 and m["dt_fs"] == 20.0 and m["ns_per_day_aggregate"] > 0
        assert math.isfinite(m["potential_kJ_mol"]) and m["potential_kJ_mol"] < 0
    else:
        (m,) = martini
        assert m["status"] == "skipped" and "MARTINI 3" in m["reason"]


def test_the_smoke_run_renders_as_a_cpu_rehearsal(smoke):
    """tools/device_report.py on the smoke run: labelled a CPU smoke rehearsal, no GPU run claimed; the targets
    evaluated from the run's rows (R = 2 here)."""
    report, _ = smoke
    text = device_report.render(report)
    assert text.startswith("**No GPU run has happened yet.**") and "CPU smoke rehearsal" in text
    targets = device_report.targets(report)
    assert [t["status"] in ("PASS", "FAIL", "NOT MEASURED") for t in targets] == [True] * 3
    assert targets[0]["status"] != "NOT MEASURED"             # the torch TorchForce row at R = 2
    assert "| ieee | torch, auto |" in text and "passed (no errors)" in text


def test_errors_make_the_exit_status_nonzero(tmp_path):
    """A stage with an error (here: the structure does not exist) -> exit status 1 and ``passed`` false."""
    out = run_checks("--smoke", "--stages", "compile", "--pdb", str(tmp_path / "absent.pdb"), "--out", str(tmp_path),
                     timeout=120, rc=1)
    report = json.loads((tmp_path / "device.json").read_text())
    assert list(report["stages"]) == ["compile"] and report["passed"] is False
    assert report["stages"]["compile"]["status"] == "error" and "FAILED: errors in compile" in out


def test_past_deadlines_are_recorded_as_skips(tmp_path):
    """With no budget left every stage still runs, starts no item and records each as a skip (no errors, exit 0)."""
    run_checks("--smoke", "--budget", "0.5", "--openmm-replicas", "2", "--out", str(tmp_path), timeout=120)
    report = json.loads((tmp_path / "device.json").read_text())
    assert list(report["stages"]) == STAGES and report["passed"] is True
    for name, stage in report["stages"].items():
        assert stage["status"] == "partial" and not stage["results"] and not stage["errors"], name
        assert stage["skips"] and all("stage deadline" in s["reason"] for s in stage["skips"]
                                      if s["item"] != "nvidia-smi"), name
    assert len(report["timings"]) == 6 and all(r["status"] == "skipped" for r in report["timings"])
    assert report["openmm"] and all(o["status"] == "skipped" for o in report["openmm"])
