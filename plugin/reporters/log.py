"""The CSV log of a packed-replica run (per-replica energy, temperature, speed) and cutting it back to a
checkpoint."""
from __future__ import annotations

import csv
import os
import time
from typing import Callable, List, Optional

import numpy as np
import openmm.unit as u

from ...atomic import AppendedFile, atomic_write
from ._common import BOLTZMANN_KJ_MOL_K, KJ_MOL, steps_to_next


def replica_temperatures(state, masses_amu: np.ndarray, replicas: int, dof: Optional[int] = None) -> np.ndarray:
    """Instantaneous temperature of each replica [R] in K from the state's velocities, with ``dof`` degrees
    of freedom per replica (default 3N: no constraints, no virtual sites, no centre-of-mass removal)."""
    v = state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond).reshape(replicas, -1, 3)
    m = np.asarray(masses_amu, dtype=float).reshape(1, -1, 1)
    ke = 0.5 * (m * v * v).sum(axis=(1, 2))                         # kJ/mol
    n = 3 * v.shape[1] if dof is None else int(dof)
    return 2.0 * ke / (n * BOLTZMANN_KJ_MOL_K)


class ReplicaCSVReporter:
    """A CSV log: one row per replica every ``interval`` steps.

    Columns: ``step, time_ps, replica, potential_energy_kJ_mol, temperature_K, ns_per_day`` (speed per
    replica since the previous report; the aggregate is R times it). ``replica_energies(positions_nm)``
    returns the per-replica potential energies [R] in kJ/mol (OpenMM itself only sees their sum); with one
    replica it may be None (the state's potential energy). ``dof``: degrees of freedom per replica for the
    temperature (default 3N; fewer with constraints or virtual sites). ``active[r] = False`` stops replica
    ``r``'s rows (a dropped replica).
    """

    COLUMNS = ["step", "time_ps", "replica", "potential_energy_kJ_mol", "temperature_K", "ns_per_day"]

    def __init__(self, path: str, interval: int, replicas: int, masses_amu: np.ndarray, dt_ps: float,
                 replica_energies: Optional[Callable[[np.ndarray], np.ndarray]], append: bool = False,
                 dof: Optional[int] = None):
        if replica_energies is None and int(replicas) != 1:
            raise ValueError("replica_energies is needed for more than one replica")
        self.path, self.interval, self.replicas = path, int(interval), int(replicas)
        self.masses = np.asarray(masses_amu, dtype=float)
        self.dt_ps = float(dt_ps)
        self.replica_energies = replica_energies
        self.dof = dof
        self._out = AppendedFile(path, "a" if append else "w", "writing the log", "opening the log", newline="")
        self._file = self._out.file
        self._writer = csv.writer(self._file)
        if not append:
            try:
                self._out.io(lambda: (self._writer.writerow(self.COLUMNS), self._file.flush()))
            except OSError:
                self.close()              # (quietly: the failure is being reported)
                raise
        self._last = None       # (wall time, step)
        self.last_rows: List[list] = []
        self.active = [True] * self.replicas

    def describeNextReport(self, simulation):
        return {"steps": steps_to_next(simulation, self.interval), "periodic": False,
                "include": ["positions", "velocities", "energy"]}

    def report(self, simulation, state):
        now, step = time.perf_counter(), simulation.currentStep
        speed = float("nan")
        if self._last is not None and step > self._last[1]:
            speed = (step - self._last[1]) * self.dt_ps * 1e-3 / ((now - self._last[0]) / 86400.0)
        self._last = (now, step)
        if self.replica_energies is None:
            energies = [state.getPotentialEnergy().value_in_unit(KJ_MOL)]
        else:
            energies = self.replica_energies(state.getPositions(asNumpy=True).value_in_unit(u.nanometer))
        temps = replica_temperatures(state, self.masses, self.replicas, self.dof)
        t_ps = state.getTime().value_in_unit(u.picosecond)
        self.last_rows = [[step, f"{t_ps:.6g}", r, f"{energies[r]:.10g}", f"{temps[r]:.6g}", f"{speed:.6g}"]
                          for r in range(self.replicas) if self.active[r]]
        # an OSError is one error naming the log (a resume cuts the log back to its checkpoint: no partial row kept)
        self._out.io(lambda: (self._writer.writerows(self.last_rows), self._file.flush()))

    def start_clock(self, step: int):
        self._last = (time.perf_counter(), step)

    def sync(self) -> None:
        """Flush and fsync the log (before a checkpoint)."""
        self._out.sync()

    def close(self):
        """Close the log (idempotent); after a failed write (already reported) its unwritten rows are dropped."""
        self._out.close()


def truncate_csv(path: str, last_step: int) -> None:
    """Keep the header and the leading rows with ``step <= last_step`` (atomic rewrite).

    The log is written in step order, so the rows to keep are a prefix; it ends at the first row past
    ``last_step`` or the first incomplete row (a run killed mid-write can leave a partial last row, whose step
    may be cut short, e.g. ``3`` of ``30``)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    keep = rows[:1]
    for r in rows[1:]:
        if len(r) != len(rows[0]) or not r[0].isdigit() or int(r[0]) > last_step:
            break
        keep.append(r)
    with atomic_write(path, "w", what="cutting back (to the checkpoint) the log", newline="") as f:
        csv.writer(f).writerows(keep)
