"""flashschnet.scripts.martini (flashschnet-martini's command line): --go alone turns the elastic network off (the
settings refuse the two together), options reach the settings under their own names, and the last line of a run.
Runs through this command: tests/openmm/martini/test_run.py; --fetch-forcefield: tests/openmm/martini/
test_forcefield.py."""
from __future__ import annotations

from types import SimpleNamespace

from tests.helpers.cli_errors import error_line
from flashschnet.openmm.martini.prepare import FORCEFIELD_FILES
from flashschnet.scripts.martini import main, summary


def test_go_alone_replaces_the_elastic_network(tmp_path, capsys):
    """With --go the run gets past the settings' checks to the missing PDB (were the elastic network left on, the
    settings would refuse --go); a bad --salt is refused by its name. One line, exit status 2, before martinize2."""
    ff = tmp_path / "ff"
    ff.mkdir()
    for name in FORCEFIELD_FILES:                    # present: the checks before the PDB look no further
        (ff / name).write_text("; present\n")
    missing = tmp_path / "missing.pdb"
    argv = [str(missing), "--forcefield-dir", str(ff), "--steps", "10", "--quiet"]
    assert main(argv + ["--out", str(tmp_path / "go"), "--go"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-martini")
    assert line == f"flashschnet-martini: error: {missing}: no such file; give a PDB file", line
    assert main(argv + ["--out", str(tmp_path / "salt"), "--salt", "7"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-martini")
    assert "--salt must be between 0 and 6 mol/L" in line and "got 7.0" in line, line


def test_the_last_line_says_what_was_done_and_how_fast():
    result = SimpleNamespace(nothing_to_do=False, steps_done=500, n_beads=4321, out="/runs/m3",
                             ns_per_day_per_replica=123.456)
    assert summary(result) == "done: 500 steps of 4321 MARTINI particles in /runs/m3 (123.5 ns/day)"
    result.ns_per_day_per_replica = float("nan")
    assert summary(result) == "done: 500 steps of 4321 MARTINI particles in /runs/m3 (no steps run)"
