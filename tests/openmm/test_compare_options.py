"""flashschnet.openmm.compare_options: ``flashschnet-compare --analyse-only``'s options checked against the runs it
re-analyses (a MARTINI and a FlashSchNet run directory written here, tests/helpers/small_runs.py's): every option
that differs from a run's run.json listed in one line, options that agree passing, the ones that only say how a run
computes noted as unused. (On a real comparison: tests/openmm/test_compare.py.)"""
from __future__ import annotations

import os

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.compare import CompareSettings
from flashschnet.openmm.compare_options import check_analyse_only
from tests.helpers.small_runs import write_run

MARTINI_DT_FS = 20.0


@pytest.fixture
def dirs(tmp_path):
    """The runs of a comparison with 2 frames each after step 0: MARTINI 80 steps of 20 fs, FlashSchNet 2 replicas
    of 20 steps of 4 fs; seed 1."""
    out = tmp_path / "cmp"
    write_run(str(out / "martini"), replicas=1, kind="martini", interval=40, dt_fs=MARTINI_DT_FS,
              cfg={"seed": 1, "go": False, "platform": "CPU"})
    write_run(str(out / "flashschnet"), replicas=2, interval=10, dt_fs=4.0, cfg={"seed": 1, "platform": "Reference"})
    return {"martini": str(out / "martini"), "flashschnet": str(out / "flashschnet")}


def _settings(out, **kw):
    return CompareSettings(pdb="a.pdb", model="m.pt", forcefield_dir="ff", out=out, **kw)


def test_options_that_differ_from_the_runs_are_listed_in_one_line(dirs):
    out = os.path.dirname(dirs["martini"])
    s = _settings(out, replicas=3, seed=9, go=True, frames=5)
    with pytest.raises(InputError) as exc:
        check_analyse_only(s, ["--analyse-only", "--replicas", "--seed", "--go", "--frames", "--quiet"], dirs,
                           print, MARTINI_DT_FS)
    message = str(exc.value)
    assert message.startswith(f"{out}: --analyse-only re-analyses the runs as they ran, and these options differ "
                              "from them: ") and message.endswith("; leave them out") and "\n" not in message
    assert message.split("from them: ")[1].split("; leave")[0].split("; ") == [
        "--replicas 3 (the flashschnet run's: 2)", "--seed 9 (the martini run's: 1)",
        "--seed 9 (the flashschnet run's: 1)", "--go True (the martini run's: False)",
        "--frames 5 (the martini run's: 2)", "--frames 5 (the flashschnet run's: 2)"]


def test_options_that_agree_pass_and_the_unused_ones_are_noted(dirs):
    out = os.path.dirname(dirs["martini"])
    said = []
    s = _settings(out, replicas=2, seed=1, frames=2, dt_fs=4.0, martini_ns=80 * MARTINI_DT_FS * 1e-6,
                  flashschnet_ns=20 * 4.0 * 1e-6, platform=None, threads=2)
    check_analyse_only(s, ["--replicas", "--seed", "--frames", "--dt", "--martini-ns", "--flashschnet-ns", "--threads"],
                       dirs, said.append, MARTINI_DT_FS)
    assert said == ["note: --threads: not used by --analyse-only (nothing is run; the runs are read as they ran)"]
    with pytest.raises(InputError, match=r"--flashschnet-ns 40 \(the flashschnet run's: 20\)"):
        check_analyse_only(_settings(out, frames=2, flashschnet_ns=40 * 4.0 * 1e-6), ["--flashschnet-ns"], dirs,
                           said.append, MARTINI_DT_FS)
    # only the options that choose what to read: nothing is checked (the runs are not even read)
    check_analyse_only(s, ["--analyse-only", "--out", "--model", "--quiet"], {"martini": "/no/such/run"}, said.append,
                       MARTINI_DT_FS)
    assert len(said) == 1
