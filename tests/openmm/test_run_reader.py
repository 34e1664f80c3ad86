"""flashschnet.openmm.run_reader: a run directory read, on small ones written with the run's own writers
(tests/helpers/small_runs.py: a flashschnet-simulate run of 2 replicas, 6 residues of a CA and a CB bead, 3 frames;
a MARTINI-like one): its kind, backbone, settings, trajectories and log; log.csv rows cut short, garbled or missing a
column; each interval's wall time from the log's speed column; a trajectory cut short (a note, or for a strict reader
an error); the refusals."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.run_reader import RunDir, interval_walls, read_log, whole_pdb
from tests.helpers.small_runs import LOG_HEADER, write_run


@pytest.fixture
def run(tmp_path):
    path = tmp_path / "run"
    return path, write_run(str(path))


def test_a_simulate_run_is_read_as_it_was_written(run):
    path, xyz = run
    rd = RunDir(str(path))
    assert (rd.kind, rd.bead, rd.command) == ("flashschnet", "CA", "flashschnet-simulate")
    assert rd.trajectories == {0: str(path / "replica_000.dcd"), 1: str(path / "replica_001.dcd")}
    assert rd.backbone().tolist() == [0, 2, 4, 6, 8, 10]                   # the CA bead of each residue
    assert rd.settings()["replicas"] == 2 and rd.run_json() == rd.settings() and rd.ladder() is None
    assert rd.topology().n_atoms == 12 and rd.checkpoint() is None
    assert np.allclose(rd.frames(1), xyz[1], atol=1e-5)
    assert np.allclose(rd.frames(0, rd.backbone()), xyz[0][:, ::2], atol=1e-5)
    head = rd.header(0)
    assert (head.frames, head.first_step, head.interval) == (3, 0, 10) and head.dt_ps == pytest.approx(0.004)
    log = rd.read_log(extra=("ns_per_day",))
    assert sorted(log) == [0, 1] and log[1]["step"].tolist() == [0, 10, 20]
    assert log[1]["potential_energy_kJ_mol"].tolist() == [-101.0, -111.0, -121.0]
    assert log[0]["time_ps"] == pytest.approx([0.0, 0.04, 0.08]) and (log[1]["temperature_K"] == 301.0).all()
    wall = 10 * 4.0e-6 / 50.0 * 86400.0                                      # 10 steps of 4 fs at 50 ns/day
    assert interval_walls(log, 4.0) == pytest.approx({10: wall, 20: wall}, rel=1e-12)
    assert rd.notes == []


def test_a_martini_run_has_one_trajectory_and_bb_beads(tmp_path):
    write_run(str(tmp_path / "m"), replicas=1, kind="martini", interval=100, dt_fs=20.0)
    rd = RunDir(str(tmp_path / "m"))
    assert (rd.kind, rd.bead, rd.command) == ("martini", "BB", "flashschnet-martini")
    assert list(rd.trajectories) == [0] and rd.trajectories[0].endswith("trajectory.dcd")
    assert rd.backbone().tolist() == [0, 2, 4, 6, 8, 10] and rd.ladder() is None


def test_a_trajectory_cut_short_is_a_note_or_for_a_strict_reader_an_error(run):
    path, xyz = run
    dcd = path / "replica_001.dcd"
    dcd.write_bytes(dcd.read_bytes()[:-100])                                # the last frame, partly written
    rd = RunDir(str(path))
    assert np.allclose(rd.frames(1), xyz[1][:2], atol=1e-5)
    assert rd.notes == ["replica_001.dcd: the header counts 3 frames, 2 are complete (cut short); the complete ones "
                        "are used"]
    with pytest.raises(InputError, match="the header counts 3 frames, 2 are complete .*; restore the file"):
        RunDir(str(path), strict=True).frames(1)


def test_what_is_not_a_run_directory_is_refused(run, tmp_path):
    path, _ = run
    with pytest.raises(InputError, match="no such directory"):
        RunDir(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no trajectories"):
        RunDir(str(tmp_path / "empty"))
    shutil.copy(path / "run.json", tmp_path / "empty")                       # run.json names the file that is gone
    with pytest.raises(InputError, match="replica_000.dcd: missing"):
        RunDir(str(tmp_path / "empty"))
    top = path / "topology.pdb"
    top.write_text(top.read_text().replace("END\n", ""))
    with pytest.raises(InputError, match="cut short"):
        whole_pdb(str(top), "restore it")
    with pytest.raises(InputError, match="cut short"):
        RunDir(str(path)).topology()
    (path / "run.json").unlink()
    rd = RunDir(str(path))
    assert rd.settings() == {} and rd.notes == ["run.json: missing; the settings come from the trajectory headers"]
    with pytest.raises(InputError, match="run.json: missing"):
        RunDir(str(path)).settings(required=True)


def _log(tmp_path, text, mode="w"):
    p = tmp_path / "log.csv"
    if mode == "w":
        p.write_text(text)
    else:
        p.write_bytes(text)
    return str(p)


def test_a_log_cut_short_is_read_to_its_last_whole_row_and_a_damaged_one_refused(tmp_path):
    head = ",".join(LOG_HEADER[:5]) + "\n"
    rows = "0,0.0,0,-1.0,300.0\n10,0.04,0,-2.0,301.0\n"
    notes = []
    log = read_log(_log(tmp_path, head + rows + "20,0.08,0,-3"), notes.append, extra=("ns_per_day",))
    assert log[0]["step"].tolist() == [0, 10] and np.isnan(log[0]["ns_per_day"]).all()
    assert len(notes) == 1 and "the last row (line 4) is incomplete (cut short)" in notes[0]
    notes.clear()
    assert read_log(_log(tmp_path, ""), notes.append) == {} and "empty; it has no rows" in notes[0]
    assert read_log(_log(tmp_path, "step,time"), notes.append) == {} and "cut short inside its header" in notes[1]
    for text, needle in ((head + "0,0.0,0,-1.0,300.0\n1O,0.04,0,-2.0,301.0\n20,0.08,0,-3.0,300.0\n",
                          "line 3: unreadable row"),
                         ("step,replica,temperature_K\n0,0,300\n", "no column potential_energy_kJ_mol"),
                         (b"\xff\xfe\x00\x81" * 20, "unreadable log")):
        with pytest.raises(InputError, match=needle):
            read_log(_log(tmp_path, text, "w" if isinstance(text, str) else "b"), notes.append)


def test_interval_walls_are_the_steps_since_the_previous_row_at_its_speed():
    log = {0: {"step": np.array([0, 10, 30, 40, 50]), "ns_per_day": np.array([np.nan, 50.0, 25.0, np.nan, -1.0])},
           1: {"step": np.array([0, 10]), "ns_per_day": np.array([7.0, 9.0])}}            # the first replica's speeds
    day = 86400.0
    assert interval_walls(log, 2.0) == pytest.approx({10: 10 * 2e-6 / 50.0 * day, 30: 20 * 2e-6 / 25.0 * day})
    assert interval_walls({0: {"step": np.array([0, 10])}}, 2.0) == {}               # no speed column
