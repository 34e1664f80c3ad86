"""flashschnet.scripts.convert (flashschnet-convert's command line): OUTPUT is checked before INPUT is read (an
existing file without --force, a folder: one line, exit 2, nothing touched), and an OUTPUT that cannot be written is
one line (exit 5) that leaves no partial file. The converter itself, and the command on the real mlcg files:
tests/model/test_convert.py."""
from __future__ import annotations

import errno
import os

import pytest

import flashschnet.atomic as atomic
from tests.helpers.cli_errors import error_line
from flashschnet.scripts.convert import main


def test_output_is_checked_before_the_input_is_read(tmp_path, capsys):
    """INPUT does not exist here: the refusals below are OUTPUT's, and come first."""
    missing = str(tmp_path / "missing.pt")
    out = tmp_path / "out.pt"
    out.write_bytes(b"an earlier model")
    assert main([missing, str(out)]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-convert")
    assert line == f"flashschnet-convert: error: {out}: exists; choose another OUTPUT or pass --force", line
    assert out.read_bytes() == b"an earlier model"
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main([missing, str(folder), "--force"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-convert")
    assert f"OUTPUT {folder}: is a directory; give a file name" in line, line
    assert sorted(os.listdir(tmp_path)) == ["folder", "out.pt"] and os.listdir(folder) == []
    assert main([missing, str(tmp_path / "new.pt")]) == 2      # then INPUT: one line, no OUTPUT written
    line = error_line(capsys.readouterr().err, "flashschnet-convert")
    assert f"{missing}: model file not found" in line and not (tmp_path / "new.pt").exists()


def test_convert_output_that_cannot_be_written(tmp_path, capsys, write_faults):
    from tests.helpers.real_oracles import S_MODEL

    from flashschnet.scripts.convert import main as convert

    if not S_MODEL.exists():
        pytest.skip(f"{S_MODEL} not found")
    out = tmp_path / "s.pt"
    write_faults.fail("s.pt.tmp", module=atomic, errno=errno.ENOSPC, limit=4096)
    assert convert([str(S_MODEL), str(out)]) == 5
    line = error_line(capsys.readouterr().err, "flashschnet-convert")
    assert f"writing the model checkpoint {out} failed: No space left on device" in line, line
    assert "choose another OUTPUT" in line
    assert os.listdir(tmp_path) == []                          # no partial s.pt, no s.pt.tmp
