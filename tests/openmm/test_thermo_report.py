"""flashschnet.openmm.thermo_report: which files a tempering run's thermodynamics and mixing write, and report.md's
"Thermodynamics (MBAR)", "Exchange mixing" and "Warnings" sections from hand-made results: the table with its
errors, the melting temperatures (found, none in range, withheld), the unreliable marks, the exchange table and round
trips. (Written by a real analysis: tests/openmm/test_thermo.py.)"""
from __future__ import annotations

import copy

from flashschnet.openmm.thermo_report import files, markdown

TABLE = {"temperature_K": [300.0, 350.0], "potential_energy_kJ_mol": [-1234.56, -1100.04],
         "potential_energy_kJ_mol_err": [3.21, 4.0], "heat_capacity_kJ_mol_K": [0.51234, 0.6],
         "heat_capacity_kJ_mol_K_err": [0.0412, 0.05], "Q": [0.91, 0.42], "Q_err": [0.01, float("nan")],
         "rg_nm": [0.71, 0.9], "rg_nm_err": [0.002, 0.01], "rmsd_nm": [0.12, 0.4], "rmsd_nm_err": [0.003, 0.02],
         "effective_samples": [120.4, 80.6]}
THERMO = {"method": "MBAR over 2 temperatures", "table": TABLE, "bins": 20,
          "melting": {"range_K": [300.0, 350.0], "uncertainty": "bootstrap", "bootstrap_replicates": 10,
                      "heat_capacity_peak_K": 325.04, "heat_capacity_peak_err_K": 2.51,
                      "heat_capacity_peak_replicates": 9, "q_half_K": None, "q_half_err_K": None,
                      "q_half_replicates": 0},
          "states": [{"temperature_K": 300.0, "frames": 40, "equilibration_frames": 2,
                      "statistical_inefficiency": 1.534, "samples": 25}],
          "fes": [{"temperature_K": 300.0, "effective_frames": 120.4, "reliable": True},
                  {"temperature_K": 300.0, "effective_frames": 120.4, "reliable": True}],
          "sufficiency": {"sufficient": True}}
EXCHANGE = {"pairs": [{"T_lo_K": 300.0, "T_hi_K": 350.0, "attempts": 10, "accepted": 3, "acceptance": 0.3}],
            "round_trips_total": 2, "steps": 1000, "mean_round_trip_steps": 400.0, "mean_round_trip_ps": 1.6}


def test_the_files_follow_what_was_computed():
    assert files({"thermo": THERMO, "exchange": EXCHANGE}) == ["thermo.csv", "thermo.png", "thermo_fes.png",
                                                               "exchange_diagnostics.json", "exchange.png"]
    assert files({"thermo": None, "exchange": EXCHANGE}) == ["exchange_diagnostics.json", "exchange.png"]
    assert files({}) == [] and markdown({"thermo": None, "exchange": None, "warnings": []}) == ""


def test_the_sections_hold_the_table_the_melting_temperatures_and_the_mixing():
    lines = markdown({"thermo": THERMO, "exchange": EXCHANGE, "warnings": []}).splitlines()
    assert lines[0] == "## Thermodynamics (MBAR)" and lines[2].startswith("MBAR over 2 temperatures; uncertainties")
    assert ("| 300.0 | -1234.6 ± 3.2 | 0.512 ± 0.041 | 0.910 ± 0.010 | 0.710 ± 0.002 | 0.120 ± 0.003 "
            "| 120 |") in lines
    assert "| 350.0 | -1100.0 ± 4.0 | 0.600 ± 0.050 | 0.420 ± n/a | 0.900 ± 0.010 | 0.400 ± 0.020 | 81 |" in lines
    assert "* heat-capacity maximum: 325.0 ± 2.5 K (9 of 10 bootstrap replicates found one)" in lines
    assert "* <Q> = 0.5: none inside the range" in lines
    assert "Melting temperature (between 300.0 and 350.0 K; uncertainty: bootstrap):" in lines
    assert "| 300.0 | 40 | 2 | 1.53 | 25 |" in lines
    assert "| 300.0-350.0 | 10 | 3 | 0.300 |" in lines
    trips = "Round trips (lowest -> highest -> lowest rung): 2 in 1000 steps, mean 400 steps (1.6 ps)."
    assert any(ln.startswith(trips) for ln in lines)
    assert not any("nreliable" in ln for ln in lines) and "## Warnings" not in lines


def test_too_little_data_is_marked_and_the_melting_temperatures_withheld():
    thermo = copy.deepcopy(THERMO)
    reason = "too little data for MBAR: 25 uncorrelated samples at 300.0 K"
    thermo["sufficiency"] = {"sufficient": False, "reason": reason}
    thermo["melting"]["withheld"] = reason
    for s in thermo["fes"]:
        s.update(reliable=False, effective_frames=20.4)
    md = markdown({"thermo": thermo, "exchange": None, "warnings": ["MBAR: 25 uncorrelated samples"]})
    assert f"**Unreliable: {reason}** (thresholds: docs/analysis.md" in md
    assert f"* heat-capacity maximum: not reported: {reason}" in md and f"* <Q> = 0.5: not reported: {reason}" in md
    assert "; **unreliable** (see Warnings): 300.0 K (20 effective frames):" in md
    assert "## Exchange mixing" not in md
    assert md.splitlines()[-3:] == ["## Warnings", "", "* MBAR: 25 uncorrelated samples"]
