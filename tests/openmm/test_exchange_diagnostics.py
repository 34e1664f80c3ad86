"""flashschnet.openmm.exchange_diagnostics: the walkers' mixing in a parallel-tempering run from hand-written
exchanges.csv/walkers.csv with known round trips, acceptances and occupancy; the warnings (low acceptance, no round
trip), a partial last row dropped, and a damaged row or another ladder's file refused in one line."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.exchange_diagnostics import diagnostics


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_exchange_diagnostics_count_round_trips_acceptance_and_occupancy(tmp_path):
    """Three rungs; walker 0 goes 0 -> 1 -> 2 -> 1 -> 0 (one round trip, steps 0-40); walker 1 reaches the bottom
    at step 10 but never the top, walker 2 the top but not the bottom again. Pair (0, 1) accepts 2 of 3 tries,
    pair (1, 2) 2 of 21 (9.5 %: warned about). Then a run without a round trip (warned about), a partial last row
    (dropped), a damaged row and another ladder's file (one-line errors)."""
    temps = [300.0, 350.0, 400.0]
    cols = ["step", "pair", "T_lo_K", "T_hi_K", "walker_lo", "walker_hi", "probability", "accepted"]
    rows = [[10, 0, 300, 350, 0, 1, 0.5, 1],         # rungs: 1 0 2
            [20, 1, 350, 400, 0, 2, 0.5, 1],         # 1 2 0
            [30, 1, 350, 400, 2, 0, 0.5, 1],         # 1 0 2
            [40, 0, 300, 350, 1, 0, 0.5, 1],         # 0 1 2: walker 0 back at the bottom after the top
            [50, 0, 300, 350, 0, 1, 0.5, 0]]
    rows += [[60 + 10 * i, 1, 350, 400, 1, 2, 0.01, 0] for i in range(18)]
    rows.append([240, 1, 350, 400, 1, 2, 0.01, 0])
    _write(tmp_path / "exchanges.csv", cols, rows)
    _write(tmp_path / "walkers.csv", ["step", "T300.0", "T350.0", "T400.0"],
           [[0, 0, 1, 2], [20, 1, 2, 0], [40, 0, 1, 2], [60, 0, 1, 2]])
    d = diagnostics(str(tmp_path), temps, dt_ps=0.004)
    assert [(p["attempts"], p["accepted"]) for p in d["pairs"]] == [(3, 2), (21, 2)]
    assert d["pairs"][1]["acceptance"] == pytest.approx(2 / 21)
    assert d["round_trips"] == [[40], [], []] and d["round_trips_total"] == 1
    assert d["mean_round_trip_steps"] == 40 and d["mean_round_trip_ps"] == pytest.approx(0.16)
    # occupancy over the reports after step 0: walker 0 at rungs 2, 0, 0; walker 1 at 0, 1, 1; walker 2 at 1, 2, 2
    assert np.allclose(d["occupancy"], [[2 / 3, 0, 1 / 3], [1 / 3, 2 / 3, 0], [0, 1 / 3, 2 / 3]])
    assert len(d["warnings"]) == 1 and "acceptance 0.095 between 350.0 and 400.0 K is below 10%" in d["warnings"][0]

    # no round trip; and a partial last row (a run cut short) is dropped
    _write(tmp_path / "exchanges.csv", cols, rows[:2] + [[30, 1]])
    d = diagnostics(str(tmp_path), temps)
    assert d["round_trips_total"] == 0 and d["steps"] == 20
    assert any("no walker completed a round trip 300.0 -> 400.0 -> 300.0 K in 20 steps" in w for w in d["warnings"])
    # a damaged row in the middle, a file of another ladder: one-line errors
    _write(tmp_path / "exchanges.csv", cols, rows[:1] + [["x"] * 8] + rows[1:3])
    with pytest.raises(InputError, match="line 3: unreadable row"):
        diagnostics(str(tmp_path), temps)
    _write(tmp_path / "exchanges.csv", cols, rows)
    with pytest.raises(InputError, match="outside the 2-rung ladder"):
        diagnostics(str(tmp_path), temps[:2])
