"""The sampling benchmark's table and ratios (flashschnet.openmm.benchmark.sampling, tools/sampling_benchmark.py):
ratios against MARTINI 3 on the same threads, ESS/hour bounds said as such, unmeasured values as n/a."""
from __future__ import annotations

import pytest

from flashschnet.openmm.benchmark.sampling import ess_per_hour, ratios, table


def _row(name, kind, threads, replicas, ns_per_day, rg=None):
    obs = {"rg": rg} if rg else {}
    return {"name": name, "kind": kind, "threads": threads, "replicas": replicas, "step_fs": 20 if kind == "martini"
            else 4, "ns_per_day_per_replica": ns_per_day, "ns_per_day_aggregate": ns_per_day * replicas,
            "sampling": {"observables": obs}}


def test_ratios_are_against_martini_on_the_same_threads_and_bounds_read_as_bounds():
    rows = [_row("MARTINI 3 (elastic network)", "martini", 1, 1, 400.0),
            _row("MARTINI 3 + Go", "martini", 1, 1, 100.0),
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
