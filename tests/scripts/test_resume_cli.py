"""``flashschnet-simulate --resume --out DIR``: the run's own settings, its input files by content, "nothing to do"
(issue 27, item 1 and the "nan ns/day" of item 6)."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from conftest import EXAMPLES
from flashschnet.openmm.dcd import read_dcd
from flashschnet.scripts.simulate import main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = EXAMPLES / "trpcage_placeholder.pt"
OTHER_MODEL = EXAMPLES / "trpcage_trained.pt"
COMMON = ["--report-interval", "10", "--seed", "11", "--quiet", "--threads", "1"]
OUTPUTS = ("replica_000.dcd", "log.csv", "checkpoint.chk", "run.json")


def _outputs(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def test_resume_finds_the_model_by_content_not_by_name(tmp_path, monkeypatch, capsys):
    """The issue's reproduction: a resume from another working directory whose examples/MODEL is a different
    model is refused naming both sha256 sums; the model moved to another folder resumes bitwise."""
    first = tmp_path / "first"
    (first / "examples").mkdir(parents=True)
    shutil.copy(MODEL, first / "examples" / "model.pt")
    monkeypatch.chdir(first)
    assert main([PDB, "--model", "examples/model.pt", "--steps", "20", "--out", str(tmp_path / "split"), *COMMON]) == 0
    straight = tmp_path / "straight"
    assert main([PDB, "--model", str(MODEL), "--steps", "40", "--out", str(straight), *COMMON]) == 0
    capsys.readouterr()

    second = tmp_path / "second"                    # another folder, its examples/model.pt another model
    (second / "examples").mkdir(parents=True)
    shutil.copy(OTHER_MODEL, second / "examples" / "model.pt")
    monkeypatch.chdir(second)
    before = _outputs(tmp_path / "split")
    assert main(["--resume", "--out", str(tmp_path / "split"), "--model", "examples/model.pt", "--steps", "40",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashschnet-simulate: error:")
    run = json.loads(before["run.json"])
    assert run["files"]["model"]["sha256"] in err[0] and str(first / "examples" / "model.pt") in err[0]
    assert hashlib.sha256(OTHER_MODEL.read_bytes()).hexdigest() in err[0]
    assert _outputs(tmp_path / "split") == before                    # nothing touched

    # the original moved away: a plain resume says where it was and what to give ...
    moved = tmp_path / "moved" / "renamed.pt"
    moved.parent.mkdir()
    shutil.move(first / "examples" / "model.pt", moved)
    assert main(["--resume", "--out", str(tmp_path / "split"), "--steps", "40", "--quiet"]) == 2
    assert "is gone; give --model PATH" in capsys.readouterr().err
    # ... and given at its new place (every other setting from run.json) it continues bitwise
    assert main(["--resume", "--out", str(tmp_path / "split"), "--model", str(moved), "--steps", "40", "--quiet"]) == 0
    split = tmp_path / "split"
    a, b = read_dcd(str(split / "replica_000.dcd")), read_dcd(str(straight / "replica_000.dcd"))
    assert a.shape == b.shape == (5, 97, 3) and np.array_equal(a, b)      # the header's creation time differs
    strip = lambda text: [row.rsplit(",", 1)[0] for row in text.splitlines()]   # noqa: E731 (the speed column)
    assert strip((split / "log.csv").read_text()) == strip((straight / "log.csv").read_text())
    assert json.loads((split / "run.json").read_text())["files"]["model"]["path"] == str(moved)
    capsys.readouterr()

    # long enough already: nothing to do, nothing written, no "nan ns/day"
    before = _outputs(split)
    for extra in ([], ["--steps", "30"]):
        assert main(["--resume", "--out", str(split), "--quiet", *extra]) == 0
        err = capsys.readouterr().err
        assert "nothing to do" in err and "at step 40" in err and "nan" not in err
    assert _outputs(split) == before


def test_resume_lists_every_disagreement_in_one_line(tmp_path, capsys):
    out = tmp_path / "r"
    assert main([PDB, "--model", str(MODEL), "--steps", "10", "--out", str(out), *COMMON]) == 0
    capsys.readouterr()
    assert main(["--resume", "--out", str(out), "--steps", "20", "--dt", "2", "--temperature", "310",
                 "--replicas", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    for part in ("--dt 2 (the run's: 4)", "--temperature 310 (the run's: 300)", "--replicas 2 (the run's: 1)"):
        assert part in err[0]


@pytest.mark.parametrize("args, message", [
    (["--steps", "10"], "give the PDB file and --model for a new run"),
    ([PDB, "--steps", "10"], "give --model for a new run"),
    ([PDB, "--model", str(MODEL), "--temperatures", "300,320", "--temperature", "350", "--steps", "10"],
     "--temperature 350 with --temperatures"),
])
def test_what_a_new_run_needs_is_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "new"
    assert main([*args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists() or not any(out.iterdir())
