"""flashschnet.openmm.benchmark.device_checks (what the stages of tools/device/device_checks.py share): the row plans in
their order of importance (the rows the baseline repeats first; the do-nothing force beside the network; every
row once; the PythonForce fallback without openmm-torch), a plan row as a measure configuration, one-line errors,
a stage's records, and the precision check of the measured float32 errors against a prediction (pass, fail,
missing)."""
from __future__ import annotations

import argparse
import json
import time

import pytest

from flashschnet.openmm.benchmark import device_checks as dc
from flashschnet.openmm.benchmark.device_checks import Stage, precision_checks
from tests.conftest import ROOT
from tests.helpers.benchmark_reports import PREDICTION

#: the options of a device run (tools/device/device_checks.py --device cuda) that the plans read
FULL_RUN = dict(backends=["reference", "torch", "triton"], kernel_backend="triton", replicas=[1, 8, 64, 128, 256],
                openmm_replicas=[1, 8, 64, 128, 256], reference_replicas=[8, 64], openmm_steps=50,
                openmm_steps_r1=400, device="cuda", warmup=3, repeats=20, threads=None, pdb=None, root=str(ROOT))


def _short(plan):
    return [(r["kind"], r["tree"], r["structure"], r["variant"], r.get("force"), r["replicas"]) for r in plan]


def test_pair_and_unique_rows():
    assert dc.pair_of([1, 8, 64, 128]) == [1, 64] and dc.pair_of([1, 2]) == [1, 2] and dc.pair_of([2]) == [2]
    args = argparse.Namespace(**FULL_RUN)
    for plan in (dc.timing_plan(args), dc.baseline_plan(args), dc.openmm_plan(args, True)):
        assert len(plan) == len({json.dumps(r, sort_keys=True) for r in plan})          # no row twice


def test_timing_plan_order_and_grid():
    """The side-by-side rows first, then the reference (64 first), bf16 products, the R grid, lysozyme."""
    plan = _short(dc.timing_plan(argparse.Namespace(**FULL_RUN)))
    ef = lambda v, R, s="bpti": ("energy_forces", "current", s, v, None, R)  # noqa: E731
    assert plan[:6] == [ef("float32 tables/graph", 1), ef("float32 tables/graph", 64), ef("float32 tables", 1),
                        ef("float32 tables", 64), ef("tf32", 1), ef("tf32", 64)]
    assert plan[6:8] == [ef("exact", 64), ef("exact", 8)]
    assert {(v, R) for _, _, s, v, _, R in plan if s == "bpti" and v.startswith("float32")} == {
        (v, R) for v in ("float32 tables", "float32 tables/graph") for R in (1, 8, 64, 128, 256)}
    assert plan[-4:] == [ef(v, R, "lysozyme") for v in ("float32 tables/graph", "float32 tables") for R in (1, 64)]


def test_baseline_plan_repeats_rows_of_the_current_plans():
    args = argparse.Namespace(**FULL_RUN)
    base = dc.baseline_plan(args)
    assert {r["tree"] for r in base} == {"baseline"}
    assert _short(base)[:4] == [("energy_forces", "baseline", "bpti", v, None, R)
                                for v in ("float32 tables/graph", "tf32") for R in (1, 64)]
    current = {dc.row_key(dict(r, tree="baseline")) + (r["replicas"],)
               for r in dc.timing_plan(args) + dc.openmm_plan(args, True)}
    assert all(dc.row_key(r) + (r["replicas"],) in current for r in base)       # each has its current row


def test_openmm_plan_order_and_fallback():
    args = argparse.Namespace(**FULL_RUN)
    plan = _short(dc.openmm_plan(args, torch_ok=True))
    om = lambda k, v, f, R, s="bpti": (k, "current", s, v, f, R)  # noqa: E731
    T, G, P = dc.TORCH, dc.GRAPH, dc.PYTHON
    assert plan[:10] == [om("openmm", "float32 tables", T, 1), om("openmm", "float32 tables", T, 64),
                         om("openmm", "float32 tables", G, 1), om("openmm", "float32 tables", G, 64),
                         om("overhead", "none", T, 1), om("overhead", "none", T, 64),
                         om("overhead", "none", G, 1), om("overhead", "none", G, 64),
                         om("openmm", "exact", T, 64), om("openmm", "exact", T, 8)]
    assert om("openmm", "float32 tables", P, 1) in plan and om("overhead", "none", P, 1) in plan
    assert {R for k, _, s, v, f, R in plan if k == "openmm" and v == "float32 tables" and s == "bpti"} == {
        1, 8, 64, 128, 256}
    assert plan[-1] == om("tempering", "float32 tables", T, 64)
    fallback = dc.openmm_plan(args, torch_ok=False)
    assert fallback[0]["force"] == P and not any(r.get("force") == T for r in fallback)


def test_config_of_plan_rows():
    args = argparse.Namespace(**FULL_RUN)
    ef = dc.config(args, dc.row("energy_forces", "float32 tables/graph", 64))
    assert (ef["kind"], ef["backend"], ef["compress"], ef["cuda_graph"], ef["replicas"], ef["repeats"]) == (
        "energy_forces", "triton", "float32", True, 64, 20)
    assert ef["pdb"].endswith("4PTI_bpti.pdb") and json.dumps(ef)
    omm = dc.config(args, dc.row("openmm", "tf32", 1, dc.GRAPH), "CUDA")
    assert (omm["steps"], omm["platform"], omm["torch_cuda_graph"], omm["network_force"]) == (400, "CUDA", True,
                                                                                              "torch")
    assert dc.openmm_steps(args, 64) == 50 and dc.openmm_steps(args, 4) == 100
    null = dc.config(args, dc.row("overhead", "none", 8, dc.PYTHON), "CPU")
    assert null["call"].endswith("overhead:null_loop") and null["network_force"] == "python"
    lys = dc.config(args, dc.row("energy_forces", "exact", 1, structure="lysozyme"))
    assert lys["backend"] == "reference" and lys["pdb"].endswith("1HEL_lysozyme.pdb")
    assert dc.config(args, dc.row("tempering", "float32 tables", 64), "CUDA")["exchange_interval"] == 10
    assert dc.row_label(dc.row("openmm", "float32 tables", 64, dc.GRAPH, tree="baseline"), "triton") == \
        "baseline triton+tab-f32 [TorchForce+CUDA graph] bpti R=64"


def test_one_line_errors_and_stage_records(tmp_path):
    text = "RuntimeError: The following operation failed\n  File x\n" + "y" * 600 + "\nValueError: the real cause"
    line = dc.one_line(text)
    assert "\n" not in line and len(line) <= 400 and line.endswith("the real cause") and line.startswith("Runtime")

    class Boom(Exception):
        details = {"worker_traceback": "tb"}

    st = Stage(str(tmp_path / "s.json"), time.time() + 60)

    def fail():
        raise Boom("a\nb")
    assert st.run("x", fail, replicas=2) is None
    (err,) = st.data["errors"]
    assert err["error"] == "Boom: a b" and err["worker_traceback"] == "tb" and err["replicas"] == 2
    rec = st.run("y", lambda: {"status": "ok", "value": 1})     # a result's own status is not a second key
    assert rec["status"] == "ok" and rec["value"] == 1
    late = Stage(str(tmp_path / "t.json"), time.time() - 1)
    assert late.run("z", lambda: {}, need_s=1.0) is None and "stage deadline" in late.data["skips"][0]["reason"]
    assert json.loads((tmp_path / "s.json").read_text())["errors"][0]["item"] == "x"       # saved after each item


def _stage_with_rows(tmp_path, rows):
    st = Stage(str(tmp_path / "stage.json"), time.time() + 60)
    for r in rows:
        st.add("results", dict(r, status="ok", dtype="float32"))
    return st


def test_precision_check_pass_fail_and_missing(tmp_path):
    """triton (CUDA): tf32 = the triton row with matmul auto; pass if measured <= 2 x predicted + 1e-6, else an error
    recorded beside the check's row; no prediction file: a skip with the reason."""
    rows = [dict(backend="triton", quantize="none", compress="none", matmul=mm, energy_rel_err_vs_oracle=e,
                 forces_rel_err_vs_oracle=f) for mm, e, f in (("auto", 5e-4, 1e-3), ("ieee", 6e-6, 2e-5))]
    pred = tmp_path / "tf32-accuracy.json"
    pred.write_text(json.dumps(PREDICTION))
    args = argparse.Namespace(prediction=str(pred), kernel_backend="triton")
    st = _stage_with_rows(tmp_path, rows)
    precision_checks(args, st)
    checks = {r["check"]: r for r in st.data["results"] if "check" in r}
    assert set(checks) == {"tf32", "ieee"}
    assert checks["tf32"]["passed"] is True and checks["tf32"]["energy_limit"] == pytest.approx(6e-4 + 1e-6)
    assert checks["ieee"]["passed"] is True and st.data["errors"] == []
    # a measured tf32 error over the limit: FAIL, and an error (the script's exit status is then 1)
    st = _stage_with_rows(tmp_path, [dict(rows[0], forces_rel_err_vs_oracle=3e-3), rows[1]])
    precision_checks(args, st)
    checks = {r["check"]: r for r in st.data["results"] if "check" in r}
    assert checks["tf32"]["passed"] is False and checks["ieee"]["passed"] is True
    (err,) = st.data["errors"]
    assert err["check"] == "tf32" and err["error"].startswith("FAIL")
    # no prediction file: a skip, no error
    st = _stage_with_rows(tmp_path, rows)
    precision_checks(argparse.Namespace(prediction=str(tmp_path / "absent.json"), kernel_backend="triton"), st)
    assert not st.data["errors"] and [s["check"] for s in st.data["skips"]] == ["tf32"]
    assert "does not exist" in st.data["skips"][0]["reason"]
