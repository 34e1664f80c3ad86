"""flashschnet.openmm.benchmark.device_tables (which rows of a device.json answer which question): a row's tree,
structure and kind (a row of the first GPU run has none of them), the default network's fastest row, the
side-by-side pairs (a baseline row without its current row says so), OpenMM's share from the do-nothing rows,
lysozyme per bead, and FlashSchNet over MARTINI."""
from __future__ import annotations

import pytest

from flashschnet.openmm.benchmark import device_tables as T


def _ef(R, ms, **kw):
    return dict(dict(backend="triton", compress="float32", quantize="none", matmul="auto", replicas=R,
                     status="ok", median_ms=ms, peak_extra_mb=1.0, ns_per_day_per_replica=345.6 / ms,
                     ns_per_day_aggregate=345.6 / ms * R), **kw)


def _omm(R, ms, force="TorchForce", **kw):
    return dict(dict(kind="openmm", backend="triton", compress="float32", quantize="none", matmul="auto",
                     replicas=R, platform="CUDA", openmm_force=force, status="ok", ms_per_step=ms,
                     ns_per_day_per_replica=345.6 / ms, ns_per_day_aggregate=345.6 / ms * R), **kw)


def test_rows_defaults_and_the_default_network():
    legacy = _ef(1, 2.0)                                    # the first GPU run: no kind, tree or structure
    report = {"timings": [legacy, _ef(1, 1.0, tree="baseline"), _ef(1, 3.0, structure="lysozyme")],
              "openmm": [_omm(1, 0.5), _omm(1, 0.4, "TorchForce+CUDA graph"), _omm(1, 0.1, backend="reference",
                                                                                      compress="none")]}
    assert T.rows(report) == [legacy] and T.tree(legacy) == "current" and T.structure(legacy) == "bpti"
    assert [r["median_ms"] for r in T.rows(report, tree_="baseline")] == [1.0]
    assert T.best(report, 1)["openmm_force"] == "TorchForce+CUDA graph"      # the reference is not the default
    assert T.best(report, 1, kind="energy_forces")["median_ms"] == 2.0 and T.best(report, 64) is None
    assert T.name(_omm(1, 1.0, kind="tempering")) == "triton+tab-f32 [TorchForce] +PT"
    assert T.name(_omm(1, 1.0, kind="overhead")) == "do-nothing force [TorchForce]"
    assert T.ns(12345.6) == "12,346" and T.ns(12.34) == "12.34" and T.ns(None) == "-"


def test_side_by_side_share_and_lysozyme():
    report = {"timings": [_ef(64, 1.0, kind="energy_forces", n_beads=100),
                          _ef(64, 10.0, kind="energy_forces", tree="baseline"),
                          _ef(1, 5.0, kind="energy_forces", tree="baseline", cuda_graph=True),
                          _ef(64, 3.0, kind="energy_forces", structure="lysozyme", n_beads=200)],
              "openmm": [_omm(8, 2.0), _omm(8, 0.5, kind="overhead", backend="none", compress="none"),
                         dict(_omm(64, 1.0, kind="overhead", backend="none", compress="none"), status="error",
                              error="Boom")]}
    assert T.side_by_side(report) == [["energy_forces", "triton+tab-f32", 64, "1.000", "10.000", "**10.00x**"],
                                      ["energy_forces", "triton+tab-f32/graph", 1, "not run", "5.000", "-"]]
    assert T.share_rows(report) == [["TorchForce", 8, "0.500", "2.000", "1.500", "25%"],
                                    ["TorchForce", 64, "error: Boom", "not run", "-", "-"]]
    assert T.lysozyme_rows(report) == [["energy_forces", "triton+tab-f32", 64, "1.000", "3.000", "3.00x", "1.50x"]]
    assert T.beads(report, "lysozyme") == 200 and T.table(["a"], [[1]]) == ["| a |", "|---|", "| 1 |"]


def test_martini_ratios():
    report = {"openmm": [_omm(1, 0.25), _omm(64, 1.0)],
              "martini": [dict(kind="martini", processes=1, status="ok", ns_per_day_per_replica=1000.0,
                               ns_per_day_aggregate=1000.0),
                          dict(kind="martini", processes=4, status="ok", ns_per_day_per_replica=500.0,
                               ns_per_day_aggregate=2000.0)]}
    rows = T.martini_ratios(report, 1)
    assert [r[0] for r in rows] == ["per replica", "aggregate vs 1 process", "aggregate vs 4 processes"]
    assert rows[0][-1] == f"**{1382.4 / 1000.0:.2f}x**" and rows[2][-1] == f"**{345.6 * 64 / 2000.0:.2f}x**"
    assert T.martini_ratios({"martini": []}, 1) == []
    assert T.ms(_omm(1, 0.25)) == pytest.approx(0.25) and T.ms(_ef(1, 2.0)) == 2.0
