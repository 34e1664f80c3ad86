"""flashschnet.openmm.analyze_thermo: a tempering run's thermodynamics (:func:`tempering_thermo`) on synthetic rungs of
an exact two-state system: enough samples keep the melting temperatures, too few withhold them (with the reason, a
warning and the surfaces marked unreliable, as report.md then says); --temperatures-out and --fes-temperatures parsed
and checked."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.openmm.units import BOLTZMANN_KJ_MOL_K as KB

# the two-state system of tests/openmm/test_thermo.py: Q = 1 (U = 0) or Q = 0 (U = EPS, degeneracy e^LOG_G)
EPS = 50.0                          # kJ/mol
TM = 350.0                          # K: <Q> = 0.5 here
LOG_G = EPS / (KB * TM)


def _unfolded(t):
    """Exact population of the unfolded state (U = EPS, degeneracy e^LOG_G) at temperatures ``t``."""
    return 1.0 / (1.0 + np.exp(EPS / (KB * np.asarray(t)) - LOG_G))


def _synthetic_records(temps, frames, seed):
    """Records as analyze_series makes them (log rows and frames at steps 10, 20, ...) of the exact two-state
    system above sampled independently at ``temps``."""
    rng = np.random.default_rng(seed)
    records = []
    for t in temps:
        unfolded = rng.random(frames) < _unfolded(t)
        steps = np.arange(1, frames + 1) * 10
        records.append({"temperature_K": t, "file": f"T{t:.1f}.dcd", "step": steps, "q": np.where(unfolded, 0.0, 1.0),
                        "rg_nm": np.where(unfolded, 1.2, 0.8) + 0.01 * rng.standard_normal(frames),
                        "rmsd_nm": np.where(unfolded, 0.6, 0.1) + 0.01 * rng.standard_normal(frames),
                        "log": {"step": steps, "potential_energy_kJ_mol": np.where(unfolded, EPS, 0.0)}})
    return records


def test_enough_samples_keep_the_melting_temperatures_too_few_withhold_them(tmp_path):
    """tempering_thermo on synthetic rungs (no exchanges.csv: round trips not judged): 300 independent samples per
    rung pass every threshold (melting temperatures reported, no warning, surfaces reliable); 30 per rung fail the
    samples threshold: one warning, the melting temperatures None with the reason, the surfaces unreliable."""
    from flashschnet.openmm import thermo_report
    from flashschnet.openmm.analyze_thermo import tempering_thermo

    temps = list(np.linspace(320.0, 380.0, 4))
    for frames, sufficient in ((300, True), (30, False)):
        notes = []
        thermo, exchange, warnings = tempering_thermo(str(tmp_path), _synthetic_records(temps, frames, 5), temps, {},
                                                      [320.0, 340.0, 360.0, 380.0], None, 0, 5, notes)
        enough, m = thermo["sufficiency"], thermo["melting"]
        assert exchange is None and enough["round_trips"] is None and enough["sufficient"] is sufficient
        assert 0 < enough["min_neighbour_overlap"] and "warnings" not in enough
        md = thermo_report.markdown({"thermo": thermo, "exchange": None, "warnings": warnings})
        if sufficient:
            assert warnings == [] and enough["min_samples"] >= 50 and "withheld" not in m
            assert m["q_half_K"] == pytest.approx(TM, abs=10) and all(s["reliable"] for s in thermo["fes"])
            assert f"<Q> = 0.5: {m['q_half_K']:.1f} K" in md and "nreliable" not in md and "Warnings" not in md
        else:
            assert "<Q> = 0.5: not reported: too little data for MBAR" in md and "**Unreliable:" in md
            assert enough["failed"] == ["samples"] and len(warnings) == 2, warnings    # and the surfaces' frames
            assert "uncorrelated samples" in warnings[0] and "effective frames" in warnings[1]
            assert m["heat_capacity_peak_K"] is m["q_half_K"] is m["heat_capacity_peak_err_K"] is None
            assert m["withheld"] == enough["reason"] and "at least 50 per temperature" in m["withheld"]
            assert not any(s["reliable"] for s in thermo["fes"])



def test_temperature_lists_are_parsed_sorted_and_checked():
    """--temperatures-out / --fes-temperatures: N evenly spaced temperatures or a list (sorted, each once); anything
    else one line naming the option."""
    from flashschnet.errors import InputError
    from flashschnet.openmm.analyze_thermo import parse_temperature_list

    assert parse_temperature_list("280:420:29", "--temperatures-out") == pytest.approx(np.arange(280.0, 421.0, 5.0))
    assert parse_temperature_list(" 350,300,350 ", "--fes-temperatures") == [300.0, 350.0]
    assert parse_temperature_list("300:300:1", "--temperatures-out") == [300.0]
    for text, needle in (("300:400:1", "give TMIN:TMAX:N"), ("400:300:3", "give TMIN:TMAX:N"),
                         ("300,,350", "give TMIN:TMAX:N"), ("warm", "give TMIN:TMAX:N"),
                         ("300,inf", "positive finite"), ("0,300", "positive finite")):
        with pytest.raises(InputError, match=needle) as exc:
            parse_temperature_list(text, "--temperatures-out")
        assert str(exc.value).startswith(f"--temperatures-out {text!r}: ")
