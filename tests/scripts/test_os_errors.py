"""flashschnet-simulate's writes: every OS error while writing is one line with its own
exit status: 5 no space left, 6 not allowed to write, 7 another I/O error. A run whose checkpoint, trajectory or log
cannot be written keeps its last good checkpoint, leaves no ``checkpoint.chk.tmp``, and ``--resume`` continues it
bitwise once the cause is gone. Faults are injected into the writers (tests/helpers/faults.py: every machine), and
once for real: a small tmpfs that fills up during a run (skipped, with the reason, where mounting is not permitted).
The other commands' outputs that cannot be written: test_convert.py, test_doctor.py, test_benchmark.py; ``finish``,
which makes any OS error that one line: test__cli.py."""
from __future__ import annotations

import csv
import errno
import os

import numpy as np
import pytest

import flashschnet.atomic as atomic
from tests.conftest import EXAMPLES
from flashschnet.openmm.dcd import read_dcd, read_header
from flashschnet.openmm.reporters import read_checkpoint
from flashschnet.scripts.simulate import main as simulate
from tests.helpers.faults import mount_tmpfs, unmount
from tests.helpers.cli_errors import error_line

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
# frames every 10 steps, checkpoints every 20 (step 0's first); --report-interval always explicit (its default
# depends on --steps)
COMMON = ["--report-interval", "10", "--checkpoint-interval", "20", "--seed", "5", "--quiet", "--threads", "1"]
STEPS = 40


def _simulate(out, *extra, steps=STEPS):
    return simulate([PDB, "--model", MODEL, "--steps", str(steps), "--out", str(out), *COMMON, *extra])


def _log_rows(out):
    """log.csv without its speed column (wall-clock dependent)."""
    with open(out / "log.csv", newline="") as f:
        return [row[:5] for row in csv.reader(f)]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The uninterrupted run the interrupted ones must repeat bitwise."""
    out = tmp_path_factory.mktemp("straight") / "run"
    assert _simulate(out) == 0
    return out


def _assert_same_run(out, straight):
    assert np.array_equal(read_dcd(str(out / "replica_000.dcd")), read_dcd(str(straight / "replica_000.dcd")))
    assert _log_rows(out) == _log_rows(straight)
    assert read_checkpoint(str(out / "checkpoint.chk"))[0]["step"] == STEPS
    assert not [n for n in os.listdir(out) if n.endswith(".tmp") or n.startswith(".partial")]


def test_checkpoint_that_cannot_be_written_keeps_the_last_one_and_resumes_bitwise(straight, tmp_path, capsys,
                                                                                   write_faults):
    """The issue's reproduction: the disk fills while the checkpoint of step 20 is written."""
    out = tmp_path / "run"
    write_faults.fail("checkpoint.chk.tmp", module=atomic, errno=errno.ENOSPC, limit=100, nth=2)
    assert _simulate(out) == 5
    line = error_line(capsys.readouterr().err)
    for needle in (f"writing the checkpoint {out / 'checkpoint.chk'} failed: No space left on device (ENOSPC)",
                   "free space", "--resume", "the last good checkpoint (step 0) is kept"):
        assert needle in line, (needle, line)
    assert not (out / "checkpoint.chk.tmp").exists()                      # no stale temporary file
    assert read_checkpoint(str(out / "checkpoint.chk"))[0]["step"] == 0   # the previous checkpoint, whole

    write_faults._monkeypatch.undo()                                      # the space is free again
    assert _simulate(out, "--resume") == 0, capsys.readouterr().err
    _assert_same_run(out, straight)


def test_trajectory_that_cannot_be_written_is_one_error_and_resumes_bitwise(straight, tmp_path, capsys,
                                                                            write_faults):
    """A frame write that fails (here: the file system turned read-only, EROFS) raises once, naming the DCD
    file -- not two chained tracebacks -- and a partial frame is cut off by the resume."""
    head = read_header(str(straight / "replica_000.dcd"))
    out = tmp_path / "run"
    write_faults.fail("replica_000.dcd", module=atomic, errno=errno.EROFS,
                      limit=head.data_offset + int(2.5 * head.frame_bytes))
    assert _simulate(out) == 6
    line = error_line(capsys.readouterr().err)
    assert f"writing the trajectory {out / 'replica_000.dcd'} failed: Read-only file system (EROFS)" in line, line
    assert "make it writable" in line and "--resume" in line and "is kept" in line
    assert write_faults.failing and write_faults.failing[0].failed

    write_faults._monkeypatch.undo()
    assert _simulate(out, "--resume") == 0, capsys.readouterr().err
    _assert_same_run(out, straight)


def test_log_that_cannot_be_written_is_one_error_and_resumes_bitwise(straight, tmp_path, capsys, write_faults):
    """An I/O error (EIO) in the log after its second row: exit status 7."""
    header_and_rows = sum(len(",".join(r)) + 2 for r in _log_rows(straight)[:2])
    out = tmp_path / "run"
    write_faults.fail("log.csv", module=atomic, errno=errno.EIO, limit=header_and_rows + 30)
    assert _simulate(out) == 7
    line = error_line(capsys.readouterr().err)
    assert f"writing the log {out / 'log.csv'} failed: Input/output error (EIO)" in line, line
    assert "check the disk" in line and "--resume" in line

    write_faults._monkeypatch.undo()
    assert _simulate(out, "--resume") == 0, capsys.readouterr().err
    _assert_same_run(out, straight)


def test_run_settings_that_cannot_be_written(tmp_path, capsys, write_faults):
    """Before the first checkpoint there is nothing to resume: the line says to start again."""
    out = tmp_path / "run"
    write_faults.fail("run.json.tmp", module=atomic, errno=errno.EACCES, on_open=True)
    assert _simulate(out, steps=10) == 6
    line = error_line(capsys.readouterr().err)
    assert f"writing the run settings {out / 'run.json'} failed: Permission denied (EACCES)" in line, line
    assert "--resume" not in line and "run the command again" in line
    assert not (out / "run.json").exists() and not (out / "run.json.tmp").exists()


def test_a_real_disk_that_fills_up_during_a_run(straight, tmp_path, capsys, monkeypatch):
    """A 1 MiB tmpfs whose free space a filler file takes right after the first checkpoint: the run stops at the
    next write that needs space (one line, exit 5, no checkpoint.chk.tmp); with the filler removed, --resume
    finishes it bitwise as the uninterrupted run."""
    from flashschnet.openmm.reporters.checkpoint import CheckpointReporter

    disk = tmp_path / "disk"
    why = mount_tmpfs(disk, size="1m")
    if why:
        pytest.skip(why)
    try:
        out, filler = disk / "run", disk / "filler"
        save = CheckpointReporter.save

        def save_then_fill_the_disk(self, simulation, blob=None):
            save(self, simulation, blob)
            if not filler.exists():
                with open(filler, "wb", buffering=0) as f:    # every free block, 4 KiB at a time
                    try:
                        while True:
                            f.write(b"\0" * 4096)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC

        monkeypatch.setattr(CheckpointReporter, "save", save_then_fill_the_disk)
        assert _simulate(out) == 5
        line = error_line(capsys.readouterr().err)
        assert "No space left on device (ENOSPC)" in line and str(out) in line, line
        assert "the last good checkpoint (step 0) is kept" in line, line
        assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
        monkeypatch.undo()
        os.remove(filler)
        assert _simulate(out, "--resume") == 0, capsys.readouterr().err
        _assert_same_run(out, straight)
    finally:
        unmount(disk)


def test_parallel_tempering_file_that_cannot_be_written_resumes_bitwise(tmp_path, capsys, write_faults):
    """The ensemble's own writers (exchanges.csv here, an I/O error after its first rows): one line, exit 7, and
    the resume repeats the uninterrupted run."""
    from flashschnet.tiny import tiny_model

    tiny = tiny_model(PDB, str(tmp_path / "tiny.pt"))
    args = lambda out, *extra: [PDB, "--model", str(tiny), "--steps", "40", "--out", str(out),  # noqa: E731
                                "--temperatures", "300:420:4", "--blocks", "2", "--exchange-interval", "5",
                                "--report-interval", "10", "--checkpoint-interval", "20", "--seed", "5", "--quiet",
                                "--threads", "1", *extra]
    straight, out = tmp_path / "straight", tmp_path / "run"
    assert simulate(args(straight)) == 0
    capsys.readouterr()
    write_faults.fail("exchanges.csv", module=atomic, errno=errno.EIO, limit=400)
    assert simulate(args(out)) == 7
    line = error_line(capsys.readouterr().err)
    assert f"writing {out / 'exchanges.csv'} failed: Input/output error (EIO)" in line, line
    assert "--resume" in line and "is kept" in line
    write_faults._monkeypatch.undo()
    assert simulate(args(out, "--resume")) == 0, capsys.readouterr().err
    names = sorted(n for n in os.listdir(straight) if n.endswith(".dcd"))
    assert names == sorted(n for n in os.listdir(out) if n.endswith(".dcd")) and len(names) == 8
    for name in names:
        assert np.array_equal(read_dcd(str(straight / name)), read_dcd(str(out / name))), name
    for name in ("exchanges.csv", "walkers.csv"):
        assert (straight / name).read_text() == (out / name).read_text()
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
