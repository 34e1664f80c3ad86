"""flashschnet.openmm.ensemble.run -- run_ensemble and finish_rung_files -- through flashschnet-simulate
--temperatures / --blocks / --workers on the CG network (the tiny trp-cage model): the outputs of a
parallel-tempering run, the per-temperature files as the demultiplexed walker frames (written at a resume when the
run had not finished them), bitwise resume, a pure ensemble of blocks, the same run on local Dask workers, the
builder the blocks get, and bad input refused in one line before anything is written."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.ladder import geometric_ladder, rung_name
from flashschnet.openmm.reporters import read_checkpoint
from flashschnet.scripts.simulate import main
from flashschnet.tiny import tiny_model

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
LADDER = "300:420:4"
TEMPS = geometric_ladder(300.0, 420.0, 4)          # 300.0, 335.6, 375.4, 420.0
RUNGS = [rung_name(t) for t in TEMPS]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model(PDB, str(tmp_path_factory.mktemp("tiny") / "tiny.pt"))


def _args(out, model, steps, *extra):
    return [PDB, "--model", str(model), "--steps", str(steps), "--out", str(out), "--report-interval", "20",
            "--exchange-interval", "5", "--seed", "5", "--quiet", "--threads", "1", *map(str, extra)]


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_tempering_run_writes_walkers_rungs_exchanges_and_resumes_bitwise(tmp_path, tiny, capsys):
    straight, split = tmp_path / "a", tmp_path / "b"
    assert main(_args(straight, tiny, 80, "--temperatures", LADDER, "--blocks", "2")) == 0
    err = capsys.readouterr().err
    assert "parallel tempering: 4 walkers at 300.0, 335.6, 375.4, 420.0 K, exchanges every 5 steps; 2 block(s)" in err
    assert "final exchange acceptance: 300.0-335.6 K" in err and "done: 80 steps x 4 replicas" in err
    files = sorted(os.listdir(straight))
    assert [f"{r}.dcd" for r in RUNGS] == [f for f in files if f.startswith("T")]
    assert [f"replica_{w:03d}.dcd" for w in range(4)] == [f for f in files if f.startswith("replica_")]
    run_json = json.loads((straight / "run.json").read_text())
    assert run_json["temperatures"] == LADDER and run_json["blocks"] == 2 and run_json["exchange_interval"] == 5
    assert "workers" not in run_json and "scheduler" not in run_json
    assert run_json["engine"] == "torch"          # the edge engine that ran (fused.engine.running_engine)

    # exchanges: every 5 steps, alternating even and odd pairs, probabilities in [0, 1]
    ex = _rows(straight / "exchanges.csv")
    assert sorted({int(r["step"]) for r in ex}) == list(range(5, 81, 5))
    for r in ex:
        assert int(r["pair"]) % 2 == (int(r["step"]) // 5) % 2 and 0.0 <= float(r["probability"]) <= 1.0
    # the log: each walker's thermostat temperature is its rung's in walkers.csv
    walkers = _rows(straight / "walkers.csv")
    log = _rows(straight / "log.csv")
    assert [int(r["step"]) for r in walkers] == [0, 20, 40, 60, 80] and len(log) == 20     # step 0: the start
    for row in log:
        at = next(w for w in walkers if w["step"] == row["step"])
        rung = [int(at[n]) for n in RUNGS].index(int(row["replica"]))
        assert float(row["thermostat_K"]) == pytest.approx(TEMPS[rung], rel=1e-9)
    # each rung's frame is the frame of the walker that was there
    frames = [read_dcd(str(straight / f"replica_{w:03d}.dcd")) for w in range(4)]
    for k, name in enumerate(RUNGS):
        rung = read_dcd(str(straight / f"{name}.dcd"))
        assert len(rung) == 5
        for i, w in enumerate(walkers):
            assert np.array_equal(rung[i], frames[int(w[name])][i])

    # 30 steps (not an exchange, report or checkpoint step), then --resume to 80: the same run
    assert main(_args(split, tiny, 33, "--temperatures", LADDER, "--blocks", "2")) == 0
    assert read_checkpoint(str(split / "checkpoint.chk"))[0]["step"] == 33
    assert main(_args(split, tiny, 80, "--temperatures", LADDER, "--resume")) == 0      # --blocks from run.json
    assert "resuming" in capsys.readouterr().err
    for name in [f"{r}.dcd" for r in RUNGS] + [f"replica_{w:03d}.dcd" for w in range(4)]:
        assert np.array_equal(read_dcd(str(straight / name)), read_dcd(str(split / name))), name
    for name in ("exchanges.csv", "walkers.csv"):
        assert (straight / name).read_text() == (split / name).read_text()
    drop_speed = lambda rows: [{k: v for k, v in r.items() if k != "ns_per_day"} for r in rows]  # noqa: E731
    assert drop_speed(_rows(straight / "log.csv")) == drop_speed(_rows(split / "log.csv"))

    # the run stopped after its last checkpoint, before writing the per-temperature files (e.g. a full disk):
    # a resume with nothing left to run writes them, as the end of the run would have
    for name in RUNGS[1:]:
        os.remove(split / f"{name}.dcd")
    capsys.readouterr()
    assert main(_args(split, tiny, 80, "--temperatures", LADDER, "--resume")) == 0
    err = capsys.readouterr().err
    assert "nothing to do" in err and "per-temperature trajectories" in err
    for name in RUNGS:
        assert np.array_equal(read_dcd(str(straight / f"{name}.dcd")), read_dcd(str(split / f"{name}.dcd"))), name


def test_the_exchange_summaries_are_lines_of_their_own_beside_the_progress_bar(tmp_path, tiny, capsys):
    """With the progress bar on, each checkpoint's exchange summary starts its own line (tqdm clears the bar
    first), never glued to the end of the bar."""
    argv = [a for a in _args(tmp_path / "p", tiny, 60, "--temperatures", LADDER, "--checkpoint-interval", "20")
            if a != "--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    shown = [line.split("\r")[-1] for line in err.split("\n")]     # what a terminal shows of each line
    summaries = [line for line in shown if ": step " in line and "exchange acceptance" in line]
    assert len(summaries) == 2, err                               # steps 20 and 40 (not the last step, 60)
    for line in summaries:
        assert line.startswith("flashschnet-simulate: step "), repr(line)
    assert "walkers:" in err or "4 walkers" in err                # the bar was on


def test_pure_ensemble_of_blocks_in_one_process(tmp_path, tiny, capsys):
    """--replicas 3 --blocks 2: two Contexts (2 + 1 replicas) with their own seeds, one temperature, no exchanges."""
    out = tmp_path / "e"
    assert main(_args(out, tiny, 40, "--replicas", "3", "--blocks", "2")) == 0
    assert "ensemble: 3 replicas; 2 block(s) of 2, 1 walkers in this process" in capsys.readouterr().err
    assert not (out / "exchanges.csv").exists() and not list(out.glob("T*.dcd"))
    frames = [read_dcd(str(out / f"replica_{w:03d}.dcd")) for w in range(3)]
    assert [len(f) for f in frames] == [3, 3, 3]          # steps 0, 20, 40
    assert not np.array_equal(frames[0], frames[1]) and not np.array_equal(frames[0], frames[2])
    assert {float(r["thermostat_K"]) for r in _rows(out / "log.csv")} == {300.0}


@pytest.mark.parametrize("extra, message", [
    (["--temperatures", "300"], "a ladder needs at least 2 temperatures"),
    (["--temperatures", "300:450:1"], "a ladder needs at least 2 temperatures"),
    (["--temperatures", "300,290,350"], "strictly increasing, got 300 then 290"),
    (["--temperatures", "0,300"], "positive finite number of kelvin"),
    (["--temperatures=-5:300:4"], "positive finite number of kelvin"),
    (["--temperatures", "300,nan"], "positive finite number of kelvin"),
    (["--temperatures", "hot"], "give TMIN:TMAX:N"),
    (["--temperatures", "300,300"], "strictly increasing, got 300 then 300"),
    (["--temperatures", "300,300.01,301"], "share the name T300.0"),
    (["--temperatures", "300:400:4", "--workers", "5"], "--workers 5: must be between 1 and the number of walkers (4"),
    (["--replicas", "2", "--workers", "3"], "--workers 3: must be between 1 and the number of walkers (2"),
    (["--temperatures", "300:400:4", "--blocks", "5"], "--blocks 5: must be between 1 and the number of walkers (4)"),
    (["--temperatures", "300:400:4", "--replicas", "4"], "--replicas 4 with --temperatures"),
    (["--temperatures", "300:400:4", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "exclude each other"),
])
def test_bad_ensemble_input_is_one_line_and_writes_nothing(tmp_path, tiny, capsys, extra, message):
    out = tmp_path / "bad"
    assert main(_args(out, tiny, 40, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_resume_needs_the_same_ladder(tmp_path, tiny, capsys):
    out = tmp_path / "r"
    assert main(_args(out, tiny, 20, "--temperatures", LADDER)) == 0
    capsys.readouterr()
    assert main(_args(out, tiny, 40, "--temperatures", "300:420:5", "--resume")) == 2
    assert "--temperatures 300:420:5 (the run's: 300:420:4)" in capsys.readouterr().err


def test_a_single_process_tempering_run_does_not_import_dask(tmp_path, tiny):
    """The single-process path (no --workers/--scheduler) never imports dask or distributed."""
    args = _args(tmp_path / "p", tiny, 20, "--temperatures", LADDER, "--blocks", "2")
    code = ("import torch, sys; from flashschnet.scripts.simulate import main; rc = main(sys.argv[1:]); "
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert out.stdout.strip() == "0 []", out.stderr[-2000:]


def test_workers_run_the_cg_ladder_as_the_single_process_does(tmp_path, tiny, capsys):
    """--workers 2 (a local Dask cluster, one block each) repeats --blocks 2 in one process bitwise."""
    local, dask = tmp_path / "local", tmp_path / "dask"
    assert main(_args(local, tiny, 40, "--temperatures", LADDER, "--blocks", "2")) == 0
    assert main(_args(dask, tiny, 40, "--temperatures", LADDER, "--workers", "2")) == 0
    assert "on 2 local Dask workers" in capsys.readouterr().err
    assert json.loads((dask / "run.json").read_text())["blocks"] == 2
    for name in [f"{r}.dcd" for r in RUNGS] + [f"replica_{w:03d}.dcd" for w in range(4)]:
        assert np.array_equal(read_dcd(str(local / name)), read_dcd(str(dask / name))), name
    assert (local / "exchanges.csv").read_text() == (dask / "exchanges.csv").read_text()


def test_an_unreachable_scheduler_is_one_line_and_writes_nothing(tmp_path, tiny, capsys):
    out = tmp_path / "s"
    assert main(_args(out, tiny, 20, "--temperatures", LADDER, "--scheduler", "tcp://127.0.0.1:1")) == 2
    lines = capsys.readouterr().err.strip().splitlines()      # the model's notes, then the error
    assert all(ln.startswith("flashschnet-simulate: ") for ln in lines), lines
    errors = [ln for ln in lines if ln.startswith("flashschnet-simulate: error: ")]
    assert errors == lines[-1:] and "--scheduler tcp://127.0.0.1:1: cannot reach a Dask scheduler" in errors[0]
    assert not out.exists()


def test_the_blocks_compute_with_the_drivers_filter_tables(tmp_path, tiny, monkeypatch):
    """The default network's tables travel with the ensemble's builder (pickled, as a Dask worker gets it): a block
    is built from them without reading a cache or tabulating, so every block computes with the driver's tables
    wherever it runs."""
    import pickle

    import flashschnet.openmm.ensemble.run as ensemble_run
    import flashschnet.tablecache as tablecache
    import flashschnet.transforms as transforms
    from flashschnet.openmm.simulate import RunSettings, run

    seen = {}
    monkeypatch.setattr(ensemble_run, "run_ensemble", lambda plan, builder, *a, **kw: seen.setdefault("b", builder))
    run(RunSettings(pdb=PDB, model=str(tiny), out=str(tmp_path / "o"), steps=20, temperatures=LADDER, blocks=2,
                    threads=1), progress=False, echo=lambda m: None)
    builder = pickle.loads(pickle.dumps(seen["b"]))
    assert builder.tables.spec == {"kind": "quintic", "knots": 256, "dtype": "float32"}
    assert (builder.settings.compress, builder.settings.compress_knots) == ("float32", 256)

    def untouchable(*args, **kwargs):
        raise AssertionError("a block read the cache or tabulated its own tables")

    monkeypatch.setattr(tablecache, "cached_tables", untouchable)
    monkeypatch.setattr(transforms, "tabulate", untouchable)
    block = builder(2)
    assert block.system.getNumParticles() == 2 * block.particles
