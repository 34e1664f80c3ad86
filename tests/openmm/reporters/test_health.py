"""HealthReporter (``flashschnet.openmm.reporters.health``): the stop and drop policies' bookkeeping. The
policies in whole runs: tests/integration/test_long_runs.py."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.openmm.reporters import HealthReporter


def test_health_check_drop_policy_unit():
    """The drop policy's bookkeeping: every bad active replica named once, the energy check skipped in a report
    that drops, last good positions kept for the bad ones."""
    calls = []
    h = HealthReporter(10, 3, 2, max_force=100.0, on_blowup="drop", drop=lambda sim, bad, step: calls.append(bad))
    pos, frc = np.zeros((6, 3)), np.ones((6, 3))
    assert h.check(0, 1.0, pos, frc) == [] and np.array_equal(h.last_good, np.zeros((3, 2, 3)))
    pos2, frc2 = pos + 1.0, frc.copy()
    pos2[3, 1] = np.nan                                   # replica 1, bead 1
    frc2[5, 0] = 1e4                                      # replica 2, bead 1
    bad = h.check(10, float("nan"), pos2, frc2)
    assert [r for r, _ in bad] == [1, 2] and "position of bead 1 is NaN" in bad[0][1] and "force 1e+04" in bad[1][1]
    assert h.last_good[0].max() == 1.0 and h.last_good[1:].max() == 0.0
    h.active[[1, 2]] = False
    assert h.check(20, 1.0, pos2, frc2) == []            # inactive replicas are not checked again
    with pytest.raises(Exception, match="potential energy nan"):
        h.check(30, float("nan"), pos, frc)
    stop = HealthReporter(10, 3, 2, max_force=100.0)
    with pytest.raises(Exception, match="step 10: replica 1: position of bead 1 is NaN"):
        stop.check(10, 1.0, pos2, frc2)
    with pytest.raises(ValueError):
        HealthReporter(10, 1, 1, on_blowup="drop")
