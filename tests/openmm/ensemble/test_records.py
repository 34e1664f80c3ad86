"""flashschnet.openmm.ensemble.records: the driving process's files -- log.csv (with the thermostat_K column) and,
with a ladder, exchanges.csv and walkers.csv (a column per rung) -- new with their headers, or cut back to the sizes
a run checkpoint recorded and appended to; the run's checkpoint (a header without an OpenMM state), and a plain
run's checkpoint refused in one line."""
from __future__ import annotations

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.ensemble.records import open_records, read_run_checkpoint, write_run_checkpoint
from flashschnet.openmm.ladder import EXCHANGE_COLUMNS
from flashschnet.openmm.reporters import read_checkpoint, write_checkpoint


def _lines(path):
    return path.read_text().splitlines()


def test_new_records_start_with_their_headers_and_a_resume_cuts_them_back_to_the_checkpoint(tmp_path):
    ladder = [300.0, 336.3]
    files = open_records(str(tmp_path), 0.004, ladder=ladder)
    assert sorted(files) == ["exchanges.csv", "log.csv", "walkers.csv"]
    files["walkers.csv"].rows([[0, 0, 1]])
    sizes = {name: f.sync() for name, f in files.items()}          # what a checkpoint records
    files["walkers.csv"].rows([[50, 1, 0]])                        # written after it
    files["exchanges.csv"].rows([[10, 0, 300.0, 336.3, 0, 1, 0.5, 1]])
    for f in files.values():
        f.close()
    assert _lines(tmp_path / "walkers.csv") == ["step,T300.0,T336.3", "0,0,1", "50,1,0"]
    assert _lines(tmp_path / "exchanges.csv")[0] == ",".join(EXCHANGE_COLUMNS)
    assert _lines(tmp_path / "log.csv") == [
        "step,time_ps,replica,potential_energy_kJ_mol,temperature_K,ns_per_day,thermostat_K"]

    again = open_records(str(tmp_path), 0.004, ladder=ladder, sizes=sizes)      # a resume: cut back, appended to
    again["walkers.csv"].rows([[50, 0, 1]])
    for f in again.values():
        f.close()
    assert _lines(tmp_path / "walkers.csv") == ["step,T300.0,T336.3", "0,0,1", "50,0,1"]
    assert _lines(tmp_path / "exchanges.csv") == [",".join(EXCHANGE_COLUMNS)]
    assert len(_lines(tmp_path / "log.csv")) == 1                   # header once

    plain = tmp_path / "ensemble"                                   # no ladder: the log only
    plain.mkdir()
    files = open_records(str(plain), 0.004)
    for f in files.values():
        f.close()
    assert list(files) == ["log.csv"] and sorted(p.name for p in plain.iterdir()) == ["log.csv"]


def test_a_file_shorter_than_its_checkpoint_is_refused(tmp_path):
    files = open_records(str(tmp_path), 0.004, ladder=[300.0, 400.0])
    sizes = {name: f.sync() + (100 if name == "walkers.csv" else 0) for name, f in files.items()}
    for f in files.values():
        f.close()
    with pytest.raises(InputError, match=r"walkers\.csv: shorter than the checkpoint records"):
        open_records(str(tmp_path), 0.004, ladder=[300.0, 400.0], sizes=sizes)


def test_the_run_checkpoint_holds_a_header_only_and_a_plain_runs_is_refused(tmp_path):
    path = str(tmp_path / "checkpoint.chk")
    meta = {"step": 100, "ensemble": {"walker_at": [1, 0]}, "files": {"log.csv": 10}}
    write_run_checkpoint(path, meta)
    assert read_run_checkpoint(path) == meta
    assert read_checkpoint(path) == (meta, b"")                     # no OpenMM state in it
    write_checkpoint(path, {"step": 5}, b"an openmm state")         # a run without --temperatures/--workers
    with pytest.raises(InputError, match="not the checkpoint of an ensemble run") as info:
        read_run_checkpoint(path)
    assert "\n" not in str(info.value)
