"""Resume by identity (flashschnet.openmm.runner.resume): input files by content, settings from run.json, every
disagreement in one line. No simulation here (tests/scripts/test_simulate.py runs the commands)."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.runner import open_run_dir
from flashschnet.openmm.runner.resume import FILES_KEY, record_files, resume_settings, sha256_of

FIXED = ("model", "dt_fs", "temperature_K", "replicas")
FILES = {"model": (), "pdb": ()}


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


@pytest.fixture
def stored(tmp_path):
    """A run.json as a new run writes it: model and PDB by absolute path and sha256."""
    model = _write(tmp_path / "model.pt", b"model A")
    pdb = _write(tmp_path / "in.pdb", b"ATOM")
    settings = {"pdb": pdb, "model": model, "steps": 100, "dt_fs": 4.0, "temperature_K": 300.0, "replicas": 1,
                "seed": 7}
    return record_files(settings, FILES)


def _current(**over):
    cur = {"pdb": None, "model": None, "steps": None, "dt_fs": 4.0, "temperature_K": 300.0, "replicas": 1,
           "seed": None, "threads": None}
    cur.update(over)
    return cur


def test_record_files_stores_absolute_paths_and_sha256(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "m.pt", b"weights")
    rec = record_files({"model": "m.pt", "priors": None}, {"model": (), "priors": ()})
    assert rec["model"] == str(tmp_path / "m.pt")
    assert rec[FILES_KEY] == {"model": {"path": str(tmp_path / "m.pt"),
                                        "sha256": hashlib.sha256(b"weights").hexdigest()}}


def test_a_folder_is_identified_by_its_members(tmp_path):
    for name in ("a.itp", "b.itp", "notes.txt"):
        _write(tmp_path / name, name.encode())
    before = sha256_of(str(tmp_path), ("a.itp", "b.itp"))
    _write(tmp_path / "notes.txt", b"changed")               # not a member: same identity
    assert sha256_of(str(tmp_path), ("a.itp", "b.itp")) == before
    _write(tmp_path / "b.itp", b"changed")
    assert sha256_of(str(tmp_path), ("a.itp", "b.itp")) != before


def test_settings_not_given_come_from_run_json(stored):
    values, record = resume_settings("OUT", stored, _current(), given=[], fixed=FIXED, files=FILES, needed=("model",))
    assert values["steps"] == 100 and values["seed"] == 7 and values["model"] == stored["model"]
    assert values["pdb"] == stored["pdb"] and "threads" not in values
    assert record == stored                                     # nothing to bring up to date


def test_a_moved_or_copied_identical_file_is_the_same_input(stored, tmp_path):
    moved = tmp_path / "elsewhere" / "renamed.pt"
    moved.parent.mkdir()
    os.replace(stored["model"], moved)
    values, record = resume_settings("OUT", stored, _current(model=str(moved), steps=200), given=["model", "steps"],
                                     fixed=FIXED, files=FILES, needed=("model",))
    assert values["model"] == str(moved)
    assert record[FILES_KEY]["model"]["path"] == str(moved) and record["model"] == str(moved)
    assert record[FILES_KEY]["model"]["sha256"] == stored[FILES_KEY]["model"]["sha256"]
    assert record["steps"] == 200


def test_a_same_named_different_file_is_refused_naming_both_hashes(stored, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    _write(other / "model.pt", b"model B")
    with pytest.raises(InputError) as err:
        resume_settings("OUT", stored, _current(model="model.pt"), given=["model"], fixed=FIXED, files=FILES,
                        needed=("model",))
    msg = str(err.value)
    assert "\n" not in msg
    assert hashlib.sha256(b"model B").hexdigest() in msg and stored[FILES_KEY]["model"]["sha256"] in msg


def test_every_disagreement_is_listed_at_once(stored, tmp_path):
    other = _write(tmp_path / "b.pt", b"model B")
    with pytest.raises(InputError) as err:
        resume_settings("OUT", stored, _current(model=other, dt_fs=2.0, temperature_K=350.0, replicas=1),
                        given=["model", "dt_fs", "temperature_K", "replicas"], fixed=FIXED, files=FILES,
                        options={"dt_fs": "--dt", "temperature_K": "--temperature"}, needed=("model",))
    msg = str(err.value)
    assert "\n" not in msg
    assert "--dt 2 (the run's: 4)" in msg and "--temperature 350 (the run's: 300)" in msg and "--model" in msg
    assert "replicas" not in msg                                # given and equal: fine


def test_a_needed_file_gone_or_changed_is_one_line_saying_what_to_give(stored):
    os.replace(stored["model"], stored["model"] + ".bak")
    with pytest.raises(InputError, match=r"is gone; give --model PATH .*sha256 "):
        resume_settings("OUT", stored, _current(), given=[], fixed=FIXED, files=FILES, needed=("model",))
    with open(stored["model"], "wb") as f:
        f.write(b"retrained")
    with pytest.raises(InputError, match="has changed since the run started"):
        resume_settings("OUT", stored, _current(), given=[], fixed=FIXED, files=FILES, needed=("model",))
    # the PDB is not needed on resume (the run maps its own cleaned.pdb): gone is fine unless given
    os.remove(stored["pdb"])
    os.replace(stored["model"] + ".bak", stored["model"])
    values, _ = resume_settings("OUT", stored, _current(), given=[], fixed=FIXED, files=FILES, needed=("model",))
    assert values["pdb"] == stored["pdb"]


def test_an_older_run_json_compares_paths_and_needs_steps(tmp_path):
    old = {"pdb": "in.pdb", "model": "model.pt", "dt_fs": 4.0, "temperature_K": 300.0, "replicas": 1}
    with pytest.raises(InputError, match="give --steps N"):
        resume_settings("OUT", old, _current(), given=[], fixed=FIXED, files=FILES)
    values, _ = resume_settings("OUT", old, _current(steps=50), given=["steps"], fixed=FIXED, files=FILES)
    assert values["model"] == "model.pt"
    with pytest.raises(InputError, match="--model other.pt"):
        resume_settings("OUT", old, _current(steps=50, model="other.pt"), given=["steps", "model"], fixed=FIXED,
                        files=FILES)


def test_open_run_dir_updates_run_json_only_when_there_is_something_to_do(stored, tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps(stored))
    (out / "checkpoint.chk").write_bytes(b"placeholder")
    monkeypatch.setattr("flashschnet.openmm.runner.directory.resumed_step", lambda out: 100)
    monkeypatch.setattr("flashschnet.openmm.runner.directory.check_run_files", lambda out: {})    # no files here
    open_run_dir(str(out), True, _current(steps=80), FIXED, given=["steps"], files=FILES)
    assert json.loads((out / "run.json").read_text())["steps"] == 100      # already past 80: untouched
    open_run_dir(str(out), True, _current(steps=300), FIXED, given=["steps"], files=FILES)
    assert json.loads((out / "run.json").read_text())["steps"] == 300
