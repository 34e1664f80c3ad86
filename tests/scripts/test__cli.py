"""flashschnet.scripts._cli: ``finish``, which turns a command's outcome into its exit status and one line on
stderr -- here any OS error while writing (also one that is not ours, chained under another exception): its file,
reason and status 5, 6 or 7, and where a run directory stands (the last good checkpoint's step, or that the run
must start again). The one error line of a failed command (``error_line``, shared by the other commands' tests of
that line): tests/helpers/cli_errors.py."""
from __future__ import annotations

import errno
import os

import pytest

from tests.helpers.cli_errors import error_line


def test_finish_makes_any_os_error_one_line_and_says_where_the_run_stands(tmp_path, capsys):
    """Also an OSError that is not one of ours (a library's, chained under its RuntimeError): its file, reason
    and status; with a run directory: the last good checkpoint's step, or that the run must start again."""
    import json
    import struct

    from flashschnet.openmm.reporters import CHECKPOINT_MAGIC
    from flashschnet.scripts._cli import finish

    def job(echo):
        try:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/data/frames.bin")
        except OSError as exc:
            raise RuntimeError("[enforce fail] write failed") from exc

    def line(**kwargs):
        status = finish("prog", job, str, **kwargs)
        return status, error_line(capsys.readouterr().err, "prog")

    status, text = line()
    assert status == 5 and text.startswith("prog: error: /data/frames.bin: Disk quota exceeded (EDQUOT); free space")
    assert text.endswith("then run the command again")
    run = tmp_path / "run"
    run.mkdir()
    assert line(run_dir=str(run))[1].endswith("then run the command again")        # nothing there yet
    (run / "run.json").write_text("{}")
    assert f"no checkpoint was written yet: then remove {run}" in line(run_dir=str(run))[1]
    header = json.dumps({"step": 120}).encode()
    (run / "checkpoint.chk").write_bytes(CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header)
    assert line(run_dir=str(run))[1].endswith("then continue with --resume: the last good checkpoint (step 120) "
                                              "is kept")
    with pytest.raises(KeyError):                              # anything else is not turned into a status
        finish("prog", lambda echo: {}["x"], str)


@pytest.mark.parametrize("command, argv", [("compare", []), ("simulate", []), ("distill", []), ("backmap", []),
                                           ("analyze", []), ("martini", []), ("convert", []), ("train", ["md"]),
                                           ("simulate", ["--no-such-option"])])
def test_a_usage_error_is_one_line(command, argv, capsys):
    """A missing required argument or an unknown option: one line naming the command and --help, exit status 2
    (argparse printed its usage block above it)."""
    import importlib

    main = importlib.import_module(f"flashschnet.scripts.{command}").main
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    prog = " ".join([f"flashschnet-{command}", *argv[:1]]) if command == "train" else f"flashschnet-{command}"
    assert info.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"{prog}: error: ") and err[0].endswith(f"({prog} --help: the options)"), err


@pytest.mark.parametrize("command", ["convert", "train", "benchmark"])
def test_an_output_that_is_its_own_input_is_refused(command, tmp_path, capsys):
    """convert's OUTPUT, train md's and benchmark's --out that is one of their inputs (by another spelling too): one
    line, exit 2, --force or not, the input unchanged."""
    import importlib
    import shutil

    from tests.conftest import EXAMPLES

    main = importlib.import_module(f"flashschnet.scripts.{command}").main
    src = {"convert": EXAMPLES / "trpcage_trained.pt", "train": EXAMPLES / "1L2Y_trpcage.pdb",
           "benchmark": EXAMPLES / "trpcage_trained.pt"}[command]
    given = tmp_path / src.name
    shutil.copyfile(src, given)
    same = str(tmp_path / "." / src.name)
    argv, what = {"convert": ([str(given), same, "--force"], "OUTPUT"),
                  "train": (["md", str(given), "--out", same, "--frames", "1"], "--out"),
                  "benchmark": (["--model", str(given), "--out", same], "--out")}[command]
    before = given.read_bytes()
    assert main(argv) == 2
    line = error_line(capsys.readouterr().err, f"flashschnet-{command}")
    assert line.startswith(f"flashschnet-{command}: error: {what} {same} is the ") and "--force or not" in line, line
    assert given.read_bytes() == before
