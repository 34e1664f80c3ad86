"""Run directories under damage: every reader refuses in one line or notes it, never silently guesses.

For each file of two small real runs -- a flashschnet-simulate run (``tiny_run``) and a parallel-tempering run
(``tempering_run``) -- a seeded generator draws cases (every file and every damage at least once): the file
deleted, emptied, truncated at a drawn byte (two points), 16 bytes overwritten with 0xFF, or replaced by the other
run's. Each case runs flashschnet-analyze, flashschnet-backmap (up to where it would rebuild the frames) and
flashschnet-simulate --resume on a fresh copy, and checks (tests/helpers/run_damage.py): no traceback; the input
files unchanged (a resume may rewrite a file it names); exit 2 with one line naming the file, or exit 0 with a note
naming it (and the report's ``input_warnings``), or exit 0 with exactly the undamaged run's outcome. The MARTINI run
and ``flashschnet-compare --analyse-only`` are fuzzed the same way in tests/openmm/test_compare.py (on its
comparison fixture, the one MARTINI run of the suite). docs/reliability.md lists what each damage gets.
"""
from __future__ import annotations

import pytest

from tests.helpers.run_damage import Damage, Reader, pick_cases, quiet_readers

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PLAIN_FILES = ["run.json", "topology.pdb", "log.csv", "replica_000.dcd", "checkpoint.chk", "cleaned.pdb"]
TEMPERING_FILES = PLAIN_FILES + ["replica_001.dcd", "replica_002.dcd", "T300.0.dcd", "T346.4.dcd", "T400.0.dcd",
                                 "walkers.csv", "exchanges.csv", "blocks/block_000.s40.chk"]
#: cases drawn per run (seeded: the same on every run of the suite)
CASES = {"plain": 16, "tempering": 24}
SEED = 40

READERS = [
    Reader("analyze", "analyze", lambda run, out: [run, "--out", out, "--quiet"],
           report=lambda run, out: out / "report.json"),
    Reader("backmap", "backmap", lambda run, out: [run, "--out", out, "--quiet", "--side-chains", "templates"]),
    Reader("resume", "simulate", lambda run, out: ["--resume", "--out", run, "--quiet", "--threads", "1"],
           rewrites=True),
]


def _donors(files, other):
    """The other run's file for each file: the same name, or its first trajectory (DCD), log (CSV) or checkpoint."""
    like = {".dcd": "replica_000.dcd", ".csv": "log.csv", ".chk": "checkpoint.chk"}
    out = {}
    for f in files:
        same = other / f
        out[f] = same if same.is_file() else other / like.get(same.suffix, f)
    return out


@pytest.fixture(scope="module")
def damaged(tiny_run, tempering_run, tmp_path_factory, request):
    mp = pytest.MonkeyPatch()
    captured = {}
    quiet_readers(mp, captured)
    work = tmp_path_factory.mktemp("damaged")
    runs = {"plain": Damage("plain", tiny_run, work, READERS, _donors(PLAIN_FILES, tempering_run), captured),
            "tempering": Damage("tempering", tempering_run, work, READERS, _donors(TEMPERING_FILES, tiny_run),
                                captured)}
    for name, files in (("plain", PLAIN_FILES), ("tempering", TEMPERING_FILES)):
        held = sorted(str(p.relative_to(runs[name].source)) for p in runs[name].source.rglob("*") if p.is_file())
        assert held == sorted(files), f"the {name} run's files changed: fuzz the new ones too ({held})"
        runs[name].baseline()
    yield runs
    mp.undo()


@pytest.mark.parametrize("run, files", [("plain", PLAIN_FILES), ("tempering", TEMPERING_FILES)])
def test_every_reader_refuses_or_notes_a_damaged_file(damaged, run, files):
    fuzz = damaged[run]
    cases = pick_cases(files, CASES[run], SEED)
    assert {f for f, _, _ in cases} == set(files) and {d for _, d, _ in cases} >= {"delete", "empty", "truncate",
                                                                                    "overwrite", "other"}
    ran = sum(fuzz.check(f, d, seed) for f, d, seed in cases)
    assert ran >= len(READERS) * (len(cases) - len(files)), fuzz.log      # few cases without a donor
