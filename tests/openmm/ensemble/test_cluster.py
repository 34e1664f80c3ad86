"""Ensembles on Dask (flashschnet.openmm.ensemble.cluster.DaskBlocks), real runs of the driver on the harmonic test
systems (tests/helpers/ensemble_systems.py; the workers import it: a local cluster's worker processes are spawned
with this process's sys.path):

* the same plan (2 blocks, 4 temperatures) in this process, on 1 local worker (hosting both blocks), on 2 local
  workers and on an existing cluster (--scheduler) gives the same trajectories, exchanges, walkers and log rows;
* a worker SIGKILLed mid-run: its block is rebuilt on a live worker, every block goes back to the last checkpoint,
  the run finishes with every frame once and the files of the uninterrupted run;
* a block's own errors (SimulationInstabilityError, an OSError, a RuntimeError) come back unchanged, the blocks
  stay usable;
* no worker left (a cluster scaled to 0): WorkersLost after the wait for one, in one line;
* bad input (more workers than walkers, an unreachable scheduler) is a one-line InputError before anything runs.

DCD files are compared without their title record (it holds the creation time), log.csv without its speed column.
"""
from __future__ import annotations

import csv
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from flashschnet.errors import InputError, SimulationInstabilityError
from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.ensemble import EnsemblePlan, LocalBlocks, block_specs, check_plan, drive
from flashschnet.openmm.ensemble.cluster import DaskBlocks, WorkersLost
from tests.helpers.dcd import dcd_parts
from tests.helpers.ensemble_systems import HarmonicBuilder, _topology

P = 4                  # particles per walker
STEPS, REPORT = 1500, 50
KILL_AT = 1230         # a segment end between the checkpoints of steps 1000 and 1500


def _plan(out, **kw):
    args = dict(out=str(out), steps=STEPS, temperatures_K=[300.0, 330.0, 365.0, 400.0], exchange_interval=10,
                report_interval=REPORT, checkpoint_interval=500, dt_fs=4.0, friction_per_ps=2.0, seed=23, blocks=2,
                threads=1)
    args.update(kw)
    p = EnsemblePlan(**args)
    check_plan(p)
    return p


class _KillAfter:
    """The blocks, except that the process of block ``block``'s worker is sent SIGKILL once, after the segment
    ending at step ``at`` has run whole (its reports and checkpoint included): just before the next ``advance``
    call. ``killed``: the pid it killed."""

    def __init__(self, blocks, at: int, block: int):
        self.blocks, self.at, self.block, self.killed = blocks, at, block, []

    def call(self, method, args=None):
        if method == "advance" and args and args[0][0] > self.at and not self.killed:
            pid = int(self.blocks.call("ping")[self.block])
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
        return self.blocks.call(method, args)

    def __getattr__(self, name):
        return getattr(self.blocks, name)


def _drive(plan, make_blocks, builder=None, wrap=lambda blocks: blocks):
    """Run ``plan`` on ``wrap(make_blocks(builder, specs))``; return (result, echoed lines, the blocks' worker pids
    at the start)."""
    os.makedirs(plan.out, exist_ok=True)
    specs = block_specs(plan)
    lines = []
    blocks = wrap(make_blocks(builder or HarmonicBuilder(particles=P), specs, lines.append))
    try:
        pids = blocks.call("ping")
        result = drive(plan, blocks, specs, resume=False, progress=False, echo=lines.append,
                       trajectory_topology=_topology(P))
    finally:
        blocks.close()
    return result, lines, pids


def _files(out):
    names = sorted(n for n in os.listdir(out) if n.endswith((".dcd", ".csv")))
    dcds = {n: dcd_parts(os.path.join(out, n)) for n in names if n.endswith(".dcd")}
    tables = {n: open(os.path.join(out, n)).read() for n in names if n in ("exchanges.csv", "walkers.csv")}
    with open(os.path.join(out, "log.csv")) as f:
        tables["log.csv"] = [r[:5] + r[6:] for r in csv.reader(f)]          # without ns_per_day
    return dcds, tables


def _assert_same(a, b):
    da, ta = _files(a)
    db, tb = _files(b)
    assert sorted(da) == sorted(db) and sorted(ta) == sorted(tb)
    assert sorted(da) == ["T300.0.dcd", "T330.0.dcd", "T365.0.dcd", "T400.0.dcd"] + \
        [f"replica_{w:03d}.dcd" for w in range(4)]
    for n in da:
        assert da[n] == db[n], f"{n} differs between {a} and {b}"
    for n in ta:
        assert ta[n] == tb[n], f"{n} differs between {a} and {b}"


def _local(builder, specs, echo):
    return LocalBlocks(builder, specs)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The plan run in this process (LocalBlocks): the files every Dask run must reproduce."""
    threads = torch.get_num_threads()          # WalkerBlock sets PyTorch's threads to the plan's
    try:
        result, _, pids = _drive(_plan(tmp_path_factory.mktemp("local") / "run"), _local)
    finally:
        torch.set_num_threads(threads)
    assert pids == [os.getpid()] * 2
    assert result.steps_done == STEPS and result.rollbacks == 0
    return result


@pytest.fixture(scope="module")
def scheduler():
    """An existing cluster (3 worker processes) for the --scheduler path."""
    import distributed

    cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.WARNING, memory_limit=0,
                                       scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_local_workers_repeat_the_single_process_run_bitwise(tmp_path, reference, workers):
    """1 worker hosting both blocks and 2 workers hosting one each: the blocks are fixed by the run, so the
    files are those of the run in this process."""
    result, _, pids = _drive(_plan(tmp_path / "run"),
                             lambda b, s, echo: DaskBlocks(b, s, workers=workers, echo=echo))
    assert len(set(pids)) == workers and os.getpid() not in pids
    assert result.steps_done == STEPS and result.rollbacks == 0
    assert result.acceptance == reference.acceptance and result.rung_frames == [STEPS // REPORT + 1] * 4   # + step 0
    _assert_same(reference.out, result.out)


def test_existing_scheduler_runs_the_same_and_notes_idle_workers(tmp_path, reference, scheduler):
    result, lines, pids = _drive(_plan(tmp_path / "run"),
                                 lambda b, s, echo: DaskBlocks(b, s, scheduler=scheduler, echo=echo))
    assert len(set(pids)) == 2
    assert any("3 Dask workers for 2 block(s): 1 idle" in line for line in lines), lines
    _assert_same(reference.out, result.out)


def test_a_killed_worker_rolls_back_to_the_checkpoint_and_the_files_hold_every_frame_once(tmp_path, reference):
    """SIGKILL the process of block 1's worker after the segment ending at KILL_AT: the next call finds it lost,
    the block is rebuilt on a live worker, every block restores the step-1000 checkpoint, the run finishes."""
    wrapped = []

    def wrap(blocks):
        wrapped.append(_KillAfter(blocks, KILL_AT, 1))
        return wrapped[0]

    result, lines, pids = _drive(_plan(tmp_path / "run"),
                                 lambda b, s, echo: DaskBlocks(b, s, workers=2, echo=echo), wrap=wrap)
    killed = wrapped[0].killed
    assert killed == [pids[1]] and len(set(pids)) == 2
    assert result.rollbacks == 1 and result.steps_done == STEPS
    lost = [line for line in lines if "lost" in line]
    assert len(lost) == 1 and "blocks [1] lost" in lost[0] and "back to step 1000" in lost[0], lines
    for w in range(4):
        assert read_dcd(os.path.join(result.out, f"replica_{w:03d}.dcd")).shape[0] == STEPS // REPORT + 1
    assert result.rung_frames == [STEPS // REPORT + 1] * 4
    with open(os.path.join(result.out, "log.csv")) as f:
        steps = [int(r["step"]) for r in csv.DictReader(f)]
    assert steps == [s for s in range(0, STEPS + 1, REPORT) for _ in range(4)]
    _assert_same(reference.out, result.out)


def test_a_blocks_own_errors_come_back_unchanged(tmp_path, scheduler):
    """Exceptions raised by the block's code on a live worker are not lost workers: the same type and message as
    in this process (SimulationInstabilityError from the health check, an OSError, a RuntimeError), and the
    blocks answer afterwards."""
    def unstable(out):
        return _plan(out, steps=400, checkpoint_interval=100, max_force=2.0e3)

    builder = HarmonicBuilder(particles=P, k=1000.0, unstable_replica=1)
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SimulationInstabilityError) as here:
            _drive(unstable(tmp_path / "here"), _local, builder=builder)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(SimulationInstabilityError) as there:
        _drive(unstable(tmp_path / "there"), lambda b, s, echo: DaskBlocks(b, s, scheduler=scheduler, echo=echo),
               builder=builder)
    assert str(there.value).replace(str(tmp_path / "there"), str(tmp_path / "here")) == str(here.value)
    assert str(there.value).startswith("step ") and "replica 1: force" in str(there.value)

    plan = _plan(tmp_path / "calls")
    os.makedirs(plan.out)
    blocks = DaskBlocks(HarmonicBuilder(particles=P), block_specs(plan), scheduler=scheduler, echo=lambda m: None)
    try:
        blocks.call("start")
        with pytest.raises(FileNotFoundError, match="block_000.s999.chk"):
            blocks.call("restore", [(999,)] * 2)
        with pytest.raises(RuntimeError, match=r"^block 0 is at step 0, not 7$"):
            blocks.call("save", [(7,)] * 2)
        assert [r["step"] for r in blocks.call("advance", [(20,)] * 2)] == [20, 20]
    finally:
        blocks.close()


def test_no_worker_left_to_rebuild_on_is_a_one_line_error_after_the_wait(tmp_path):
    import distributed

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.ERROR, memory_limit=0,
                                       scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    try:
        plan = _plan(tmp_path / "run")
        os.makedirs(plan.out)
        blocks = DaskBlocks(HarmonicBuilder(particles=P), block_specs(plan), scheduler=cluster.scheduler_address,
                            echo=lambda m: None, worker_timeout_s=1)
        try:
            blocks.call("start")
            cluster.scale(0)
            deadline = time.monotonic() + 30
            while blocks.client.scheduler_info()["workers"] and time.monotonic() < deadline:
                time.sleep(0.1)
            with pytest.raises(WorkersLost, match=r"^blocks \[0, 1\] lost with their Dask worker and no live "
                                                  r"worker to rebuild them on within 1 s; the run's last checkpoint "
                                                  r"is intact$"):
                blocks.call("advance", [(20,)] * 2)
        finally:
            blocks.close()
    finally:
        cluster.close()


def test_more_workers_than_walkers_is_refused_in_one_line(tmp_path):
    specs = block_specs(_plan(tmp_path / "run"))
    for kw, match in [(dict(workers=5), r"^--workers 5: must be between 1 and the number of walkers \(4"),
                      (dict(workers=0), r"^--workers 0: must be between 1"),
                      (dict(), "give one of --workers N"),
                      (dict(workers=2, scheduler="tcp://127.0.0.1:8786"), "not both")]:
        with pytest.raises(InputError, match=match) as e:
            DaskBlocks(HarmonicBuilder(particles=P), specs, **kw)
        assert "\n" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_an_unreachable_scheduler_is_refused_in_one_line(tmp_path):
    specs = block_specs(_plan(tmp_path / "run"))
    with pytest.raises(InputError, match=r"^--scheduler tcp://127\.0\.0\.1:1: cannot reach a Dask scheduler there "
                                         r"\(.*\); start one \(dask scheduler, dask-jobqueue's SLURMCluster") as e:
        DaskBlocks(HarmonicBuilder(particles=P), specs, scheduler="tcp://127.0.0.1:1", connect_timeout_s=1)
    assert "\n" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_the_package_does_not_import_dask():
    code = ("import torch, sys, flashschnet.openmm.ensemble, flashschnet.openmm.ensemble.driver, "
            "flashschnet.openmm.simulate; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
