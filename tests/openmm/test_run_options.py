"""flashschnet.openmm.run_options: the options of the commands that read a run directory checked against the run (on
a small run written here, tests/helpers/small_runs.py's): what the run is, in the messages; options for
parallel-tempering runs only, or for any other; replicas and temperatures the run must have; a reference of another
protein. Each refusal is one line: ``OPTION VALUE: RUN_DIR is/has ...; what to do``."""
from __future__ import annotations

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.run_options import (describe, not_for_tempering, reference_residues, replica_choice,
                                            tempering_only, temperature_choice)
from flashschnet.openmm.run_reader import RunDir
from tests.helpers.small_runs import write_run

LADDER = {300.0: "T300.0.dcd", 346.41: "T346.4.dcd", 400.0: "T400.0.dcd"}


@pytest.fixture
def rd(tmp_path):
    write_run(str(tmp_path / "run"))
    return RunDir(str(tmp_path / "run"))


def _refused(call, *args):
    with pytest.raises(InputError) as exc:
        call(*args)
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_what_a_run_is(rd, tmp_path):
    assert describe(rd, None) == "a run of 2 replicas (0, 1)"
    assert describe(rd, LADDER) == "a parallel-tempering run (3 temperatures, 300.0-400.0 K)"
    write_run(str(tmp_path / "m"), replicas=1, kind="martini", interval=100, dt_fs=20.0)
    assert describe(RunDir(str(tmp_path / "m")), None) == "a flashschnet-martini run (one trajectory)"


def test_options_of_one_kind_of_run_are_refused_on_the_other(rd):
    tempering_only([], rd, None, "never said")
    tempering_only(["--bootstrap"], rd, LADDER, "never said")
    assert _refused(tempering_only, ["--bootstrap", "--fes-temperatures"], rd, None, "MBAR needs one") == (
        f"--bootstrap: {rd.path} is not a parallel-tempering run but a run of 2 replicas (0, 1); MBAR needs one")
    not_for_tempering("--replicas", "0", rd, None, "never said")
    assert _refused(not_for_tempering, "--replicas", "0", rd, LADDER, "it is analysed per temperature") == (
        f"--replicas 0: {rd.path} is a parallel-tempering run (3 temperatures, 300.0-400.0 K); it is analysed per "
        "temperature; drop --replicas")


def test_a_replica_or_temperature_the_run_lacks_is_refused(rd):
    assert replica_choice("--replicas", [1, 0], rd) == [1, 0]
    message = _refused(replica_choice, "--replicas", [0, 5], rd)
    assert message.startswith(f"--replicas 0,5: {rd.path} has no replica 5 (it is a run of 2 replicas (0, 1))")
    assert message.endswith("choose among 0, 1")
    assert temperature_choice("--at", 346.44, rd, LADDER, "never said") == 346.41         # within 0.05 K: the rung
    assert "not a temperature of" in _refused(temperature_choice, "--at", 346.5, rd, LADDER, "never said")
    assert "300, 346.41, 400 K" in _refused(temperature_choice, "--at", 350.0, rd, LADDER, "never said")
    assert _refused(temperature_choice, "--at", 300.0, rd, None, "give --temperature") == (
        f"--at 300: {rd.path} is not a parallel-tempering run but a run of 2 replicas (0, 1); give --temperature")


def test_a_reference_of_another_protein_is_refused():
    reference_residues("run.pdb", ["MET", "HIE", "LYS"], "ref.pdb", ["MET", "HIS", "NLYS"])   # the same amino acids
    reference_residues("run.pdb", ["ACE", "ALA"], "ref.pdb", ["ACE", "ALA"])                   # no code: by name
    assert _refused(reference_residues, "run.pdb", ["MET", "GLY"], "ref.pdb", ["MET"]) == (
        "run.pdb: 2 residues, but the reference ref.pdb has 1; give a structure of the run's protein (its cleaned.pdb)")
    assert _refused(reference_residues, "run.pdb", ["MET", "LYS"], "ref.pdb", ["MET", "ARG"], "fix it") == (
        "run.pdb: residue 2 is LYS, but the reference ref.pdb has ARG there; fix it")
