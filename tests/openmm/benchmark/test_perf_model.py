"""flashschnet.openmm.benchmark.perf_model (tools/device/perf_model.py prints it): the new kernels' predictions are
positive, finite and grow with the replicas; docs/perf-model.json has the documented fields; the doc section
between the perf-model markers of docs/benchmarks.md is exactly the renderer's output of that JSON."""
from __future__ import annotations

import json
import math

from flashschnet.openmm.benchmark import perf_model as pm
from flashschnet.openmm.benchmark import perf_model_calibration as pc
from tests.conftest import ROOT


def test_active_tile_pairs_of_bpti():
    assert pm.active_tile_pairs() == (284, 18, 168, 18)


def test_new_kernel_predictions_are_positive_finite_and_monotone_in_r():
    geo, meas = pc.bpti(), pc.measurements()
    fitted = pc.fit(geo, meas)
    for filt in pm.FILTERS:
        prev = 0.0
        for R in (1, 8, 64, 256):
            s, s0 = pm.new_step(geo, fitted, filt, R), pm.new_step(geo, fitted, filt, R, lam=0.0)
            assert math.isfinite(s["ms"]) and s["ms"] >= prev > -1 and s["ms"] > 0, (filt, R)
            assert 0 < s0["ms"] <= s["ms"]
            assert abs(sum(s["kernels"].values()) - s["ms"]) < 1e-9
            prev = s["ms"]


def test_the_json_has_the_documented_fields():
    m = json.loads((ROOT / "docs" / "perf-model.json").read_text())
    assert set(pm.JSON_FIELDS) <= set(m)
    assert m["calibration_within_15pct"] is True
    assert sum(r["in_sample"] for r in m["calibration"]) == 9
    for p in m["predictions"]:
        assert {"structure", "filter", "R", "ms", "ns_day", "ms_latency_free", "ns_day_latency_free",
                "kernels_ms"} <= set(p)
        assert math.isclose(p["ns_day"], p["R"] * 4e-6 * 86400 / (p["ms"] / 1e3))
    assert {"r1_ms", "r1_met", "r64_ns_day", "r64_met"} <= set(m["goals"])
    assert {"lambda", "lambda_per_variant", "t_launch", "eta_gemm", "c_iter"} <= set(m["fitted"])


def test_the_doc_section_is_the_json_rendered():
    m = json.loads((ROOT / "docs" / "perf-model.json").read_text())
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = pm.render(m)
    assert section.startswith("## Performance model\n")
    assert pm.update_doc(text, section) == text
