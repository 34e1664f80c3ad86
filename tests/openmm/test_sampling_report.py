"""flashschnet.openmm.sampling_report: comparison.md's sampling-efficiency table from the sampling results of two runs
made here (flashschnet.openmm.sampling on AR(1) series): a plain estimate, a lower bound (≥ g, ≤ ESS), ESS/hour not
recorded without a wall time, a constant series and too few frames said in the cell, each run's error method and
warnings. (sampling.png and the table of a real comparison: tests/openmm/test_compare.py.)"""
from __future__ import annotations

import numpy as np

from flashschnet.openmm.sampling import sampling_efficiency
from flashschnet.openmm.sampling_report import markdown
from tests.helpers.ar1 import ar1


def _result():
    martini = sampling_efficiency({"rg": ar1(0.5, (1, 4000), seed=1), "q": np.ones((1, 4000))}, 0.8, 3600.0)
    flashschnet = sampling_efficiency({"rg": ar1(0.95, (4, 60), seed=2), "q": ar1(0.5, (4, 5), seed=3)}, 0.4, None)
    return {"martini": {"sampling": martini}, "flashschnet": {"sampling": flashschnet, "replicas": 4}}


def _cells(lines, label):
    row = next(ln for ln in lines if ln.startswith(f"| {label} |"))
    return [c.strip() for c in row.split("|")[2:4]]


def test_the_table_says_what_each_run_gave():
    result = _result()
    m = result["martini"]["sampling"]["observables"]
    f = result["flashschnet"]["sampling"]["observables"]
    assert (m["rg"]["status"], m["q"]["status"]) == ("ok", "constant")
    assert (f["rg"]["status"], f["q"]["status"]) == ("lower bound", "not enough frames")
    lines = markdown(result)
    assert _cells(lines, "frames analysed per replica") == ["4000, every 0.8 ps", "60 × 4 replicas, every 0.4 ps"]
    assert _cells(lines, "wall-clock time of those frames") == ["3600 s (1 h)", "not recorded"]
    g = m["rg"]
    assert _cells(lines, "statistical inefficiency g of Rg, frames (ps)")[0] == (
        f"{g['g']['value']:.3g} ± {g['g']['error']:.2g} ({g['g_ps']['value']:.3g} ± {g['g_ps']['error']:.2g} ps)")
    assert _cells(lines, "statistical inefficiency g of Rg, frames (ps)")[1].startswith("≥ ")
    assert _cells(lines, "effective samples of Rg per replica")[1].startswith("≤ ")
    per_hour = _cells(lines, "ESS/hour of Rg per replica")
    assert per_hour[0] == f"{g['ess_per_hour']['value']:.3g} ± {g['ess_per_hour']['error']:.2g}"
    assert per_hour[1] == "not recorded"
    assert _cells(lines, "ESS/hour of Q aggregate (4 FlashSchNet replicas)") == ["constant (g undefined)",
                                                                                "not enough frames"]
    bars = _cells(lines, "error bars")
    assert "one trajectory" in bars[0] and "4 independent replicas" in bars[1]
    warned = lines[lines.index("Warnings:") + 2:]
    assert "* MARTINI 3: q: constant over the analysed frames; g is undefined (nothing fluctuates)" in warned
    assert any(w.startswith("* FlashSchNet: q: not enough frames to estimate g (5 analysed") for w in warned)
    assert any(w.startswith("* FlashSchNet: rg: ") and "lower bound" in w for w in warned)
    assert "Fewer than 20 effective samples per replica" in lines[-1]
    assert "fewer than 10 frames: no estimate" in lines[-1]
