"""flashschnet.openmm.benchmark.device_martini: the file barrier that releases several processes together, two
MARTINI 3 BPTI processes run at once on the CPU platform (each its ns/day, their sum, overlapping loops), and the
stage's skips without the force-field files."""
from __future__ import annotations

import argparse
import threading
import time

import pytest

from flashschnet.openmm.benchmark import device_martini as dm
from flashschnet.openmm.benchmark.device_checks import Stage
from tests.conftest import ROOT, SHARED


def test_file_barrier_waits_for_go(tmp_path):
    wait = dm.file_barrier(tmp_path, 3, timeout=5.0)
    done = []
    t = threading.Thread(target=lambda: (wait(), done.append(time.time())))
    t.start()
    deadline = time.time() + 5
    while not (tmp_path / "ready-3").exists() and time.time() < deadline:
        time.sleep(0.01)
    assert (tmp_path / "ready-3").exists() and not done
    released = time.time()
    (tmp_path / "go").touch()
    t.join(5)
    assert done and done[0] >= released
    (tmp_path / "never").mkdir()
    with pytest.raises(TimeoutError):                     # no go: the process gives up
        dm.file_barrier(tmp_path / "never", 0, timeout=0.05)()


def _args(tmp_path, ff):
    return argparse.Namespace(root=str(ROOT), martini_ff=str(ff), device="cpu", martini_processes=[1, 2],
                              martini_seconds=0.05, martini_minimize=0, martini_chunk=2, threads=1)


def test_two_processes_at_once_and_the_stage(tmp_path):
    ff = SHARED / "martini" / "m3"
    if not (ff / "martini_v3.0.0.itp").exists():
        ff = ROOT / ".martini_ff"
    if not (ff / "martini_v3.0.0.itp").exists():
        pytest.skip("no MARTINI 3 force-field files (../shared/martini/m3 or .martini_ff)")
    spec = dict(system_dir=str(ROOT / dm.SYSTEM), ff_dir=str(ff), platform="CPU", min_seconds=0.05, minimize=5,
                chunk=2, threads=1)
    out = dm.run_processes(2, spec, time.time() + 120)
    assert out["processes"] == out["processes_ok"] == 2 and out["particles"] > 1000
    each = [p["ns_per_day_per_replica"] for p in out["per_process"]]
    assert out["ns_per_day_aggregate"] == pytest.approx(sum(each)) and min(each) > 0
    assert out["overlap_s"] > 0 and all(p["steps"] >= 2 and p["steps"] % 2 == 0 for p in out["per_process"])
    # the stage without force-field files: every item a skip with the reason
    st = Stage(str(tmp_path / "s.json"), time.time() + 60)
    dm.stage_martini(_args(tmp_path, tmp_path / "none"), st)
    assert [s["processes"] for s in st.data["skips"]] == [1, 2] and not st.data["results"]
    assert all("no MARTINI 3 .itp files" in s["reason"] for s in st.data["skips"])
    assert dm.martini_ff(_args(tmp_path, ff)) == ff.resolve()
