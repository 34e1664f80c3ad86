"""flashschnet.openmm.run_checks: a run directory's files checked against each other, on small run directories
written here (tests/helpers/small_runs.py's): run.json of another run (replicas, frame spacing, steps, kind of
run) refused in one line, a replica it records but the directory lacks noted (strict: refused); log.csv rows of
another run refused, a log ending before the run noted; a run without its checkpoint not resumable; the step of a
run's settings."""
from __future__ import annotations

import csv
import json

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.run_checks import check_resumable, ensemble_run, step_fs
from flashschnet.openmm.run_reader import RunDir
from tests.helpers.small_runs import LOG_HEADER, write_run


def test_the_step_of_a_run_and_whether_it_is_an_ensemble():
    assert step_fs({"dt_fs": 4}) == 4.0 and step_fs({"dt_fs": 2.0, "mts": "inner.pt"}) == 4.0
    assert step_fs({"dt_fs": 2.0, "mts": "inner.pt", "outer_dt_fs": 6}) == 6.0
    assert step_fs({}) is None and step_fs({"dt_fs": True}) is None and step_fs({"dt_fs": "4"}) is None
    assert ensemble_run({"temperatures": "300:400:3"}) and ensemble_run({"blocks": 2})
    assert not ensemble_run({"replicas": 4, "temperatures": None})


@pytest.mark.parametrize("cfg, needle", [
    ({"replicas": 1}, "it records 1 replica(s), but the directory holds replica_001.dcd"),
    ({"report_interval": 20}, "a frame every 20 steps of 4 fs, but replica_000.dcd holds one every 10 steps of 4 fs"),
    ({"steps": 10}, "the run ends at step 10, but replica_000.dcd holds frames up to step 20"),
    ({"forcefield_dir": "ff"}, "the settings of a flashschnet-martini run, in a flashschnet-simulate run directory"),
    ({"temperatures": "300:400:2"}, "it records a parallel-tempering run, but the directory holds none of its files"),
])
def test_another_runs_settings_are_refused_in_one_line(tmp_path, cfg, needle):
    write_run(str(tmp_path / "run"), cfg=cfg)
    with pytest.raises(InputError) as exc:
        RunDir(str(tmp_path / "run")).settings()
    message = str(exc.value)
    assert message.startswith(f"{tmp_path / 'run' / 'run.json'}: ") and needle in message and "\n" not in message
    assert message.endswith("they are not of the same run; restore the files the run wrote"), message


def test_a_replica_the_settings_record_but_the_directory_lacks_is_noted_or_refused(tmp_path):
    write_run(str(tmp_path / "run"), cfg={"replicas": 3})
    rd = RunDir(str(tmp_path / "run"))
    assert rd.settings()["replicas"] == 3
    assert rd.notes == ["replica_002.dcd: missing (run.json records 3 replicas); the run's other trajectories are read"]
    with pytest.raises(InputError, match=r"replica_002.dcd: missing \(run.json records 3 replicas\); restore it"):
        RunDir(str(tmp_path / "run"), strict=True).settings()


def _rewrite_log(path, rows):
    with open(path / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(LOG_HEADER)
        w.writerows(rows)


@pytest.mark.parametrize("rows, needle", [
    ([[0, 0.0, 5, -1.0, 300.0, 50.0]], "rows of replica 5, which the run does not have (it has 0, 1)"),
    ([[0, 0.0, 0, -1.0, 300.0, 50.0], [15, 0.06, 0, -1.0, 300.0, 50.0], [0, 0.0, 1, -1.0, 300.0, 50.0]],
     "replica 0 has a row at step 15, off the run's report interval of 10 steps"),
    ([[0, 0.0, 0, -1.0, 300.0, 50.0], [30, 0.12, 0, -1.0, 300.0, 50.0], [0, 0.0, 1, -1.0, 300.0, 50.0]],
     "rows up to step 30, past the 20 steps of the run"),
    ([[0, 0.0, 0, -1.0, 300.0, 50.0], [10, 0.04, 0, -1.0, 300.0, 50.0]],
     "no row of replica 1, whose trajectory has frames"),
])
def test_another_runs_log_is_refused(tmp_path, rows, needle):
    path = tmp_path / "run"
    write_run(str(path))
    _rewrite_log(path, rows)
    with pytest.raises(InputError) as exc:
        RunDir(str(path)).read_log()
    assert needle in str(exc.value) and "it is not this run's log" in str(exc.value), str(exc.value)


def test_a_log_ending_before_the_run_is_noted_and_the_rows_it_has_are_used(tmp_path):
    path = tmp_path / "run"
    write_run(str(path))
    _rewrite_log(path, [[0, 0.0, 0, -1.0, 300.0, 50.0], [0, 0.0, 1, -2.0, 300.0, 50.0]])
    rd = RunDir(str(path))
    log = rd.read_log()
    assert log[1]["potential_energy_kJ_mol"].tolist() == [-2.0]
    # the trajectories reach step 20; a run killed between a frame and its row may be one report behind: step 10
    assert rd.notes == ["log.csv: its rows end at step 0, but the run reached step 10 (its trajectories) (cut short); "
                        "the rows it has are used"]


def test_a_run_without_its_checkpoint_cannot_be_resumed(tmp_path):
    path = tmp_path / "run"
    write_run(str(path))
    with pytest.raises(InputError, match="checkpoint.chk: missing; the run cannot be resumed without it"):
        check_resumable(RunDir(str(path), strict=True))
    (path / "run.json").unlink()
    with pytest.raises(InputError, match="run.json: missing; it holds the run's settings"):
        check_resumable(RunDir(str(path), strict=True))
    (path / "run.json").write_text(json.dumps([1, 2]))
    with pytest.raises(InputError, match="run.json: not a JSON object; restore the run.json the run wrote"):
        check_resumable(RunDir(str(path), strict=True))
