"""flashschnet.openmm.ensemble.driver: the driving loop on blocks of walkers in this process (LocalBlocks) on the
harmonic test systems (tests/helpers/ensemble_systems.py): resume and rollback after a lost block repeating the
uninterrupted run bitwise, per-walker --on-blowup drop inside a tempering run and stop naming the walker and the
checkpoint, exchange and report intervals that do not divide each other, bad plans refused in one line. The
statistics of whole runs: test_sampling.py; the driver on Dask: test_cluster.py."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from flashschnet.errors import InputError, SimulationInstabilityError
from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.ensemble import LocalBlocks, block_specs, drive
from tests.helpers.ensemble_systems import _topology, HarmonicBuilder, ladder_plan, PARTICLES_PER_WALKER

P = PARTICLES_PER_WALKER


def _run(plan, builder=None, resume=False, **kw):
    os.makedirs(plan.out, exist_ok=True)
    specs = block_specs(plan)
    blocks = LocalBlocks(builder or HarmonicBuilder(particles=P), specs)
    try:
        return drive(plan, blocks, specs, resume=resume, progress=False, echo=kw.pop("echo", lambda m: None),
                     trajectory_topology=_topology(P), **kw)
    finally:
        blocks.close()


def _files(out):
    names = sorted(n for n in os.listdir(out) if n.endswith(".dcd") or n in ("exchanges.csv", "walkers.csv"))
    frames = {n: read_dcd(os.path.join(out, n)) for n in names if n.endswith(".dcd")}
    tables = {n: open(os.path.join(out, n)).read() for n in names if n.endswith(".csv")}
    with open(os.path.join(out, "log.csv")) as f:
        tables["log"] = [r[:5] + r[6:] for r in csv.reader(f)]          # without the speed column
    return frames, tables


def _assert_same(a, b):
    fa, ta = _files(a)
    fb, tb = _files(b)
    assert sorted(fa) == sorted(fb) and ta == tb
    for n in fa:
        assert np.array_equal(fa[n], fb[n]), n


def test_resume_and_split_runs_repeat_the_uninterrupted_run_bitwise(tmp_path):
    """200 steps straight vs 120 steps (a run ending between exchanges and off the checkpoint schedule) then
    --resume to 200: trajectories (per walker and per temperature), exchanges, walkers.csv and log rows agree."""
    straight, split = tmp_path / "a", tmp_path / "b"
    r = _run(ladder_plan(straight, 200))
    assert r.steps_done == 200 and len(r.acceptance) == 3 and r.rung_frames == [5] * 4      # steps 0, 50, ..., 200
    _run(ladder_plan(split, 125))
    assert sorted(os.listdir(split / "blocks")) == ["block_000.s125.chk", "block_001.s125.chk"]
    _run(ladder_plan(split, 200), resume=True)
    _assert_same(straight, split)


def test_a_lost_block_rolls_every_block_back_to_the_checkpoint_and_the_run_repeats_bitwise(tmp_path):
    """What the driver does when Dask reports a lost block, with in-process blocks: at step 130 block 1 is
    "lost" (BlocksLost); every block goes back to step 100 and the files are cut there; the run then equals the
    uninterrupted one (each frame once)."""
    from flashschnet.openmm.ensemble.driver import BlocksLost

    straight, lost = tmp_path / "a", tmp_path / "b"
    _run(ladder_plan(straight, 200))

    class Losing(LocalBlocks):
        fired = False

        def call(self, method, args=None):
            if method == "advance" and args[0][0] == 140 and not Losing.fired:
                Losing.fired = True
                super().call(method, args)                  # the blocks ran on ...
                raise BlocksLost([1], "test")               # ... but one of them is reported lost
            return super().call(method, args)

    plan = ladder_plan(lost, 200)
    os.makedirs(lost)
    specs = block_specs(plan)
    blocks = Losing(HarmonicBuilder(particles=P), specs)
    messages = []
    r = drive(plan, blocks, specs, resume=False, progress=False, echo=messages.append, trajectory_topology=_topology(P))
    blocks.close()
    assert r.rollbacks == 1 and any("back to step 100" in m for m in messages)
    _assert_same(straight, lost)
    assert [len(read_dcd(str(lost / f"replica_{w:03d}.dcd"))) for w in range(4)] == [5] * 4


def test_a_walker_that_blows_up_is_dropped_and_the_ladder_goes_on_without_it(tmp_path):
    """Walker 1 sits on an inverted well (HarmonicBuilder.unstable_replica) and exceeds --max-force; with
    --on-blowup drop it is frozen, named in dropped.json, its pairs are not tried again, its rung's file stops,
    the others go on; a resumed run keeps it dropped."""
    plan = ladder_plan(tmp_path / "d", 200, on_blowup="drop", max_force=2.0e3, blocks=1)
    messages = []
    r = _run(plan, HarmonicBuilder(particles=P, k=1000.0, unstable_replica=1), echo=messages.append)
    assert r.dropped == [1]
    dropped = json.loads((tmp_path / "d" / "dropped.json").read_text())
    assert [d["replica"] for d in dropped] == [1] and "exceeds" in dropped[0]["reason"]
    step = dropped[0]["step"]
    assert any(m.startswith(f"replica 1 dropped at step {step}") for m in messages)
    with open(tmp_path / "d" / "exchanges.csv") as f:
        after = [row for row in csv.DictReader(f) if int(row["step"]) > step]
    assert after and all("1" not in (row["walker_lo"], row["walker_hi"]) for row in after)
    frames = [len(read_dcd(str(tmp_path / "d" / f"replica_{w:03d}.dcd"))) for w in range(4)]
    assert frames[1] == step // 50 and frames[0] == frames[2] == frames[3] == 5     # steps 0, 50, ... before the drop
    r2 = _run(ladder_plan(tmp_path / "d", 300, on_blowup="drop", max_force=2.0e3, blocks=1),
              HarmonicBuilder(particles=P, k=1000.0, unstable_replica=1), resume=True)
    assert r2.dropped == [1] and len(read_dcd(str(tmp_path / "d" / "replica_001.dcd"))) == frames[1]


def test_blowup_with_stop_names_the_walker_and_keeps_the_checkpoint(tmp_path):
    plan = ladder_plan(tmp_path / "s", 400, max_force=2.0e3, blocks=1)
    with pytest.raises(SimulationInstabilityError, match=r"^step \d+: replica 1: force .*; stopping \(last good checkpoint: step 100 in "):
        _run(plan, HarmonicBuilder(particles=P, k=1000.0, unstable_replica=1))


@pytest.mark.parametrize("kw, match", [
    (dict(exchange_interval=0), "--exchange-interval must be >= 1, got 0"),
    (dict(blocks=5), "--blocks 5: must be between 1 and the number of walkers"),
    (dict(blocks=0), "--blocks 0"),
])
def test_bad_plans_are_refused_in_one_line(tmp_path, kw, match):
    with pytest.raises(InputError, match=match) as e:
        ladder_plan(tmp_path, 100, **kw)
    assert "\n" not in str(e.value)


def test_exchange_and_report_intervals_need_not_divide_each_other(tmp_path):
    """Exchanges every 30 steps, frames every 50: the blocks meet at both; exchanges.csv has every multiple of 30
    (none at step 0), walkers.csv and the frames every multiple of 50 from step 0, and a run split at 70 (neither)
    resumes bitwise."""
    straight, split = tmp_path / "a", tmp_path / "b"
    r = _run(ladder_plan(straight, 200, exchange_interval=30))
    assert r.timings["exchanges"] == 6 and r.timings["segments"] == 9     # 30 50 60 90 100 120 150 180 200
    with open(straight / "exchanges.csv") as f:
        assert sorted({int(row["step"]) for row in csv.DictReader(f)}) == [30, 60, 90, 120, 150, 180]
    with open(straight / "walkers.csv") as f:
        assert [int(row["step"]) for row in csv.DictReader(f)] == [0, 50, 100, 150, 200]
    _run(ladder_plan(split, 70, exchange_interval=30))
    _run(ladder_plan(split, 200, exchange_interval=30), resume=True)
    _assert_same(straight, split)
