"""flashschnet.openmm.benchmark.sampling (the sampling benchmark's table and ratios;
tools/benchmarks/sampling_benchmark.py measures): ratios against MARTINI 3 on the same threads, ESS/hour bounds said as
such, unmeasured values as n/a, and docs/sampling.md's tables and the README's ratios as the rendering of
docs/sampling.json."""
from __future__ import annotations

import pytest

from tests.conftest import ROOT
from flashschnet.openmm.benchmark.sampling import ess_per_hour, ratios, table


def _row(name, kind, threads, replicas, ns_per_day, rg=None, options=None):
    obs = {"rg": rg} if rg else {}
    return {"name": name, "kind": kind, "threads": threads, "replicas": replicas, "step_fs": 20 if kind == "martini"
            else 4, "ns_per_day_per_replica": ns_per_day, "ns_per_day_aggregate": ns_per_day * replicas,
            "options": dict(options or {}), "sampling": {"observables": obs}}


def test_ratios_are_against_martini_on_the_same_threads_and_bounds_read_as_bounds():
    rows = [_row("MARTINI 3 (elastic network)", "martini", 1, 1, 400.0),
            _row("MARTINI 3 + Go", "martini", 1, 1, 100.0, options={"go": True, "elastic": False}),
            _row("MARTINI 3 (elastic network)", "martini", 2, 1, 800.0),
            _row("default", "flashschnet", 1, 4, 50.0,
                 rg={"ess_per_hour_aggregate": {"value": 120.0, "error": 10.0}, "bound": "lower"}),
            _row("default", "flashschnet", 2, 1, 200.0,
                 rg={"ess_per_hour_aggregate": {"value": 30.0, "error": None}}),
            _row("alone", "flashschnet", 3, 1, 10.0)]
    ratios(rows)
    assert rows[3]["vs_martini_per_replica"] == pytest.approx(0.125)       # against 400, never the Go row's 100
    assert rows[3]["vs_martini_aggregate"] == pytest.approx(0.5)
    assert rows[4]["vs_martini_aggregate"] == pytest.approx(0.25)
    assert "vs_martini_aggregate" not in rows[5] and "vs_martini_aggregate" not in rows[0]
    assert ess_per_hour(rows[3], "rg") == {"value": 120.0, "error": 10.0, "bound": "upper"}
    assert ess_per_hour(rows[3], "q") is None
    lines = table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert lines[5] == "| default | 1 | 4 | 4 | 50 | 200 | 0.50× | <= 120 ± 10 | n/a |"
    assert lines[6] == "| default | 2 | 1 | 4 | 200 | 200 | 0.25× | 30 | n/a |"
    assert lines[2].endswith("| - | n/a | n/a |")


def test_the_docs_tables_are_the_benchmarks_own_rendering_of_its_json():
    """docs/sampling.md carries each protein's table exactly as :func:`table` renders docs/sampling.json, and the
    README's ratios are that JSON's (trp-cage, one thread: the default, 4 replicas, DMTS 5/2.5)."""
    import json

    report = json.loads((ROOT / "docs" / "sampling.json").read_text())
    doc = (ROOT / "docs" / "sampling.md").read_text()
    for protein in ("trpcage", "bpti"):
        assert table(report["proteins"][protein]["rows"]) in doc, protein
    rows = {(r["name"], r["threads"], r["replicas"]): r for r in report["proteins"]["trpcage"]["rows"]}
    readme = next(line for line in (ROOT / "README.md").read_text().splitlines() if "next to MARTINI 3" in line)
    for key in (("FlashSchNet default", 1, 1), ("FlashSchNet default", 1, 4), ("FlashSchNet DMTS 5/2.5 fs", 1, 1)):
        assert f"{rows[key]['vs_martini_aggregate']:.2f}×" in readme, key
