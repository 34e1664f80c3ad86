"""Behaviour unchanged across refactors: every golden output (tests/helpers/golden.py; captured on main with
``python tools/maintenance/golden.py``) recomputed and compared -- energies and forces of every backend, precision,
weight variant and compression, through the model and through OpenMM, and the DCD coordinates of short CG, tempering and
MARTINI runs. Bitwise on the machine and library versions that captured them; elsewhere within each output's
tolerance (another CPU's vector instructions round differently), and the test says which comparison it made."""
from __future__ import annotations

import pytest

from tests.helpers.golden import check, recompute

pytestmark = pytest.mark.usefixtures("one_torch_thread")


PART = "model"      # this file: the model's and OpenMM's energies and forces; test_golden_runs.py: the runs


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    return recompute(tmp_path_factory, PART)


def test_every_golden_output_is_reproduced(recomputed):
    check(*recomputed, part=PART)
