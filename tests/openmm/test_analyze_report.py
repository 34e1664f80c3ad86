"""flashschnet.openmm.analyze_report: report.md of flashschnet-analyze from hand-made results: a plain run's row per
replica (n/a where a value is missing), a tempering run's row and kT per temperature, the "Too little data" and
"Notes" sections only when there is something to say. (The report of real runs, figures included:
tests/openmm/test_analyze.py.)"""
from __future__ import annotations

import math

from flashschnet.openmm.analyze_report import markdown


def _summary(**kw):
    s = {"frames": 5, "rmsd_mean_nm": 0.1234, "rmsd_std_nm": 0.01, "final_rmsd_nm": 0.15, "rg_mean_nm": 0.7,
         "rg_std_nm": 0.02, "q_mean": 0.9, "q_final": 0.85}
    return {**s, **kw}


def _common(**kw):
    return {"run_dir": "/runs/trp", "n_residues": 20, "backbone_bead": "CA", "frames_total": 10,
            "settings": {"stride": 2}, "reference": "/runs/trp/topology.pdb", "rg_reference_nm": 0.7123,
            "n_native_contacts": 31, "temperature_source": "run.json",
            "contact_map": {"cutoff_nm": 0.8, "min_separation": 3}, "too_little_data": [], "notes": [], **kw}


def test_a_plain_runs_report_has_a_row_per_replica():
    result = _common(kind="flashschnet", temperature_K=300.0, kT_kJ_mol=2.4943, fes={"bins": 30}, log={0: {}},
                     replicas=[{"replica": 0, "summary": _summary(potential_energy_mean_kJ_mol=-1234.5678,
                                                                  temperature_mean_K=301.23)},
                               {"replica": 1, "summary": _summary(q_mean=math.nan, q_final=math.nan)}])
    md = markdown(result)
    lines = md.splitlines()
    assert lines[0] == "# Analysis of `/runs/trp`"
    assert ("Run of flashschnet-simulate; 2 replica(s), 20 residues (one `CA` bead each), 10 frames analysed (stride "
            "2). Reference: `/runs/trp/topology.pdb` (Rg 0.712 nm, 31 native contacts). T = 300 K (run.json).") in lines
    assert "| 0 | 5 | 0.123 ± 0.010 | 0.150 | 0.700 ± 0.020 | 0.900 | 0.850 | -1234.57 | 301.2 |" in lines
    assert "| 1 | 5 | 0.123 ± 0.010 | 0.150 | 0.700 ± 0.020 | n/a | n/a | n/a | n/a |" in lines
    assert "![energy and temperature](energy.png)" in lines and "(kT = 2.494 kJ/mol)" in md and "30 x 30 bins" in md
    assert "## Too little data" not in md and "## Notes" not in md

    result.update(kind="martini", log={}, too_little_data=[{"message": "too little data for fes.png: few"}],
                  notes=["log.csv: cut short"])
    md = markdown(result)
    assert "Run of flashschnet-martini;" in md and "(no log.csv rows: not shown)" in md
    assert "## Too little data" in md and "* too little data for fes.png: few" in md.splitlines()
    assert md.splitlines()[-3:] == ["## Notes", "", "* log.csv: cut short"]


def test_a_tempering_runs_report_has_a_row_and_a_kt_per_temperature():
    temps = [{"temperature_K": 300.0, "kT_kJ_mol": 2.4943, "file": "T300.0.dcd", "summary": _summary(), "log": None},
             {"temperature_K": 346.41, "kT_kJ_mol": 2.8802, "file": "T346.4.dcd",
              "summary": _summary(final_rmsd_nm=math.inf), "log": None}]
    md = markdown(_common(temperatures=temps))
    lines = md.splitlines()
    assert "Parallel-tempering run of flashschnet-simulate: 2 temperatures (300.0, 346.4 K, from run.json)" in md
    assert ("| 300.0 | 2.494 | `T300.0.dcd` | 5 | 0.123 ± 0.010 | 0.150 | 0.700 ± 0.020 | 0.900 | 0.850 | n/a "
            "| n/a |") in lines
    assert "| 346.4 | 2.88 | `T346.4.dcd` | 5 | 0.123 ± 0.010 | n/a |" in md
    assert "(2.494 kJ/mol at 300.0 K, 2.88 kJ/mol at 346.4 K)" in md and "| replica |" not in md
    assert "(no log.csv rows attributed to a temperature: not shown)" in lines
    temps[1]["log"] = {"step": [10]}
    assert "![energy and temperature per temperature](energy.png)" in markdown(_common(temperatures=temps))
