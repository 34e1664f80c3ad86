"""flashschnet.openmm.analyze_series: the series flashschnet-analyze's report is drawn from, on a small run written
here (tests/helpers/small_runs.py's): each trajectory's backbone RMSD, Rg, Q and RMSF against a direct
computation, with --stride; the log's energies per replica; a tempering run's log rows regrouped by the temperature
each walker was at (its thermostat_K, else walkers.csv, else not at all), and a rung without a frame left out."""
from __future__ import annotations

import csv
import os

import numpy as np
import openmm.app as app
import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.analyze_series import log_series, trajectory_series
from flashschnet.openmm.dcd import DCDWriter
from flashschnet.openmm.observables import (MOLAR_GAS_CONSTANT_KJ_MOL_K, fraction_native_contacts, kabsch_align,
                                            native_contacts, radius_of_gyration, rmsf)
from flashschnet.openmm.run_reader import RunDir, pdb_positions
from tests.helpers.small_runs import LOG_HEADER, write_run


@pytest.fixture
def run(tmp_path):
    path = tmp_path / "run"
    xyz = write_run(str(path))
    rd = RunDir(str(path))
    backbone = rd.backbone()
    ref = pdb_positions(rd.topology(), backbone)
    return rd, xyz[:, :, backbone], backbone, ref


def test_each_replicas_series_is_the_direct_computation(run):
    rd, frames, backbone, ref = run
    pairs = native_contacts(ref, cutoff=1.5, min_separation=2)
    assert len(pairs) > 0
    notes = []
    records, pooled, intervals = trajectory_series(rd, list(rd.trajectories.items()), False, backbone, ref, pairs,
                                                   rd.settings(), 1, notes, progress=False)
    assert intervals == [10, 10] and notes == [] and [r["replica"] for r in records] == [0, 1]
    for rec, mine, used in zip(records, frames, pooled):
        assert rec["file"] == f"replica_{rec['replica']:03d}.dcd" and rec["frames"] == 3
        assert rec["step"].tolist() == [0, 10, 20] and rec["time_ps"] == pytest.approx([0.0, 0.04, 0.08])
        assert np.allclose(used, mine, atol=1e-5)
        rmsd, aligned = kabsch_align(mine, ref)
        assert rec["rmsd_nm"] == pytest.approx(rmsd, abs=1e-5) and rmsd.min() > 1e-3
        assert rec["rg_nm"] == pytest.approx(radius_of_gyration(mine), abs=1e-5)
        assert np.allclose(rec["q"], fraction_native_contacts(used, ref, pairs))
        assert rec["rmsf_nm"] == pytest.approx(rmsf(mine, ref), abs=1e-5)
        assert rec["summary"]["final_rmsd_nm"] == pytest.approx(rmsd[-1], abs=1e-5)
    strided, _, _ = trajectory_series(rd, [(1, rd.trajectories[1])], False, backbone, ref, pairs, {}, 2, notes,
                                      progress=False)
    assert strided[0]["step"].tolist() == [0, 20] and strided[0]["frames"] == 2
    assert strided[0]["time_ps"] == pytest.approx([0.0, 0.08])                      # the DCD header's step

    log = log_series(rd, records, [1], False, notes)
    assert list(log) == [1] and log[1]["step"].tolist() == [0, 10, 20]
    assert records[0]["summary"]["potential_energy_mean_kJ_mol"] == pytest.approx(-110.0)
    assert records[1]["summary"]["temperature_mean_K"] == pytest.approx(301.0)


def test_a_rung_without_a_frame_is_left_out_of_a_tempering_run_and_refused_otherwise(run, tmp_path):
    rd, _, backbone, ref = run
    empty = os.path.join(rd.path, "T400.0.dcd")
    DCDWriter(empty, app.PDBFile(rd.topology_path).topology, 0.004, 0, 10).close()
    notes = []
    records, _, _ = trajectory_series(rd, [(300.0, rd.trajectories[0]), (400.0, empty)], True, backbone, ref,
                                      np.zeros((0, 2), int), {}, 1, notes, progress=False)
    assert [r["temperature_K"] for r in records] == [300.0]
    assert records[0]["kT_kJ_mol"] == pytest.approx(MOLAR_GAS_CONSTANT_KJ_MOL_K * 300.0)
    assert np.isnan(records[0]["summary"]["q_mean"])                                  # no native contacts
    assert notes == ["T400.0.dcd: no frame (its walker was dropped before the first report?); 400.0 K is left out"]
    with pytest.raises(InputError, match="T400.0.dcd: no complete frame"):
        trajectory_series(rd, [(0, empty)], False, backbone, ref, np.zeros((0, 2), int), {}, 1, [], progress=False)


def _log(rd, rows, thermostat=True):
    with open(rd.log_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(LOG_HEADER + (["thermostat_K"] if thermostat else []))
        for step, walker, at in rows:
            w.writerow([step, step * 0.004, walker, -float(step + walker), at + 1.0, 50.0]
                       + ([at] if thermostat else []))


#: (step, walker, the temperature it was at): the walkers swap at step 10 and back at step 20
ROWS = [(0, 0, 300.0), (0, 1, 350.0), (10, 0, 350.0), (10, 1, 300.0), (20, 0, 300.0), (20, 1, 350.0)]


def _records():
    return [{"temperature_K": 300.0, "summary": {}}, {"temperature_K": 350.0, "summary": {}}]


def test_a_tempering_runs_log_is_regrouped_by_temperature(run):
    rd = run[0]
    _log(rd, ROWS)
    notes, records = [], _records()
    by_t = log_series(RunDir(rd.path), records, [], True, notes)
    assert sorted(by_t) == [300.0, 350.0] and notes == []
    assert by_t[300.0]["step"].tolist() == [0, 10, 20] and by_t[300.0]["walker"].tolist() == [0, 1, 0]
    assert by_t[350.0]["walker"].tolist() == [1, 0, 1]
    assert by_t[350.0]["potential_energy_kJ_mol"].tolist() == [-1.0, -10.0, -21.0]
    assert records[0]["log"] is by_t[300.0] and records[1]["summary"]["temperature_mean_K"] == pytest.approx(351.0)

    # a row at a temperature of no rung is left out, and said
    _log(rd, ROWS[:5] + [(20, 1, 325.0)])
    notes = []
    by_t = log_series(RunDir(rd.path), _records(), [], True, notes)
    assert by_t[350.0]["step"].tolist() == [0, 10]
    assert notes == ["log.csv: 1 row(s) at no analysed temperature are left out of the energy traces"]


def test_without_thermostat_k_walkers_csv_attributes_the_rows_else_nothing_does(run):
    rd = run[0]
    _log(rd, ROWS, thermostat=False)
    with open(rd.file("walkers.csv"), "w", newline="") as f:
        csv.writer(f).writerows([["step", "T300.0", "T350.0"], [0, 0, 1], [10, 1, 0], [20, 0, 1]])
    notes = []
    by_t = log_series(RunDir(rd.path), _records(), [], True, notes)
    assert by_t[300.0]["walker"].tolist() == [0, 1, 0] and by_t[350.0]["walker"].tolist() == [1, 0, 1]
    assert notes == ["log.csv has no thermostat_K column: its rows are attributed to temperatures by walkers.csv"]
    os.remove(rd.file("walkers.csv"))
    notes, records = [], _records()
    assert log_series(RunDir(rd.path), records, [], True, notes) == {}
    assert records[0]["log"] is None and "potential_energy_mean_kJ_mol" not in records[0]["summary"]
    assert len(notes) == 1 and "its energies are not attributed to temperatures, and not shown" in notes[0]
