"""A CG run's threads (flashschnet.threads through flashschnet.openmm.simulate.run): with one of two cores busy
and no --threads, PyTorch runs on 1 thread and the run says so; --threads N wins over the load; run.json
records no thread count."""
from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet import threads as th
from flashschnet.openmm.simulate import RunSettings, run


class _Seen:
    """A reporter noting PyTorch's thread count during the run."""

    def __init__(self):
        self.seen = None

    def describeNextReport(self, simulation):
        return {"steps": 5, "periodic": False, "include": []}

    def report(self, simulation, state):
        self.seen = torch.get_num_threads()


@pytest.mark.parametrize("threads,expected,note", [(None, 1, True), (2, 2, False)])
def test_one_busy_core_and_the_threads_option(tmp_path, monkeypatch, threads, expected, note):
    before = torch.get_num_threads()
    monkeypatch.setattr(th, "_STATE", {"default": None, "last": None})
    monkeypatch.setattr(th, "available_cpus", lambda: (0, 1))
    monkeypatch.setattr(th, "busy_cores", lambda cpus=None: 1.0)      # another program keeps one core busy
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    lines, seen = [], _Seen()
    try:
        torch.set_num_threads(2)
        s = RunSettings(pdb=str(EXAMPLES / "1L2Y_trpcage.pdb"), model=str(EXAMPLES / "trpcage_placeholder.pt"),
                        out=str(tmp_path / "run"), steps=10, report_interval=5, seed=3, threads=threads)
        run(s, progress=False, echo=lines.append, reporters=[seen])
    finally:
        torch.set_num_threads(before)
    assert seen.seen == expected
    assert any("1.0 of 2 cores busy with other programs: PyTorch on 1 thread instead of 2" in ln
               for ln in lines) == note
    assert "threads" not in json.loads((tmp_path / "run" / "run.json").read_text())
