"""flashschnet.openmm.benchmark.device_main (the device checks' options, stages and report; the whole run is
tests/tools/device/test_device_checks.py's smoke run): the device and smoke defaults, the stages' shares of the budget,
a stage's child process (its saved items kept when it crashes or is killed past its deadline), the report's row
lists collected from its stages, and the printed summary."""
from __future__ import annotations

import json
import time

import pytest

from flashschnet.openmm.benchmark import device_main as dm
from tests.conftest import ROOT


def test_options_of_a_device_run_and_of_the_smoke_run():
    full = dm.parse_args(["--device", "cuda"], root=ROOT)
    assert full.replicas == full.openmm_replicas == [1, 8, 64, 128, 256] and full.reference_replicas == [8, 64]
    assert full.kernel_backend == "triton" and full.budget == 410.0 and full.martini_processes == [1, 4]
    assert full.baseline == str(ROOT / ".baseline") and full.prediction.endswith("docs/tf32-accuracy.json")
    assert full.stages == list(dm.STAGES) and full.pdb is None
    smoke = dm.parse_args(["--smoke", "--stages", "openmm,compile", "--openmm-replicas", "2"], root=ROOT)
    assert smoke.device == "cpu" and smoke.kernel_backend == "torch" and smoke.openmm_replicas == [2]
    assert smoke.stages == ["compile", "openmm"] and smoke.pdb == str(ROOT / "tests/data/structures/1L2Y_trpcage.pdb")
    assert list(dm.SHARES) == list(dm.STAGES) and sum(dm.SHARES.values()) == pytest.approx(1.0)
    assert set(dm.STAGE_MODULES) == set(dm.STAGES)


def _script(tmp_path, body):
    path = tmp_path / "stage.py"
    path.write_text("import json, sys, time\nargs = sys.argv\nresult = args[args.index('--result') + 1]\n" + body)
    return path


def test_a_stage_child_keeps_its_items(tmp_path, monkeypatch):
    monkeypatch.setattr(dm, "GRACE_S", 0.5)
    save = "json.dump({'results': [{'item': 'a'}], 'skips': [], 'errors': []}, open(result, 'w'))\n"
    ok = dm.run_stage("timings", [], time.time() + 30, tmp_path / "r1.json", _script(tmp_path, save))
    assert ok["status"] == "ok" and ok["results"] == [{"item": "a"}]
    crash = dm.run_stage("timings", [], time.time() + 30, tmp_path / "r2.json", _script(tmp_path, save + "sys.exit(3)"))
    assert crash["status"] == "error" and crash["results"] and "exit status 3" in crash["errors"][0]["error"]
    hang = dm.run_stage("timings", [], time.time() + 0.5, tmp_path / "r3.json",
                        _script(tmp_path, save + "time.sleep(30)"))
    assert hang["status"] == "error" and hang["results"] and "after its deadline" in hang["errors"][0]["error"]


def _ef(tree, R, ms, **kw):
    return dict(dict(kind="energy_forces", tree=tree, structure="bpti", backend="triton", compress="float32",
                     quantize="none", matmul="auto", cuda_graph=False, replicas=R, status="ok", median_ms=ms,
                     peak_extra_mb=1.0, ns_per_day_per_replica=345.6 / ms, ns_per_day_aggregate=345.6 / ms * R,
                     seq=0, item="x"), **kw)


def _report():
    ef = _ef
    stages = {"timings": dict(status="ok", wall_s=1.0, skips=[], errors=[],
                              results=[ef("current", 64, 2.0), ef("current", 64, 40.0, backend="reference",
                                                                  compress="none", peak_extra_mb=1000.0)]),
              "baseline": dict(status="ok", wall_s=1.0, skips=[], errors=[], results=[ef("baseline", 64, 20.0)]),
              "martini": dict(status="ok", wall_s=1.0, skips=[], errors=[],
                              results=[dict(kind="martini", processes=1, status="ok", item="m", seq=0,
                                            platform="CUDA", ms_per_step=0.1, ns_per_day_per_replica=17280.0,
                                            ns_per_day_aggregate=17280.0)])}
    return {"settings": {"device": "cuda", "openmm_replicas": [1, 64], "replicas": [1, 64]}, "machine": {},
            "stages": stages}


def test_collect_and_summary():
    report = _report()
    dm.collect(report)
    assert [(r["tree"], r["stage"]) for r in report["timings"]] == [("current", "timings")] * 2 + [
        ("baseline", "baseline")]
    (ratio,) = report["ratios"]                                        # the checkout's rows only
    assert ratio["replicas"] == 64 and ratio["speedup_vs_reference"] == pytest.approx(20.0)
    assert report["openmm"] == [] and report["martini"][0]["processes"] == 1
    text = dm.summary(report)
    assert "== device checks: stages" in text and "Old and new side by side" in text and "**10.00x**" in text
    assert "MARTINI 3 BPTI" in text and json.dumps(report)
    assert dm.commit(ROOT) is None or len(dm.commit(ROOT)) >= 40
