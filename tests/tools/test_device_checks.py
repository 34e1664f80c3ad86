"""tools/device_checks.py (the GPU checks tools/device_benchmark.sh runs on a lent device machine), run here in its
``--smoke`` mode: the same five stages, each in its own process, at tiny sizes on the CPU (backends reference and
torch, the OpenMM loop on the CPU platform with 2 replicas x 3 steps)."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED

SCRIPT = ROOT / "tools" / "device_checks.py"
STAGES = ["environment", "compile", "correctness", "timings", "openmm"]


def run_checks(*args: str, timeout: float) -> str:
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
    assert proc.returncode == 0, out[-3000:]
    return out


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke run's device.json and printed output."""
    out = tmp_path_factory.mktemp("device")
    stdout = run_checks("--device", "cpu", "--smoke", "--out", str(out), timeout=170)
    return json.loads((out / "device.json").read_text()), stdout


def test_every_stage_runs_without_errors(smoke):
    report, stdout = smoke
    assert list(report["stages"]) == STAGES
    for name, stage in report["stages"].items():
        assert stage["errors"] == [], (name, stage["errors"])
        assert stage["results"], name
        assert stage["status"] in ("ok", "partial") and stage["wall_s"] > 0
    assert report["stages"]["environment"]["skips"][0]["item"] == "nvidia-smi"      # --device cpu
    assert report["machine"]["device"] == "cpu" and report["total_wall_s"] < 150
    for text in ("== device checks: stages", "plugin load failures", "speed-up vs ref", "OpenMM (packed replicas"):
        assert text in stdout


def test_compile_and_correctness_numbers(smoke):
    report, _ = smoke
    compiled = report["stages"]["compile"]["results"]
    assert [(r["quantize"], r["dtype"]) for r in compiled] == [("none", "float32"), ("bf16", "float32"),
                                                               ("fp16", "float32"), ("none", "float64")]
    assert all(r["backend"] == "torch" and r["finite"] and r["first_call_s"] > 0 and r["second_call_s"] > 0
               for r in compiled)
    rows = {(r["backend"], r["quantize"]): r for r in report["stages"]["correctness"]["results"]}
    assert set(rows) == {(b, q) for b in ("reference", "torch") for q in ("none", "bf16", "fp16")}
    for (backend, variant), r in rows.items():
        tol = 1e-4 if variant == "none" else 5e-2                  # float32 / 16-bit weights, vs the float64 oracle
        assert r["finite"] and 0 < r["energy_rel_err_vs_oracle"] < tol and 0 < r["forces_rel_err_vs_oracle"] < tol
        if backend == "torch":                                      # deterministic reductions; same maths as reference
            assert r["bitwise_repeatable"]
            assert r["forces_rel_diff_vs_reference"] < 1e-5 and r["energy_rel_diff_vs_reference"] < 1e-5


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
    run, pt, *martini = report["openmm"]
    assert run["platform"] == "CPU" and run["replicas"] == 2 and run["steps"] == 3
    assert run["network_force"].startswith("PythonForce fallback") and run["positions_finite"]
    assert run["ns_per_day_aggregate"] == pytest.approx(2 * run["ns_per_day_per_replica"]) and run["ms_per_step"] > 0
    # the 1-GPU parallel-tempering row: the same System as 2 walkers, an exchange every 3 steps
    assert pt["kind"] == "tempering" and pt["platform"] == "CPU" and pt["walkers"] == 2 and pt["steps"] == 3
    assert pt["exchanges"] == 1 and pt["exchange_interval"] == 3 and pt["ns_per_day_aggregate"] > 0
    assert pt["ns_per_day_aggregate"] == pytest.approx(2 * pt["ns_per_day_per_replica"])
    assert " +PT" in stdout
    # the MARTINI 3 row on the same platform (BPTI, the committed system; needs the force-field files)
    skips = report["stages"]["openmm"]["skips"]
    if (SHARED / "martini" / "m3" / "martini_v3.0.0.itp").exists() or (ROOT / ".martini_ff").is_dir():
        (m,) = martini
        assert m["kind"] == "martini" and m["platform"] == "CPU" and m["replicas"] == 1
        assert m["particles"] > 1000 and m["dt_fs"] == 20.0 and m["ns_per_day_aggregate"] > 0
        assert math.isfinite(m["potential_kJ_mol"]) and m["potential_kJ_mol"] < 0
        assert not any("MARTINI" in s["item"] for s in skips)
    else:
        assert not martini and any("MARTINI" in s["item"] for s in skips)


def test_past_deadlines_are_recorded_as_skips(tmp_path):
    """With no budget left every stage still runs, starts no item and records each as a skip (no errors)."""
    run_checks("--smoke", "--budget", "0.5", "--out", str(tmp_path), timeout=120)
    report = json.loads((tmp_path / "device.json").read_text())
    assert list(report["stages"]) == STAGES
    for name, stage in report["stages"].items():
        assert stage["status"] == "partial" and not stage["results"] and not stage["errors"], name
        assert stage["skips"] and all("stage deadline" in s["reason"] for s in stage["skips"]
                                      if s["item"] != "nvidia-smi"), name
    assert len(report["timings"]) == 6 and all(r["status"] == "skipped" for r in report["timings"])
