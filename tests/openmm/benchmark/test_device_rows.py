"""flashschnet.openmm.benchmark.device_rows: a row worker of the checkout's tree measures a real (tiny) row and says
where flashschnet came from; a worker of another tree (PYTHONPATH switched: a stand-in baseline tree) runs that
tree's code; a worker that dies is one error and the next row gets a fresh one; the plan loop's skips (the
deadline, a failure at a smaller R, a predicted overrun of time or memory)."""
from __future__ import annotations

import os
import time

import pytest

from flashschnet.openmm.benchmark import device_rows as rows
from flashschnet.openmm.benchmark.device_checks import Stage
from tests.conftest import EXAMPLES


def test_tree_pythonpath_swaps_the_installed_checkout(tmp_path):
    installed, site, tree = tmp_path / "fs", tmp_path / "site", tmp_path / "tree"
    for d in (installed / "flashschnet", site / "openmm", tree / "flashschnet"):
        d.mkdir(parents=True)
    got = rows.tree_pythonpath(str(tree), os.pathsep.join([str(installed), str(site), ""]))
    assert got.split(os.pathsep) == [str(tree.resolve()), str(site)]
    assert rows.tree_pythonpath(str(tree), None) == str(tree.resolve())


def test_worker_of_the_checkout_runs_rows_and_survives_a_crash(tmp_path):
    cfg = {"kind": "energy_forces", "pdb": str(EXAMPLES / "1L2Y_trpcage.pdb"), "model": None, "backend": "reference",
           "device": "cpu", "dtype": "float32", "threads": 1, "replicas": 1, "warmup": 0, "repeats": 1,
           "compress": "none", "quantize": "none", "matmul": "auto", "cuda_graph": False}
    worker = rows.RowWorker("current", root=tmp_path / "baseline", echo=False)
    try:
        out = worker.run(cfg, time.time() + 120)
        assert out["tree"] == "current" and out["n_beads"] > 20 and out["median_ms"] > 0
        assert "status" not in out and out["worker_start_s"] > 0 and "baseline" not in out["flashschnet_path"]
        with pytest.raises(rows.RowError, match="KeyError"):              # a row's error: the worker stays
            worker.run(dict(cfg, kind="nonsense"), time.time() + 60)
        assert worker.alive() and worker.starts == 1
        with pytest.raises(rows.RowError, match="died while running the row"):
            worker.run({"call": "sys:exit"}, time.time() + 60)     # SystemExit ends it
        again = worker.run(cfg, time.time() + 120)                         # a fresh worker for the next row
        assert worker.starts == 2 and again["worker_start_s"] > 0 and not worker.broken
    finally:
        worker.close()


def _fake_tree(root, body):
    pkg = root / "flashschnet" / "openmm" / "benchmark"
    pkg.mkdir(parents=True)
    for d in (root / "flashschnet", root / "flashschnet" / "openmm", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "measure.py").write_text(body)


def test_worker_of_another_tree_imports_that_tree(tmp_path):
    _fake_tree(tmp_path / "old", "import os\nKINDS = {'energy_forces': lambda cfg: {'where': __file__, "
                                 "'cache': os.environ['FLASHSCHNET_CACHE_DIR']}}\n")
    worker = rows.RowWorker("baseline", root=tmp_path / "old", echo=False)
    try:
        out = worker.run({"kind": "energy_forces"}, time.time() + 60)
        assert out["tree"] == "baseline" and out["where"].startswith(str((tmp_path / "old").resolve()))
        assert out["flashschnet_path"] == str((tmp_path / "old" / "flashschnet").resolve())
        assert os.path.isdir(out["cache"])                                  # its own table cache
    finally:
        worker.close()
    with pytest.raises(ValueError):
        rows.RowWorker("baseline")
    broken = rows.RowWorker("baseline", root=tmp_path / "nothing", echo=False)      # no flashschnet there
    with pytest.raises(rows.RowError, match="imported flashschnet from"):
        broken.run({"kind": "energy_forces"}, time.time() + 60)
    assert broken.broken


class FakeWorker:
    broken = ""

    def __init__(self, fail_at=()):
        self.fail_at, self.ran = set(fail_at), []

    def run(self, cfg, deadline):
        self.ran.append(cfg["replicas"])
        if cfg["replicas"] in self.fail_at:
            raise rows.RowError("boom")
        return {"median_ms": 1.0 * cfg["replicas"], "times_ms": [1.0], "peak_extra_mb": 10.0 * cfg["replicas"]}


def _make(r):
    tags = dict(kind="energy_forces", tree="current", structure="bpti", variant="v", backend="triton",
                replicas=r["replicas"])
    return f"row R={r['replicas']}", tags, dict(r)


def test_run_plan_skips_what_cannot_run(tmp_path):
    plan = [{"replicas": R, "kind": "energy_forces", "tree": "current", "structure": "bpti", "variant": "v",
             "backend": None} for R in (1, 8, 64)]
    st = Stage(str(tmp_path / "s.json"), time.time() + 60)
    fake = FakeWorker(fail_at={8})
    assert rows.run_plan(st, plan, fake, _make) == ["ok", "error", "skipped"]
    assert fake.ran == [1, 8] and "failed at R=8" in st.data["skips"][0]["reason"]
    assert st.data["errors"][0]["error"] == "boom"                  # the row's own one line
    # memory: 10 MB per replica at R=1 -> 640 MB at 64, over a 100 MB limit
    st = Stage(str(tmp_path / "m.json"), time.time() + 60)
    assert rows.run_plan(st, plan, FakeWorker(), _make, max_memory_mb=100.0) == ["ok", "ok", "skipped"]
    assert "GB > " in st.data["skips"][0]["reason"]
    # time: a row measured at R=1 that took 10 s, predicted 10 s x 64 / 1 later
    st = Stage(str(tmp_path / "t.json"), time.time() + 30)
    st.add("results", dict(_make(plan[0])[1], status="ok", median_ms=100.0, times_ms=[100.0] * 10, wall_s=11.3))
    why = rows.why_not(st, dict(_make(plan[2])[1]))
    assert why.startswith("predicted") and "from R=1" in why
    assert rows.predict_s(st.data["results"], dict(_make(plan[2])[1]))[1] == 1
    # the deadline, and an extra reason
    late = Stage(str(tmp_path / "d.json"), time.time())
    assert rows.run_plan(late, plan[:1], FakeWorker(), _make) == ["skipped"]
    assert rows.run_plan(st, plan[:1], FakeWorker(), _make, extra=lambda r: "no GPU") == ["skipped"]
    assert rows.loop_seconds({"ms_per_step": 2.0, "steps": 45, "warmup_steps": 0}) == pytest.approx(0.1)
