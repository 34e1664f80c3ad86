"""Every check before the long work (docs/reliability.md, "Every check before the long work"): a bad input that a
command can only find by loading its inputs -- the model's priors against the structure, the ladder of a tempering
run, the walkers of an ensemble, a priors file, an inner model's teacher, the force-field folder, the run to
backmap -- is one line and exit 2 within seconds, before any MD step, with nothing written into ``--out``.
flashschnet-compare's own (before MARTINI) and analyze's (``--temperature``) are in their tests."""
from __future__ import annotations

import importlib
import time

import pytest

from tests.conftest import EXAMPLES, SHARED
from tests.helpers.cli_errors import error_line

TRP, BPTI = str(EXAMPLES / "1L2Y_trpcage.pdb"), str(EXAMPLES / "4PTI_bpti.pdb")
TRAINED, PLACEHOLDER = str(EXAMPLES / "trpcage_trained.pt"), str(EXAMPLES / "trpcage_placeholder.pt")
RUN = ["--steps", "10", "--threads", "1", "--quiet"]

CASES = {
    "priors fitted to another structure": (
        "simulate", [BPTI, "--model", PLACEHOLDER, *RUN], "the model's priors were made for a 97-bead"),
    "a priors file that is not one": (
        "simulate", [TRP, "--model", TRAINED, "--priors", PLACEHOLDER, *RUN], "not a flashschnet prior set"),
    "a ladder that is not increasing": (
        "simulate", [TRP, "--model", TRAINED, "--temperatures", "300:200:3", *RUN], "strictly increasing"),
    "more workers than walkers": (
        "simulate", [TRP, "--model", TRAINED, "--replicas", "2", "--workers", "3", *RUN],
        "--workers 3: must be between 1 and the number of walkers"),
    "an inner model of another teacher": (
        "simulate", [TRP, "--model", PLACEHOLDER, "--mts", str(EXAMPLES / "trpcage_inner.pt"), "--outer-dt", "8", *RUN],
        "was distilled from"),
    "a force-field folder without MARTINI 3": (
        "martini", [TRP, "--forcefield-dir", str(EXAMPLES), "--steps", "10", "--quiet"], "missing MARTINI 3 parameter"),
    "no run to backmap": (
        "backmap", ["RUN_DIR", "--quiet"], "no such directory"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_is_one_line_before_any_step(case, tmp_path, capsys):
    command, argv, says = CASES[case]
    if command == "martini" and not (SHARED / "martini").exists():
        pytest.skip("../shared/ is absent (the MARTINI run's other inputs)")
    out = tmp_path / "out"
    argv = [str(tmp_path / "no_run") if a == "RUN_DIR" else a for a in argv] + ["--out", str(out)]
    main = importlib.import_module(f"flashschnet.scripts.{command}").main
    t0 = time.perf_counter()
    assert main(argv) == 2
    took = time.perf_counter() - t0
    line = error_line(capsys.readouterr().err, f"flashschnet-{command}")
    assert says in line, line
    assert took < 15, f"{case}: refused after {took:.1f} s"
    assert not (out / "run.json").exists() and not (out / "checkpoint.chk").exists()
