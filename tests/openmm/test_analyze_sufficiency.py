"""flashschnet.openmm.analyze_sufficiency: whether each figure of flashschnet-analyze's report has enough frames and
how many more it needs (:func:`too_little_data`), and the thresholds below which a tempering run's MBAR
thermodynamics are not trusted (:func:`mbar_sufficiency`), on synthetic numbers."""
from __future__ import annotations

import numpy as np

from flashschnet.openmm.analyze_sufficiency import (MIN_CONTACT_FRAMES, MIN_FES_FRAMES, MIN_RMSF_FRAMES,
                                                    MIN_TRACE_POINTS, too_little_data)


def test_mbar_sufficiency_thresholds_on_synthetic_numbers():
    """Exactly at each threshold: sufficient, no warning; one below any of them: that quantity fails, with one
    warning naming it, its value, the threshold and what to do; without exchanges.csv round trips are not judged."""
    from flashschnet.openmm.analyze_sufficiency import (MIN_NEIGHBOUR_OVERLAP, MIN_ROUND_TRIPS_PER_WALKER,
                                                        MIN_SAMPLES_PER_TEMPERATURE, mbar_sufficiency)

    def check(samples=MIN_SAMPLES_PER_TEMPERATURE, trips=MIN_ROUND_TRIPS_PER_WALKER * 3, overlap=MIN_NEIGHBOUR_OVERLAP,
              exchange=True):
        states = [{"temperature_K": t, "samples": n} for t, n in ((300.0, 80), (350.0, samples), (400.0, 90))]
        pairs = [{"T_lo_K": 300.0, "T_hi_K": 350.0, "overlap": 0.2},
                 {"T_lo_K": 350.0, "T_hi_K": 400.0, "overlap": overlap}]
        ex = {"temperatures_K": [300.0, 350.0, 400.0], "round_trips_total": trips, "steps": 5000} if exchange else None
        return mbar_sufficiency(states, pairs, ex)

    ok = check()
    assert ok["sufficient"] and ok["failed"] == [] and ok["warnings"] == [] and ok["reason"] is None
    assert (ok["min_samples"], ok["min_samples_T_K"], ok["round_trips"], ok["round_trips_needed"]) == (50, 350.0, 3, 3)
    assert ok["min_neighbour_overlap"] == MIN_NEIGHBOUR_OVERLAP and ok["min_overlap_pair_K"] == [350.0, 400.0]
    for kwargs, failed, needles in (
            ({"samples": 49}, "samples", ["49 uncorrelated samples at 350.0 K", "the 50 per temperature",
                                          "run longer"]),
            ({"trips": 2}, "round_trips", ["2 walker round trip(s) 300.0 -> 400.0 -> 300.0 K in 5000 steps",
                                           "the 3 needed", "run longer"]),
            ({"trips": 0}, "round_trips", ["no walker completed a round trip 300.0 -> 400.0 -> 300.0 K"]),
            ({"overlap": 0.029}, "overlap", ["overlap 0.029 between 350.0 and 400.0 K", "below 0.03",
                                             "put a temperature between them"])):
        r = check(**kwargs)
        assert not r["sufficient"] and r["failed"] == [failed] and len(r["warnings"]) == 1, r
        assert r["warnings"][0].startswith("MBAR: ") and "melting temperatures withheld" in r["warnings"][0]
        assert all(n in r["warnings"][0] for n in needles), r["warnings"][0]
        assert r["reason"].startswith("too little data for MBAR: ")
    r = check(samples=10, trips=0, overlap=0.001, exchange=False)
    assert r["failed"] == ["samples", "overlap"] and r["round_trips"] is None and len(r["warnings"]) == 2


def _records(frames):
    return [{"replica": r, "frames": n} for r, n in enumerate(frames)]


def _logs(rows):
    return {r: {"step": np.arange(n) * 10} for r, n in enumerate(rows)}


def test_too_little_data_says_which_figures_fall_short_and_how_many_more_steps_they_need():
    """Two replicas of 5 frames (and 5 log rows) each, a frame every 10 steps: the traces, the RMSF and the pooled F
    fall short (F gains 2 frames a report: both replicas); the pooled contact map's 10 frames suffice. --stride 2
    doubles the steps the thinned figures need; exactly the thresholds: nothing is short."""
    short = {(s["figure"], s["quantity"]): s for s in too_little_data(_records([5, 5]), "replica", _logs([5, 5]),
                                                                       True, 10, 1)}
    assert set(short) == {("energy.png", "the energy and temperature traces"),
                          ("structure.png", "the RMSD, Rg and Q traces"), ("structure.png", "the RMSF"),
                          ("fes.png", "F(RMSD, Rg)")}
    energy = short["energy.png", "the energy and temperature traces"]
    assert (energy["subjects"], energy["frames"], energy["more_frames"], energy["more_steps"]) == ([0, 1], 5, 5, 50)
    assert "the energy and temperature traces of replicas 0, 1 from 5 log rows each" in energy["message"]
    rmsf = short["structure.png", "the RMSF"]
    assert (rmsf["needed"], rmsf["more_frames"], rmsf["more_steps"]) == (MIN_RMSF_FRAMES, 15, 150)
    fes = short["fes.png", "F(RMSD, Rg)"]
    assert fes["subjects"] is None and fes["frames"] == 10 and fes["more_frames"] == MIN_FES_FRAMES - 10
    assert fes["more_steps"] == (MIN_FES_FRAMES - 10) // 2 * 10
    assert fes["message"] == ("too little data for fes.png: F(RMSD, Rg) from 10 frames (2 replicas pooled); at least "
                              f"{MIN_FES_FRAMES} are needed ({MIN_FES_FRAMES - 10} more: about "
                              f"{fes['more_steps']} more steps at the report interval of 10, or a smaller "
                              "--report-interval)")

    thinned = {(s["figure"], s["quantity"]): s for s in too_little_data(_records([5, 5]), "replica", _logs([5, 5]),
                                                                         True, 10, 2)}
    assert thinned["structure.png", "the RMSF"]["more_steps"] == 300
    assert thinned["energy.png", "the energy and temperature traces"]["more_steps"] == 50     # log rows: not thinned
    assert "or --stride (now 2)" in thinned["structure.png", "the RMSF"]["message"]

    # per temperature (not pooled): each contact map stands alone; an unknown interval gives reports, not steps
    per_t = too_little_data([{"temperature_K": 300.0, "frames": 9}, {"temperature_K": 350.0, "frames": 9}],
                            "temperature_K", {}, False, 0, 1)
    maps = next(s for s in per_t if s["figure"] == "contacts.png")
    assert maps["subjects"] == [300.0, 350.0] and maps["more_frames"] == MIN_CONTACT_FRAMES - 9
    assert maps["more_steps"] is None and "300.0, 350.0 K from 9 frames each" in maps["message"]
    assert "1 more reports" in maps["message"]

    need = max(MIN_TRACE_POINTS, MIN_RMSF_FRAMES)
    assert too_little_data(_records([need, MIN_FES_FRAMES - need]), "replica",
                           _logs([MIN_TRACE_POINTS, MIN_TRACE_POINTS]), True, 10, 1) == []
