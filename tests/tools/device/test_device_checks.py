"""tools/device/device_checks.py (the GPU checks tools/device/device_benchmark.sh runs on a lent device machine), run
here in its ``--smoke`` mode: the same seven stages, each in its own process, at tiny sizes on the CPU (backends
reference and torch; the timing rows in row workers of the checkout's tree and of a baseline tree built by
tools/device/fetch_device_baseline.sh from the last commit before the kernel rewrite; the OpenMM rows through the
TorchForce on the CPU platform, the do-nothing force beside them; MARTINI 3 as 1 and 2 processes at once; the
CUDA-only rows skipped with the reason), rendered by tools/device/device_report.py's code as a CPU rehearsal; the exit
status on errors and the skips past the deadlines. The modules' own tests: tests/openmm/benchmark/test_device_*.py."""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from flashschnet.openmm.benchmark import device_report
from flashschnet.openmm.benchmark.device_martini import martini_ff
from tests.conftest import ROOT
from tests.helpers.benchmark_reports import PREDICTION

SCRIPT = ROOT / "tools" / "device" / "device_checks.py"
FETCH_BASELINE = ROOT / "tools" / "device" / "fetch_device_baseline.sh"
STAGES = ["environment", "compile", "correctness", "timings", "baseline", "openmm", "martini"]


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


def baseline_tree(folder):
    """The baseline tree built by tools/device/fetch_device_baseline.sh into ``folder``, or None (no git history
    here)."""
    res = subprocess.run(["bash", str(FETCH_BASELINE), str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    return folder if res.returncode == 0 else None


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke run's device.json, its printed output and its baseline tree (the OpenMM rows at R = 2 only)."""
    out = tmp_path_factory.mktemp("device")
    pred = out / "prediction.json"
    pred.write_text(json.dumps(PREDICTION))
    tree = baseline_tree(out / "baseline")
    stdout = run_checks("--device", "cpu", "--smoke", "--openmm-replicas", "2", "--prediction", str(pred),
                        "--baseline", str(tree or out / "none"), "--out", str(out), timeout=300)
    return json.loads((out / "device.json").read_text()), stdout, tree


def test_every_stage_runs_without_errors(smoke):
    report, stdout, _ = smoke
    assert list(report["stages"]) == STAGES and report["passed"] is True
    for name, stage in report["stages"].items():
        assert stage["errors"] == [], (name, stage["errors"])
        assert stage["status"] in ("ok", "partial") and stage["wall_s"] > 0
    assert report["stages"]["environment"]["skips"][0]["item"] == "nvidia-smi"      # --device cpu
    assert report["machine"]["device"] == "cpu" and report["total_wall_s"] < 240
    assert "openmmtorch" in report["machine"] and "cannot load" not in report["machine"]["openmmtorch"]
    assert report["settings"]["commit"] is None or len(report["settings"]["commit"]) >= 40
    shares = report["settings"]["shares"]                  # each stage's share of the budget
    assert list(shares) == STAGES and sum(shares.values()) == pytest.approx(1.0)
    for text in ("== device checks: stages", "plugin load failures", "Targets (the kernel rewrite's goals",
                 "passed (no errors)"):
        assert text in stdout


def test_compile_and_correctness_numbers(smoke):
    report, stdout, _ = smoke
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
    (check,) = [r for r in results if "check" in r]                 # a CPU: the ieee check; tf32 skipped
    assert check["check"] == "ieee" and check["backend"] == "torch" and check["passed"] is True
    assert check["energy_limit"] == pytest.approx(2 * 1e-5 + 1e-6)
    assert [s["check"] for s in report["stages"]["correctness"]["skips"]] == ["tf32"]      # no bf16 prediction


def test_timings_of_both_trees(smoke):
    report, _, tree = smoke
    ok = [r for r in report["timings"] if r["status"] == "ok"]
    current = {(r["variant"], r["structure"], r["replicas"]) for r in ok if r["tree"] == "current"}
    assert current == {(v, s, R) for R in (1, 2) for v, s in (("float32 tables", "bpti"), ("tf32", "bpti"),
                                                               ("exact", "bpti"), ("bf16 products", "bpti"),
                                                               ("float32 tables", "lysozyme"))}
    for r in ok:
        assert r["outputs_finite"] and r["n_beads"] > 20 and 0 < r["min_ms"] <= r["median_ms"]
        assert r["ns_per_day_aggregate"] == pytest.approx(r["replicas"] * 4e-6 * 86400 / (r["median_ms"] / 1e3))
    graphs = [r for r in report["timings"] if r["variant"] == "float32 tables/graph"]
    assert graphs and all(r["status"] == "skipped" and "needs CUDA" in r["reason"] for r in graphs)
    assert {(q["label"], q["replicas"]) for q in report["ratios"]} >= {("torch+tab-f32", 2), ("torch", 2)}
    base = [r for r in report["timings"] + report["openmm"] if r["tree"] == "baseline"]
    if tree is None:                                     # no git history: the baseline's rows say how to get it
        assert base and all(r["status"] == "skipped" and "fetch_device_baseline" in r["reason"] for r in base)
        return
    ran = [r for r in base if r["status"] == "ok"]
    assert {(r["kind"], r["variant"], r["replicas"]) for r in ran} == {
        (k, v, R) for k, v in (("energy_forces", "tf32"), ("energy_forces", "float32 tables"), ("openmm", "tf32"),
                               ("openmm", "float32 tables")) for R in ((1, 2) if k == "energy_forces" else (2,))}
    assert all(r["flashschnet_path"].startswith(str(tree)) for r in ran)
    assert all(not r["flashschnet_path"].startswith(str(tree)) for r in report["timings"] if r["tree"] == "current"
               and r["status"] == "ok")
    side = device_report.render(report).split("Old and new side by side", 1)[1].split("\n\n", 2)[1]
    assert side.count("x** |") == 6                      # every baseline row that ran beside its current row


def test_openmm_and_martini_rows(smoke):
    report, _, _ = smoke
    omm = [o for o in report["openmm"] if o["tree"] == "current"]
    ok = [o for o in omm if o["status"] == "ok"]
    assert {(o["kind"], o["variant"], o["openmm_force"], o["structure"]) for o in ok} == {
        ("openmm", "float32 tables", "TorchForce", "bpti"), ("openmm", "float32 tables", "PythonForce", "bpti"),
        ("openmm", "exact", "TorchForce", "bpti"), ("openmm", "tf32", "TorchForce", "bpti"),
        ("openmm", "bf16 products", "TorchForce", "bpti"), ("openmm", "float32 tables", "TorchForce", "lysozyme"),
        ("overhead", "none", "TorchForce", "bpti"), ("overhead", "none", "PythonForce", "bpti"),
        ("tempering", "float32 tables", "TorchForce", "bpti")}
    for o in ok:
        assert o["platform"] == "CPU" and o["replicas"] == 2 and o["steps"] == 3 and o["ms_per_step"] > 0
        assert o["ns_per_day_aggregate"] == pytest.approx(2 * o["ns_per_day_per_replica"])
    nulls = [o for o in ok if o["kind"] == "overhead"]
    assert all(o["final_potential_kJ_mol"] == 0.0 and "do-nothing" in o["network"] for o in nulls)
    assert all(math.isfinite(o["final_potential_kJ_mol"]) for o in ok if o["kind"] == "openmm")
    graphs = [o for o in omm if o["openmm_force"] == "TorchForce+CUDA graph"]
    assert graphs and all(o["status"] == "skipped" and "CUDA platform" in o["reason"] for o in graphs)
    (pt,) = [o for o in ok if o["kind"] == "tempering"]
    assert pt["walkers"] == 2 and pt["exchanges"] == 1 and pt["exchange_interval"] == 3
    martini = report["martini"]
    if martini_ff(argparse.Namespace(root=str(ROOT), martini_ff=None)) is not None:      # the stage's own lookup
        assert [(m["status"], m["processes"]) for m in martini] == [("ok", 1), ("ok", 2)]
        two = martini[1]
        assert two["processes_ok"] == 2 and two["particles"] > 1000 and two["overlap_s"] > 0
        assert two["ns_per_day_aggregate"] == pytest.approx(sum(p["ns_per_day_per_replica"]
                                                                for p in two["per_process"]))
        assert all(math.isfinite(p["potential_kJ_mol"]) and p["potential_kJ_mol"] < 0 for p in two["per_process"])
    else:
        assert martini and all(m["status"] == "skipped" and "MARTINI 3" in m["reason"] for m in martini)


def test_the_smoke_run_renders_as_a_cpu_rehearsal(smoke):
    """tools/device/device_report.py's code on the smoke run: labelled a CPU smoke rehearsal, no GPU run claimed; the
    targets evaluated from the run's rows (R = 2 here); OpenMM's share from the do-nothing rows."""
    report, _, _ = smoke
    text = device_report.render(report)
    assert text.startswith("**Not a GPU run.**") and "CPU smoke rehearsal" in text
    targets = device_report.targets(report)
    assert len(targets) == 5 and all(t["status"] in ("PASS", "FAIL", "NOT MEASURED") for t in targets)
    assert targets[1]["status"] != "NOT MEASURED"             # the default network's TorchForce row at R = 2
    assert "| TorchForce | 2 |" in text.split("OpenMM's share of a step", 1)[1]
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
    run_checks("--smoke", "--budget", "0.5", "--openmm-replicas", "2", "--baseline", str(tmp_path / "none"),
               "--out", str(tmp_path), timeout=120)
    report = json.loads((tmp_path / "device.json").read_text())
    assert list(report["stages"]) == STAGES and report["passed"] is True
    for name, stage in report["stages"].items():
        assert stage["status"] == "partial" and not stage["results"] and not stage["errors"], name
        assert stage["skips"], name
    reasons = [s["reason"] for st in report["stages"].values() for s in st["skips"] if s["item"] != "nvidia-smi"]
    assert all(r.startswith(("stage deadline", "no baseline tree", "the model's CUDA graph", "openmm-torch CUDA"))
               for r in reasons)
    assert report["timings"] and all(r["status"] == "skipped" for r in report["timings"])
    assert report["openmm"] and all(o["status"] == "skipped" for o in report["openmm"])
