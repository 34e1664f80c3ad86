"""flashschnet.openmm.reporters.log: ReplicaLog, the one CSV log plain runs and ensembles write (the same columns
and number formats; an ensemble's adds thermostat_K), and its speed clock."""
from __future__ import annotations

import math

import numpy as np

from flashschnet.openmm.reporters import ReplicaLog


def test_the_ensemble_log_is_the_plain_runs_log_with_a_thermostat_column(tmp_path):
    """ReplicaLog writes both logs: the same columns and number formats; an ensemble's adds thermostat_K."""
    plain, tempering = ReplicaLog(str(tmp_path / "a.csv"), 0.004), ReplicaLog(str(tmp_path / "b.csv"), 0.004,
                                                                               thermostat=True)
    energies, temps, ladder = np.array([-1.234567890123, 2.0]), np.array([301.23456789, 299.0]), [300.0, 336.3]
    for log in (plain, tempering):
        assert math.isnan(log.speed(0))                          # no clock yet
        log.write(0, 0.0, float("nan"), energies, temps, [0, 1], thermostat=ladder)
        log.start_clock(0)
        assert math.isnan(log.speed(0))                          # no step made
        speed = log.speed(10)
        assert speed > 0 and math.isfinite(speed)
        rows = log.write(10, 0.04, speed, energies, temps, [1], thermostat=ladder)   # replica 0 dropped
        log.close()
    assert rows == [[10, "0.04", 1, "2", "299", f"{speed:.6g}", "336.3"]]
    a, b = (tmp_path / "a.csv").read_text().splitlines(), (tmp_path / "b.csv").read_text().splitlines()
    assert a[0] == "step,time_ps,replica,potential_energy_kJ_mol,temperature_K,ns_per_day"
    assert b[0] == a[0] + ",thermostat_K"
    assert a[1] == "0,0,0,-1.23456789,301.235,nan" and b[1] == a[1] + ",300"
    assert [row.rsplit(",", 2)[0] for row in b[1:]] == [row.rsplit(",", 1)[0] for row in a[1:]]
