"""flashschnet.threads: PyTorch's thread count from the cores free at a run's start (an explicit --threads or
OMP_NUM_THREADS wins), the busy cores read from a /proc/stat-style file."""
from __future__ import annotations

import pytest
import torch

from flashschnet import threads as th


@pytest.mark.parametrize("requested,default,busy,cores,env,expected", [
    (3, 2, 1.0, 2, {}, (3, "requested")),                         # --threads wins, even above the cores
    (None, 2, 1.0, 2, {"OMP_NUM_THREADS": "2"}, (2, "OMP_NUM_THREADS")),
    (None, 2, None, 2, {}, (2, "default")),                         # load unknown (not Linux)
    (None, 2, 0.0, 2, {}, (2, "default")),
    (None, 2, 0.2, 2, {}, (2, "default")),                          # less than BUSY_CORE
    (None, 2, 0.25, 2, {}, (1, "busy")),                            # a quarter core busy counts
    (None, 2, 1.2, 2, {}, (1, "busy")),
    (None, 2, 1.0, 2, {}, (1, "busy")),
    (None, 2, 2.0, 2, {}, (1, "busy")),                             # at least one thread
    (None, 8, 4.0, 16, {}, (8, "default")),                         # never above PyTorch's default
    (None, 16, 3.2, 16, {}, (13, "busy")),
    (None, 16, 3.3, 16, {}, (12, "busy")),
    (None, 2, 1.0, 2, {"OMP_NUM_THREADS": " "}, (1, "busy")),       # blank is not a choice
])
def test_choose_torch_threads(requested, default, busy, cores, env, expected):
    assert th.choose_torch_threads(requested, default, busy, cores, env) == expected


def _stat(path, cpu0, cpu1):
    """A /proc/stat with two CPUs; ``cpuN`` = (busy, idle) ticks (user and idle columns)."""
    lines = [f"cpu  {cpu0[0] + cpu1[0]} 0 0 {cpu0[1] + cpu1[1]} 0 0 0 0 0 0"]
    lines += [f"cpu{i} {b} 0 0 {idle} 0 0 0 0 0 0" for i, (b, idle) in enumerate((cpu0, cpu1))]
    path.write_text("\n".join(lines + ["intr 1 2 3", "ctxt 5"]) + "\n")


def test_busy_cores_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    _stat(stat, (1000, 500), (200, 900))

    def sleep(_):            # 20 ticks pass: cpu0 busy all of them, cpu1 idle
        _stat(stat, (1020, 500), (200, 920))

    assert th.busy_cores(0.2, cpus=(0, 1), stat_path=str(stat), sleep=sleep, own_cpu_s=lambda: 0.0) == 1.0
    _stat(stat, (1000, 500), (200, 900))
    assert th.busy_cores(0.2, cpus=(1,), stat_path=str(stat), sleep=sleep, own_cpu_s=lambda: 0.0) == 0.0
    assert th.busy_cores(0.2, cpus=(0, 5), stat_path=str(stat), sleep=lambda _: None) is None   # no cpu5 line
    assert th.busy_cores(0.2, cpus=(0,), stat_path=str(tmp_path / "missing"), sleep=lambda _: None) is None
    assert th.busy_cores(0.2, cpus=(0,), stat_path=str(stat), sleep=lambda _: None) is None     # no tick passed


def test_busy_cores_leaves_out_this_process(tmp_path):
    """Busy ticks this process spent itself are not another program's."""
    stat = tmp_path / "stat"
    _stat(stat, (0, 0), (0, 0))
    clock = iter([0.0, 1e6])        # own CPU seconds before and after: far more than the sample

    def sleep(_):
        _stat(stat, (10, 0), (10, 0))

    assert th.busy_cores(0.2, cpus=(0, 1), stat_path=str(stat), sleep=sleep, own_cpu_s=lambda: next(clock)) == 0.0


def test_busy_cores_reads_this_machine():
    busy = th.busy_cores(0.01)
    assert busy is None or 0.0 <= busy <= len(th.available_cpus()) + 0.5


@pytest.fixture
def threads_restored(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(th, "_STATE", {"default": None, "last": None})
    monkeypatch.setattr(th, "available_cpus", lambda: (0, 1))
    yield
    torch.set_num_threads(before)


def test_run_threads_follows_the_load_and_returns_to_the_default(monkeypatch, threads_restored):
    torch.set_num_threads(2)
    busy = {"cores": 1.0}
    monkeypatch.setattr(th, "busy_cores", lambda cpus=None: busy["cores"])
    notes = []
    assert th.run_threads(None, notes.append, environ={}) == 1 == torch.get_num_threads()
    assert notes == ["note: 1.0 of 2 cores busy with other programs: PyTorch on 1 thread instead of 2 "
                     "(--threads N to choose)"]
    busy["cores"] = 0.0                     # the next run in this process, on an idle machine: the default again
    assert th.run_threads(None, notes.append, environ={}) == 2 == torch.get_num_threads() and len(notes) == 1


def test_run_threads_explicit_choices_win(monkeypatch, threads_restored):
    torch.set_num_threads(2)

    def never(cpus=None):
        raise AssertionError("the load is not sampled when the user chose")

    monkeypatch.setattr(th, "busy_cores", never)
    notes = []
    assert th.run_threads(2, notes.append, environ={}) == 2 == torch.get_num_threads()
    assert th.run_threads(1, notes.append, environ={}) == 1 == torch.get_num_threads()
    # OMP_NUM_THREADS: the user's choice (PyTorch's default follows it): the default count, whatever the load
    assert th.run_threads(None, notes.append, environ={"OMP_NUM_THREADS": "2"}) == 2 == torch.get_num_threads()
    # a default of one thread (e.g. the test suite's processes): nothing to lower, no sampling
    monkeypatch.setattr(th, "_STATE", {"default": None, "last": None})
    torch.set_num_threads(1)
    assert th.run_threads(None, notes.append, environ={}) == 1
    assert notes == []


def test_a_requested_count_does_not_become_the_default(monkeypatch, threads_restored):
    monkeypatch.setattr(th, "_STATE", {"default": 2, "last": None})     # as read when flashschnet was imported
    monkeypatch.setattr(th, "busy_cores", lambda cpus=None: 0.0)
    torch.set_num_threads(1)                  # run() sets --threads 1 before it builds the System
    assert th.run_threads(1, print, environ={}) == 1
    assert th.run_threads(None, print, environ={}) == 2 == torch.get_num_threads()    # the next run: idle
    torch.set_num_threads(1)                  # the program's own choice between runs is its default from now on
    assert th.run_threads(None, print, environ={}) == 1 == torch.get_num_threads()
