"""Writes that fail (flashschnet.atomic): files written whole or not at all, the previous file kept, the one-line
OutputError with the status of its errno -- checked with injected faults (tests/helpers/faults.py), so every machine
runs them. The exit status of each errno and the OutputError itself (flashschnet.errors): tests/model/test_errors.py."""
from __future__ import annotations

import errno
import os

import pytest

import flashschnet.atomic as atomic
from flashschnet.errors import EXIT_IO_ERROR, EXIT_NO_SPACE, EXIT_NOT_WRITABLE, OutputError


@pytest.mark.parametrize("code, status", [(errno.ENOSPC, EXIT_NO_SPACE), (errno.EIO, EXIT_IO_ERROR)])
def test_atomic_write_that_fails_keeps_the_old_file_and_leaves_no_tmp(tmp_path, write_faults, code, status):
    path = tmp_path / "run.json"
    path.write_text("old, complete")
    write_faults.fail("run.json.tmp", module=atomic, errno=code, limit=10)
    with pytest.raises(OutputError) as info:
        with atomic.atomic_write(path, "w", what="writing the run settings") as f:
            f.write("new " * 100)
    assert info.value.status == status and info.value.filename == str(path)
    assert path.read_text() == "old, complete"
    assert sorted(os.listdir(tmp_path)) == ["run.json"]


def test_atomic_write_whose_fsync_fails(tmp_path, monkeypatch):
    path = tmp_path / "a.bin"

    def broken_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(OutputError) as info:
        with atomic.atomic_write(path, "wb") as f:
            f.write(b"data")
    assert info.value.status == EXIT_IO_ERROR
    assert os.listdir(tmp_path) == []


def test_atomic_write_that_cannot_open_the_file(tmp_path, write_faults):
    write_faults.fail("a.bin.tmp", module=atomic, errno=errno.EACCES, on_open=True)
    with pytest.raises(OutputError) as info:
        with atomic.atomic_write(tmp_path / "a.bin", "wb") as f:
            f.write(b"data")
    assert info.value.status == EXIT_NOT_WRITABLE and os.listdir(tmp_path) == []


def test_atomic_write_other_errors_pass_and_clean_up(tmp_path):
    with pytest.raises(KeyError):
        with atomic.atomic_write(tmp_path / "a.bin", "wb") as f:
            f.write(b"data")
            raise KeyError("boom")
    assert os.listdir(tmp_path) == []


def test_staged_files_all_or_nothing(tmp_path, write_faults):
    out = tmp_path / "report"
    out.mkdir()
    (out / "fig.png").write_bytes(b"old figure")
    (out / "report.md").write_text("old report")
    write_faults.fail("fig.png", errno=errno.ENOSPC, limit=3)          # builtins.open: as a library would open it
    with pytest.raises(OutputError) as info:
        with atomic.staged_files(out, what="writing the analysis report") as stage:
            (open(os.path.join(stage, "report.md"), "w")).close()
            with open(os.path.join(stage, "fig.png"), "wb") as f:
                f.write(b"new figure bytes")
    assert info.value.status == EXIT_NO_SPACE
    assert info.value.filename == str(out / "fig.png"), info.value.filename     # the file being written is named
    assert sorted(os.listdir(out)) == ["fig.png", "report.md"]               # no staging folder left
    assert (out / "fig.png").read_bytes() == b"old figure" and (out / "report.md").read_text() == "old report"

    with atomic.staged_files(out) as stage:                                 # and when nothing fails
        for name in ("fig.png", "report.md"):
            with open(os.path.join(stage, name), "w") as f:
                f.write("new")
    assert sorted(os.listdir(out)) == ["fig.png", "report.md"]
    assert (out / "fig.png").read_text() == "new"
