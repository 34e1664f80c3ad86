"""The process-wide TorchScript setting (``flashschnet.torchscript``): set and restored in one place."""
from __future__ import annotations

import pytest
import torch

from flashschnet.torchscript import ONE_PLAN, keep_one_plan, one_plan

OTHER = [("STATIC", 2), ("DYNAMIC", 10)]


def _current():
    now = torch.jit.set_fusion_strategy(OTHER)
    torch.jit.set_fusion_strategy(now)
    return [tuple(x) for x in now]


@pytest.fixture
def restored():
    before = torch.jit.set_fusion_strategy(OTHER)
    yield
    torch.jit.set_fusion_strategy(before)


def test_one_plan_sets_the_strategy_and_restores_the_previous_one_whatever_happens(restored):
    with one_plan():
        assert _current() == ONE_PLAN
    assert _current() == OTHER
    with pytest.raises(RuntimeError):
        with one_plan():
            raise RuntimeError("a failed run")
    assert _current() == OTHER

    @one_plan()
    def run():
        return _current()

    assert run() == ONE_PLAN and _current() == OTHER


def test_keep_one_plan_is_for_the_rest_of_the_process(restored):
    keep_one_plan()
    assert _current() == ONE_PLAN
