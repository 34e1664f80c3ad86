"""flashschnet.openmm.benchmark.device_checks (what the stages of tools/device_checks.py share): the precision
check of the measured float32 errors against a prediction (pass, fail, missing) and the OpenMM rows' plan (the
headline rows first, then the whole grid once; the PythonForce fallback without openmm-torch)."""
from __future__ import annotations

import argparse
import json
import time

import pytest

from flashschnet.openmm.benchmark.device_checks import OPENMM_VARIANTS, Stage, openmm_plan, precision_checks
from tests.helpers.benchmark_reports import PREDICTION

#: the options of a device run (tools/device_checks.py --device cuda) that the OpenMM plan reads
FULL_RUN = dict(backends=["reference", "torch", "triton"], kernel_backend="triton", openmm_replicas=[1, 8, 64, 128],
                reference_replicas=[8, 64])


def test_openmm_plan_order_and_grid():
    """The device plan: the headline rows first (tf32 TorchForce at R=1 and 64, the reference's at 64 and 8, the
    CUDA-graph and PythonForce rows at 64, MARTINI, parallel tempering), then every variant x R x force once."""
    args = argparse.Namespace(**FULL_RUN)
    plan = openmm_plan(args, torch_ok=True)
    head = [(r.get("variant"), r.get("backend"), r.get("force"), r.get("replicas"), r["kind"]) for r in plan[:8]]
    assert head == [("tf32", "triton", "TorchForce", 1, "openmm"), ("tf32", "triton", "TorchForce", 64, "openmm"),
                    ("exact", "reference", "TorchForce", 64, "openmm"),
                    ("exact", "reference", "TorchForce", 8, "openmm"),
                    ("tf32", "triton", "TorchForce+CUDA graph", 64, "openmm"),
                    ("tf32", "triton", "PythonForce", 64, "openmm"), (None, None, None, None, "martini"),
                    ("tf32", "triton", "TorchForce", 64, "tempering")]
    grid = {(r["variant"], r["force"], r["replicas"]) for r in plan
            if r["kind"] == "openmm" and r["backend"] == "triton"}
    assert grid == ({(v, f, R) for v in OPENMM_VARIANTS for f in ("TorchForce", "TorchForce+CUDA graph")
                     for R in (1, 8, 64, 128)} | {("tf32", "PythonForce", R) for R in (1, 64)})
    assert len(plan) == len({json.dumps(r, sort_keys=True) for r in plan})              # no row twice
    # without openmm-torch: the same rows as PythonForce (the fallback), the CUDA-graph rows kept (to be skipped)
    fallback = openmm_plan(args, torch_ok=False)
    assert fallback[0]["force"] == "PythonForce" and not any(r.get("force") == "TorchForce" for r in fallback)


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
