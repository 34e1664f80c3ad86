"""Behaviour unchanged across refactors, the runs' part (test_golden.py has the energies and forces; the two files
run on different test processes): the DCD coordinates of short CG, tempering and MARTINI runs recomputed and
compared with the golden ones (tests/helpers/golden.py)."""
from __future__ import annotations

import pytest

from tests.helpers.golden import check, recompute

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PART = "run"


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    return recompute(tmp_path_factory, PART)


def test_every_golden_run_is_reproduced(recomputed):
    check(*recomputed, part=PART)
