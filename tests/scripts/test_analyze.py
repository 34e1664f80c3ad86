"""flashschnet.scripts.analyze (flashschnet-analyze's command line): --replicas read as replica numbers (in order,
without repeats; anything else is argparse's exit status 2), and a RUN_DIR that is not a run directory refused in
one line with exit status 2 before anything is written. The analysis through this command:
tests/openmm/test_analyze.py."""
from __future__ import annotations

import argparse
import os

import pytest

from tests.helpers.cli_errors import error_line
from flashschnet.scripts.analyze import build_parser, main, replica_list


def test_replicas_are_numbers_in_order_without_repeats(capsys):
    assert replica_list("2,0,2, 1,") == [2, 0, 1]
    for bad in ("", "a,1", "-1", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected replica numbers like 0,1"):
            replica_list(bad)
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["run", "--replicas", "0,x"])
    assert info.value.code == 2
    assert "argument --replicas: expected replica numbers like 0,1; got '0,x'" in capsys.readouterr().err


def test_a_run_dir_that_is_not_one_is_one_line_and_status_2(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main([str(missing), "--quiet"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-analyze")
    assert line == (f"flashschnet-analyze: error: {missing}: no such directory; give the --out directory of "
                    "flashschnet-simulate or flashschnet-martini"), line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty), "--out", str(tmp_path / "report"), "--quiet"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-analyze")
    assert f"{empty}: no trajectories (replica_NNN.dcd of flashschnet-simulate" in line, line
    assert sorted(os.listdir(tmp_path)) == ["empty"] and os.listdir(empty) == []
