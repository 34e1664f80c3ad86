"""flashschnet.scripts.compare (flashschnet-compare's command line): which options the command line gave, whatever
their values (what --analyse-only checks against the runs), and settings refused in one line with exit status 2
before any run starts. The comparison itself, through this command: tests/openmm/test_compare.py."""
from __future__ import annotations

from tests.conftest import EXAMPLES
from tests.helpers.cli_errors import error_line
from flashschnet.scripts.compare import build_parser, given_options, main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")


def test_given_options_are_those_on_the_command_line_whatever_their_values():
    argv = ["x.pdb", "--model", "m.pt", "--forcefield-dir", "ff", "--out", "o", "--go", "--compress", "auto",
            "--replicas", "8"]                       # --replicas 8 and --compress auto: the defaults, given
    assert given_options(build_parser(), argv) == ["--model", "--forcefield-dir", "--out", "--replicas", "--compress",
                                                   "--go"]
    assert given_options(build_parser(), ["x.pdb", "--model", "m.pt", "--forcefield-dir", "ff", "--out", "o",
                                          "--seed", "2", "--outer-dt", "8"]) == \
        ["--model", "--forcefield-dir", "--out", "--seed", "--outer-dt"]


def test_bad_settings_are_one_line_before_any_run(tmp_path, capsys):
    out = tmp_path / "cmp"
    base = [PDB, "--model", MODEL, "--forcefield-dir", str(tmp_path / "ff"), "--out", str(out), "--quiet"]
    assert main(base + ["--replicas", "2", "--workers", "3"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-compare")
    assert line == "flashschnet-compare: error: --workers 3: must be between 1 and --replicas (2)", line
    assert main(base + ["--analyse-only"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-compare")
    assert f"{out / 'martini'}: no run to analyse; run without --analyse-only first" in line, line
    assert not out.exists()
