"""The checks of distilled multiple time stepping (flashschnet.openmm.benchmark.dmts,
tools/benchmarks/dmts_validate.py): Jensen-Shannon divergence exact answers, observables and the overlap report of a
real run (the shared tiny run: a run against itself overlaps exactly), the kinetic-temperature check against its log,
the figure, and docs/sampling.md's DMTS tables as the rendering of their JSON."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from tests.conftest import ROOT
from flashschnet.openmm.benchmark import dmts


def test_jsd_is_zero_for_the_same_samples_one_for_disjoint_ones_and_symmetric():
    edges = np.linspace(0.0, 4.0, 5)
    assert dmts.jsd(np.array([0.5, 1.5]), np.array([0.5, 1.5]), edges) == 0.0
    assert dmts.jsd(np.array([0.5, 0.6]), np.array([2.5, 3.5]), edges) == pytest.approx(1.0)
    a, b = np.array([0.5, 0.5, 1.5]), np.array([0.5, 1.5, 1.5])
    # p = (2/3, 1/3), q = (1/3, 2/3), m = (1/2, 1/2): JSD = 2/3 log2(4/3) + 1/3 log2(2/3)
    want = 2 / 3 * np.log2(4 / 3) + 1 / 3 * np.log2(2 / 3)
    assert dmts.jsd(a, b, edges) == pytest.approx(want) == pytest.approx(dmts.jsd(b, a, edges))


def test_a_run_compared_with_itself_overlaps_exactly_and_its_temperature_check_reads_its_log(tiny_run, tmp_path):
    obs = dmts.observables(str(tiny_run))
    assert set(obs) == set(dmts.names())
    r, t = obs["rg"].shape
    assert r == 1 and t >= 1 and obs["bonds"].shape[:2] == (1, t) and obs["angles"].shape[:2] == (1, t)
    assert np.all(obs["rg"] > 0.3) and np.all((obs["q"] >= 0) & (obs["q"] <= 1))
    assert np.all((obs["bonds"] > 0.1) & (obs["bonds"] < 0.6))          # CG bonds of the 5-bead map, nm
    report = dmts.compare_runs(str(tiny_run), str(tiny_run), str(tiny_run))
    assert all(v["jsd"] == 0.0 for v in report["overlap"].values())
    assert all(v["jsd"] == 0.0 for v in report["noise"].values())
    with open(tiny_run / "log.csv", newline="") as f:
        temps = [float(row["temperature_K"]) for row in csv.DictReader(f)]
    mean = float(np.mean(temps[len(temps) // 2:]))
    assert report["stability"]["per_replica_mean_K"] == pytest.approx([mean])
    assert dmts.stability(str(tiny_run), mean)["stable"] is True
    assert dmts.stability(str(tiny_run), mean * 1.05)["stable"] is False
    assert dmts.stability(str(tmp_path), 300.0) == {"stable": False, "reason": "no complete log"}
    assert "| rg | 0.0000 ± 0.0000 | 0.0000 ± 0.0000 |" in dmts.summary_lines(report)
    png = dmts.overlap_figure({"a": str(tiny_run), "b": str(tiny_run)}, str(tmp_path / "overlap.png"))
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_docs_dmts_table_is_the_rendering_of_its_json():
    """docs/sampling.md's DMTS tables are :func:`flashschnet.openmm.benchmark.dmts.table` of docs/dmts-trpcage.json
    and docs/dmts-trpcage-1ns.json (not typed by hand)."""
    import json

    from flashschnet.openmm.benchmark.dmts import table as dmts_table

    doc = (ROOT / "docs" / "sampling.md").read_text()
    for name in ("dmts-trpcage.json", "dmts-trpcage-1ns.json"):    # the 1 ns one without reference B
        report = json.loads((ROOT / "docs" / name).read_text())
        rendered = dmts_table(report)
        assert rendered.count("\n") == 2 + len(report["candidates"]), name
        assert rendered in doc, name
