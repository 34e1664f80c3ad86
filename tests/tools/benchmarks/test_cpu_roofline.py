"""tools/benchmarks/cpu_roofline.py (docs/cpu-roofline.json), run as a program on trp-cage, one replica, one thread: the
core's peaks and each table kernel's rates (and one node layer's), with the kernel's work counted from its loops."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_quick_roofline_of_trpcage(tmp_path):
    out = tmp_path / "roofline.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmarks" / "cpu_roofline.py"), "--quick",
                           "--systems", "trpcage", "--replicas", "1", "--threads", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    peak = report["peaks"]
    assert peak["fma_gflops"] > 1 and peak["load_gbs_L1"] >= peak["load_gbs_memory"] > 0
    (system,) = report["systems"]
    assert (system["system"], system["replicas"], system["threads"], system["beads"]) == ("trpcage", 1, 1, 97)
    assert system["features"] == 64 and system["blocks"] == 2 and system["pairs"] > 1000
    assert 0 < system["pair_loops_ms"] < system["call_ms"]
    rows = {k["kernel"]: k for k in system["kernels"]}
    assert set(rows) == {"order_pairs", "table_intervals", "table_fwd", "table_bwd", "dense_tanh"}
    assert rows["dense_tanh"]["bound"] == "FMA"         # a node layer: 2 M F^2 FLOPs, not part of the pair loops
    assert system["pair_loops_ms"] == sum(k["ms"] * k["per_step"] for k in system["kernels"]
                                          if k["kernel"] != "dense_tanh")
    for name in ("table_fwd", "table_bwd", "dense_tanh"):
        k = rows[name]
        assert k["gflops"] > 0 and k["bound"] in ("FMA", "L1 loads") and 0 < k["of_bound"] < 3
        assert abs(k["of_bound"] - max(k["of_fma_peak"], k["of_l1_loads"])) < 1e-9
    assert "| trpcage | 1 | 1 |" in proc.stdout and "table_bwd" in proc.stdout

