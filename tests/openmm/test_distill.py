"""flashschnet-distill and flashschnet-simulate --mts end to end, on the tiny model: the inner model file, a
multiple-time-step run and its bitwise resume, run.json, the times of its frames, parallel tempering with an
inner model, an inner model of another teacher refused (or accepted with its option), and the one-line
errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.distill import load_inner
from flashschnet.openmm.dcd import read_dcd
from flashschnet.scripts.distill import main as distill
from flashschnet.scripts.simulate import main as simulate
from flashschnet.tiny import tiny_model

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
COMMON = ["--quiet", "--threads", "1", "--seed", "3"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("distill")
    model = tiny_model(PDB, str(d / "tiny.pt"))
    inner = d / "inner.pt"
    assert distill([model, PDB, "--out", str(inner), "--frames", "8", "--interval", "5", "--equilibration", "10",
                    "--replicas", "2", "--threads", "1"]) == 0
    return model, inner


def test_distill_writes_an_inner_model_with_its_measurements(files, capsys):
    model, inner = files
    m = load_inner(inner)
    assert m.n_beads == 97 and m.n_parameters == 96 * 2 + 131 * 2 + 93 * 6
    held = m.meta["held_out"]["relative_rms_error"]
    assert 0.0 < held < 1.0                                  # better than the priors alone, not perfect
    assert m.meta["frames"] == {"train": 12, "held_out": 4}  # 8 frames x 2 replicas, the last 20 % held out
    assert len(m.meta["teacher"]["sha256"]) == 64
    # --out exists: refused without --force, one line, nothing changed
    before = inner.read_bytes()
    assert distill([model, PDB, "--out", str(inner), "--frames", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists" in err[0] and inner.read_bytes() == before
    assert distill([model, PDB, "--out", str(inner) + "2", "--frames", "4", "--holdout", "0.1"]) == 2
    assert "too few frames" in capsys.readouterr().err


def test_a_multiple_time_step_run_resumes_bitwise_and_counts_outer_steps(files, tmp_path):
    model, inner = files
    args = [PDB, "--model", model, "--mts", str(inner), "--outer-dt", "8", "--report-interval", "5", *COMMON]
    straight, split = tmp_path / "a", tmp_path / "b"
    assert simulate([*args, "--steps", "20", "--out", str(straight)]) == 0
    assert simulate([*args, "--steps", "10", "--out", str(split)]) == 0
    assert simulate(["--resume", "--out", str(split), "--steps", "20", "--quiet", "--threads", "1"]) == 0
    a, b = read_dcd(str(straight / "replica_000.dcd")), read_dcd(str(split / "replica_000.dcd"))
    assert a.shape == (5, 97, 3) and np.array_equal(a, b)
    strip = lambda p: [row.rsplit(",", 1)[0] for row in p.read_text().splitlines()]     # noqa: E731
    assert strip(straight / "log.csv") == strip(split / "log.csv")
    run = json.loads((straight / "run.json").read_text())
    assert run["mts"] == str(inner) and run["outer_dt_fs"] == 8.0 and run["dt_fs"] == 4.0
    assert len(run["files"]["mts"]["sha256"]) == 64
    last = (straight / "log.csv").read_text().splitlines()[-1].split(",")
    assert last[0] == "20" and float(last[1]) == pytest.approx(20 * 0.008)      # time_ps counts outer steps


def test_tempering_runs_with_an_inner_model(files, tmp_path):
    model, inner = files
    out = tmp_path / "pt"
    assert simulate([PDB, "--model", model, "--mts", str(inner), "--outer-dt", "8", "--temperatures", "300,350",
                     "--exchange-interval", "5", "--steps", "10", "--report-interval", "5", "--out", str(out),
                     *COMMON]) == 0
    assert (out / "exchanges.csv").exists() and json.loads((out / "run.json").read_text())["outer_dt_fs"] == 8.0


def test_an_inner_model_of_another_teacher_is_refused_unless_accepted(files, tmp_path, capsys):
    """--mts with an inner model distilled from another model file: one line before any step; with
    --mts-any-teacher the run goes on with a note, and run.json records the choice."""
    model, inner = files
    other = tiny_model(PDB, str(tmp_path / "other.pt"), seed=1)
    args = [PDB, "--model", other, "--mts", str(inner), "--outer-dt", "8", "--steps", "5", "--report-interval", "5",
            *COMMON]
    assert simulate([*args, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--mts {inner} was distilled from {model}" in err[0] and \
        f"not from --model {other}" in err[0] and "--mts-any-teacher" in err[0], err
    assert not (tmp_path / "refused" / "run.json").exists()
    assert simulate([*args, "--out", str(tmp_path / "accepted"), "--mts-any-teacher"]) == 0
    said = capsys.readouterr()
    assert "used anyway (--mts-any-teacher)" in said.out + said.err
    assert json.loads((tmp_path / "accepted" / "run.json").read_text())["mts_any_teacher"] is True
    assert simulate([PDB, "--model", model, "--steps", "5", "--out", str(tmp_path / "alone"), "--mts-any-teacher",
                     *COMMON]) == 2
    assert "applies to an inner model (--mts)" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--outer-dt", "8"], "needs --mts"),
    (["--mts", "INNER", "--outer-dt", "6"], "whole multiple of --dt 4"),
    (["--mts", "INNER"], "needs --outer-dt"),
    (["--mts", "OTHER", "--outer-dt", "8"], "distilled on"),
    (["--mts", "MODEL", "--outer-dt", "8"], "not an inner model"),
])
def test_bad_multiple_time_step_options_are_one_line(files, tmp_path, capsys, extra, message):
    model, inner = files
    other = tmp_path / "other.pt"
    if "OTHER" in extra:
        from flashschnet.distill import save_inner

        m = load_inner(inner)
        m.fingerprint = ("5bead", tuple([1] * 97))
        save_inner(m, other)
    extra = [{"INNER": str(inner), "OTHER": str(other), "MODEL": model}.get(x, x) for x in extra]
    out = tmp_path / "run"
    assert simulate([PDB, "--model", model, "--steps", "5", "--out", str(out), *extra, *COMMON]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (out / "run.json").exists()
