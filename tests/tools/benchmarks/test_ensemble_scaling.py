"""tools/benchmarks/ensemble_scaling.py (docs/ensembles.json), run as a program: its --quick run (40 steps, a report
every 20) on 2 walkers measures every configuration (one process, 1 and 2 Dask workers, two exchange intervals, a pure
ensemble) and the per-exchange breakdown."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_quick_scaling_report(tmp_path):
    out = tmp_path / "ensembles.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmarks" / "ensemble_scaling.py"), "--quick",
                           "--steps", "40", "--walkers", "2", "--json", str(out)], capture_output=True, text=True,
                          timeout=3600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    names = [r["config"] for r in report["rows"]]
    assert names == [f"{p}-x{e}" for p in ("process-2threads", "process-1thread", "dask-1worker", "dask-2workers")
                     for e in (20, 10)] + ["dask-2workers-ensemble"]
    for r in report["rows"]:
        assert r["steps"] == 40 and r["ns_per_day_aggregate"] > 0 and r["t_segments"] > 0
        assert r["t_exchanges"] == (0 if r["exchange_interval"] is None else 40 // r["exchange_interval"])
        assert len(r["acceptance"]) == (0 if r["exchange_interval"] is None else 1)
        assert r["t_advance"] >= r["t_block_steps"] > 0
    assert set(report["overhead"]) == {"process-2threads", "process-1thread", "dask-1worker", "dask-2workers"}
    assert all(o["energy_eval_ms"] > 0 and o["step_ms"] > 0 for o in report["overhead"].values())
    printed = proc.stdout
    assert "per exchange (wall fit) ms" in printed and "dask-2workers-ensemble" in printed
