"""flashschnet.scripts.distill (flashschnet-distill's command line): --out is checked before the teacher samples a
frame (an existing file without --force, a folder, one of its own inputs even with --force: one line, exit status
2, nothing touched), and the options'
limits are argparse's exit status 2. Distilling through this command: tests/openmm/test_distill.py."""
from __future__ import annotations

import os

import pytest

from tests.conftest import EXAMPLES
from tests.helpers.cli_errors import error_line
from flashschnet.scripts.distill import main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")


def test_out_is_checked_before_any_sampling(tmp_path, capsys):
    out = tmp_path / "inner.pt"
    out.write_bytes(b"an earlier inner model")
    assert main([MODEL, PDB, "--out", str(out)]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-distill")
    assert line == f"flashschnet-distill: error: --out {out}: exists; choose another file or pass --force", line
    assert out.read_bytes() == b"an earlier inner model"
    assert main([MODEL, PDB, "--out", str(tmp_path), "--force"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-distill")
    assert f"--out {tmp_path}: is a directory; give a file name" in line, line
    assert os.listdir(tmp_path) == ["inner.pt"]


def test_out_that_is_an_input_is_refused_even_with_force(tmp_path, capsys):
    import shutil

    teacher = tmp_path / "teacher.pt"
    shutil.copyfile(MODEL, teacher)
    before = teacher.read_bytes()
    for out, what in ((teacher, "--model (the teacher)"), (tmp_path / "." / "teacher.pt", "--model (the teacher)")):
        assert main([str(teacher), PDB, "--out", str(out), "--force"]) == 2
        line = error_line(capsys.readouterr().err, "flashschnet-distill")
        assert f"is the {what} itself" in line and "--force or not" in line, line
    assert teacher.read_bytes() == before
    pdb = tmp_path / "protein.pdb"
    shutil.copyfile(PDB, pdb)
    assert main([str(teacher), str(pdb), "--out", str(pdb), "--force"]) == 2
    assert "is the PDB itself" in error_line(capsys.readouterr().err, "flashschnet-distill")


@pytest.mark.parametrize("option, says", [
    (["--frames", "1"], "argument --frames: must be >= 2, got 1"),
    (["--holdout", "1"], "argument --holdout: must be a finite number > 0 and < 1, got '1'"),
    (["--bond-degree", "7"], "argument --bond-degree: must be between 0 and 6, got 7"),
])
def test_option_limits_are_usage_errors(tmp_path, capsys, option, says):
    with pytest.raises(SystemExit) as info:
        main([MODEL, PDB, "--out", str(tmp_path / "inner.pt"), *option])
    assert info.value.code == 2 and says in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
