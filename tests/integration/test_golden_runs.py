"""Behaviour unchanged across refactors, the runs' part (test_golden.py has the energies and forces; the two files
run on different test processes): the DCD coordinates of short CG, tempering and MARTINI runs recomputed and
compared with the golden ones (tests/helpers/golden.py)."""
from __future__ import annotations

import pytest

from helpers import golden
from test_golden import check

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PART = "run"


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    if not golden.GOLDEN.exists():
        pytest.fail(f"{golden.GOLDEN} missing: capture it with python tools/golden.py")
    return golden.compute(tmp_path_factory.mktemp("golden"), part=PART)


def test_every_golden_run_is_reproduced(recomputed):
    check(*recomputed, part=PART)
