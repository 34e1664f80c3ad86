"""flashschnet-analyze when its report cannot be written: a read-only --out is one line with exit
status 2 before any work; a figure that cannot be written (full disk, I/O error) is one line with exit status 5 or
7, and leaves no truncated figure: the report is written whole or not at all, a previous one stays complete."""
from __future__ import annotations

import errno
import os
import shutil

import pytest

from flashschnet.scripts.analyze import main as analyze
from tests.helpers.faults import mount_tmpfs, unmount

REPORT = {"report.md", "report.json", "energy.png", "structure.png", "contacts.png", "fes.png"}


@pytest.fixture(scope="module")
def run(tiny_run):
    """A tiny flashschnet-simulate run (one replica, 20 steps, a frame every 10; conftest's, shared)."""
    return tiny_run


def _error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("flashschnet-analyze: ")
             and not ln.startswith(("flashschnet-analyze: note:", "flashschnet-analyze: warning:"))]
    assert len(lines) == 1 and lines[0].startswith("flashschnet-analyze: error: "), err
    return lines[0]


def test_a_figure_that_cannot_be_written_leaves_no_partial_report(run, tmp_path, capsys, write_faults):
    out = tmp_path / "report"
    write_faults.fail("energy.png", errno=errno.ENOSPC, limit=1000)   # Pillow's own open: the built-in one
    assert analyze([str(run), "--out", str(out), "--quiet"]) == 5
    line = _error_line(capsys.readouterr().err)
    assert f"writing the analysis report {out / 'energy.png'} failed: No space left on device (ENOSPC)" in line, line
    assert "free space" in line
    assert os.listdir(out) == []                 # no truncated energy.png, no staging folder, no half report
    write_faults._monkeypatch.undo()

    assert analyze([str(run), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert set(os.listdir(out)) == REPORT
    before = {n: (out / n).read_bytes() for n in REPORT}
    write_faults.fail("fes.png", errno=errno.EIO, limit=0)
    assert analyze([str(run), "--out", str(out), "--stride", "2", "--force", "--quiet"]) == 7
    line = _error_line(capsys.readouterr().err)
    assert f"{out / 'fes.png'} failed: Input/output error (EIO)" in line, line
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before    # the previous report, whole


def test_a_read_only_out_is_one_line_before_the_work(run, tmp_path, capsys, monkeypatch):
    """On a read-only tmpfs where mounting is permitted (also the default --out inside a read-only run
    directory), else with os.makedirs failing as it does there."""
    ro = tmp_path / "ro"
    why = mount_tmpfs(ro, size="64k", read_only=True)
    if why:                                       # the same failure, injected
        real = os.makedirs

        def read_only_makedirs(name, *args, **kwargs):
            if str(name).startswith(str(ro)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(name))
            return real(name, *args, **kwargs)

        ro.mkdir(exist_ok=True)
        monkeypatch.setattr(os, "makedirs", read_only_makedirs)
    try:
        assert analyze([str(run), "--out", str(ro / "report"), "--quiet"]) == 2
        line = _error_line(capsys.readouterr().err)
        assert f"--out {ro / 'report'}: cannot create the directory (Read-only file system)" in line, line
        if why:
            return
        unmount(ro)                               # a run directory on a file system that then turns read-only
        assert mount_tmpfs(ro, size="1m") is None
        shutil.copytree(run, ro / "run")
        import subprocess

        assert subprocess.run(["mount", "-o", "remount,ro", str(ro)]).returncode == 0
        assert analyze([str(ro / "run"), "--quiet"]) == 2
        line = _error_line(capsys.readouterr().err)
        assert f"--out {ro / 'run' / 'analysis'}: cannot create the directory (Read-only file system)" in line, line
    finally:
        if not why:
            unmount(ro)
