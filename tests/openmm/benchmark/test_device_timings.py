"""flashschnet.openmm.benchmark.device_timings (the timing stages; their real rows run in
tests/tools/device/test_device_checks.py's smoke run): a plan row's item, tags and configuration, the CUDA-only skips on
a CPU, and each stage's loop with a stand-in row worker -- every row of the plan recorded in order (a result, a skip
with the reason, or an error), the baseline's rows skipped without a baseline tree, the OpenMM platform chosen by
its probe row (a failed TorchForce probe, then a PythonForce one)."""
from __future__ import annotations

import argparse
import time

import pytest

from flashschnet.openmm.benchmark import device_checks as dc
from flashschnet.openmm.benchmark import device_timings as dt
from flashschnet.openmm.benchmark.device_checks import Stage
from flashschnet.openmm.benchmark.device_rows import RowError
from tests.conftest import ROOT


def _args(tmp_path, **kw):
    return argparse.Namespace(**dict(dict(
        device="cpu", backends=["reference", "torch"], kernel_backend="torch", replicas=[1, 2], openmm_replicas=[1, 2],
        reference_replicas=[1, 2], openmm_steps=3, openmm_steps_r1=3, warmup=1, repeats=2, threads=1,
        pdb=str(ROOT / "tests" / "data" / "structures" / "1L2Y_trpcage.pdb"), root=str(ROOT), max_memory_gb=4.0,
        baseline=str(tmp_path / "no-baseline")), **kw))


class Fake:
    """A stand-in RowWorker: answers every row with a plausible measurement, fails the rows ``fail`` picks."""
    made = []

    def __init__(self, tree="current", root=None, fail=lambda cfg: False):
        self.tree, self.fail, self.ran, self.broken = tree, fail, [], ""
        Fake.made.append(self)

    def run(self, cfg, deadline):
        self.ran.append(cfg)
        if self.fail(cfg):
            raise RowError("boom")
        if cfg["kind"] == "energy_forces":
            return {"median_ms": 1.0, "times_ms": [1.0, 1.0], "peak_extra_mb": 1.0, "n_beads": 97, "tree": self.tree}
        return {"ms_per_step": 2.0, "steps": cfg["steps"], "warmup_steps": 1, "platform": cfg["platform"],
                "ns_per_day_per_replica": 1.0, "ns_per_day_aggregate": cfg["replicas"], "tree": self.tree}

    def close(self):
        pass


def test_maker_and_the_cpu_skips(tmp_path):
    args = _args(tmp_path)
    name, tags, cfg = dt.maker(args, "CPU", {dc.GRAPH: "with graphs"})(dc.row("openmm", "float32 tables", 2, dc.GRAPH))
    assert name == "OpenMM CPU current torch+tab-f32 [TorchForce+CUDA graph] bpti R=2 x 3 steps"
    assert (tags["kind"], tags["openmm_force"], tags["network_force"], tags["compress"], tags["steps"]) == (
        "openmm", dc.GRAPH, "with graphs", "float32", 3)
    assert cfg["torch_cuda_graph"] is True and cfg["platform"] == "CPU"
    assert "CUDA platform" in dt.graph_skip(args, dc.row("openmm", "tf32", 1, dc.GRAPH), "CPU")
    assert "needs CUDA" in dt.graph_skip(args, dc.row("energy_forces", "float32 tables/graph", 1))
    assert dt.graph_skip(args, dc.row("energy_forces", "float32 tables", 1)) is None
    assert dt.graph_skip(_args(tmp_path, device="cuda"), dc.row("openmm", "tf32", 1, dc.GRAPH), "CUDA") is None
    assert dt.structure_skip(args, dc.row("energy_forces", "tf32", 1)) is None
    assert "no bpti structure" in dt.structure_skip(_args(tmp_path, pdb=str(tmp_path / "x.pdb")),
                                                    dc.row("energy_forces", "tf32", 1))


def test_timings_and_baseline_stages(tmp_path, monkeypatch):
    monkeypatch.setattr(dt, "RowWorker", Fake)
    args = _args(tmp_path)
    st = Stage(str(tmp_path / "t.json"), time.time() + 60)
    dt.stage_timings(args, st)
    plan = dc.timing_plan(args)
    done = sorted(st.data["results"] + st.data["skips"], key=lambda r: r["seq"])
    assert [(r["variant"], r["structure"], r["replicas"]) for r in done] == [
        (r["variant"], r["structure"], r["replicas"]) for r in plan]
    assert all("needs CUDA" in s["reason"] for s in st.data["skips"]) and len(st.data["skips"]) == 4
    assert all(r["tree"] == "current" for r in st.data["results"])
    # no baseline tree: every row of the baseline's plan a skip saying how to make one
    st = Stage(str(tmp_path / "b.json"), time.time() + 60)
    dt.stage_baseline(args, st)
    assert len(st.data["skips"]) == len(dc.baseline_plan(args)) and not st.data["results"]
    assert all("fetch_device_baseline.sh" in s["reason"] and s["tree"] == "baseline" for s in st.data["skips"])
    # a baseline tree: its worker is a baseline one
    (tmp_path / "tree" / "flashschnet").mkdir(parents=True)
    (tmp_path / "tree" / "flashschnet" / "__init__.py").write_text("")
    st = Stage(str(tmp_path / "c.json"), time.time() + 60)
    dt.stage_baseline(_args(tmp_path, baseline=str(tmp_path / "tree")), st)
    assert Fake.made[-1].tree == "baseline" and st.data["results"]
    assert {r["tree"] for r in st.data["results"]} == {"baseline"} and not st.data["errors"]


def test_openmm_stage_probes_the_platform(tmp_path, monkeypatch):
    pytest.importorskip("openmmtorch")
    args = _args(tmp_path)
    # the TorchForce probe fails, the PythonForce one runs: the platform stays, the rest of the plan runs
    monkeypatch.setattr(dt, "RowWorker", lambda *a, **k: Fake(*a, **k, fail=lambda cfg: cfg.get("kind") == "openmm"
                                                               and cfg["network_force"] == "torch"
                                                               and cfg["replicas"] == 1 and cfg["compress"] ==
                                                               "float32" and not cfg["cuda_graph"]))
    st = Stage(str(tmp_path / "o.json"), time.time() + 60)
    dt.stage_openmm(args, st)
    first, probe = sorted(st.data["errors"] + st.data["results"], key=lambda r: r["seq"])[:2]
    assert first["status"] == "error" and first["openmm_force"] == dc.TORCH
    assert probe["status"] == "ok" and probe["openmm_force"] == dc.PYTHON and probe["platform"] == "CPU"
    kinds = {r["kind"] for r in st.data["results"]}
    assert kinds == {"openmm", "overhead", "tempering"}
    assert all(s["reason"].startswith(("openmm-torch CUDA graphs", "the model's CUDA graph", "failed at R=1"))
               for s in st.data["skips"])
