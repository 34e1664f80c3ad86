"""The CSV log of a packed-replica run (per-replica energy, temperature, speed): :class:`ReplicaLog` writes it,
for plain runs through the OpenMM reporter :class:`ReplicaCSVReporter`, for ensembles from the ensemble driver
(:mod:`flashschnet.openmm.ensemble.driver`)."""
from __future__ import annotations

import time
from typing import Callable, Iterable, List, Optional, Sequence

import numpy as np
import openmm.unit as u

from ..units import BOLTZMANN_KJ_MOL_K, KJ_MOL
from ._common import steps_to_next
from .files import CSVFile

#: the log's columns (an ensemble's log adds ``thermostat_K``)
LOG_COLUMNS = ["step", "time_ps", "replica", "potential_energy_kJ_mol", "temperature_K", "ns_per_day"]


def ns_per_day(steps: int, dt_ps: float, wall_s: float) -> float:
    """Simulated nanoseconds per wall-clock day (NaN for an empty or instant run)."""
    return steps * dt_ps * 1e-3 / (wall_s / 86400.0) if wall_s > 0 and steps > 0 else float("nan")


def replica_temperatures(state, masses_amu: np.ndarray, replicas: int, dof: Optional[int] = None) -> np.ndarray:
    """Instantaneous temperature of each replica [R] in K from the state's velocities, with ``dof`` degrees
    of freedom per replica (default 3N: no constraints, no virtual sites, no centre-of-mass removal)."""
    v = state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond).reshape(replicas, -1, 3)
    m = np.asarray(masses_amu, dtype=float).reshape(1, -1, 1)
    ke = 0.5 * (m * v * v).sum(axis=(1, 2))                         # kJ/mol
    n = 3 * v.shape[1] if dof is None else int(dof)
    return 2.0 * ke / (n * BOLTZMANN_KJ_MOL_K)


class ReplicaLog:
    """The CSV log of a packed-replica run: per report, one row per active replica.

    Columns: :data:`LOG_COLUMNS` -- ``step, time_ps, replica, potential_energy_kJ_mol, temperature_K`` (kinetic),
    ``ns_per_day`` (per replica, since the previous report: :meth:`speed`) -- and, with ``thermostat``,
    ``thermostat_K`` (an ensemble walker's ladder temperature during the segment that ends at this step). Numbers
    are written with 6 significant digits (time, temperature, speed) or 10 (energy, thermostat).

    Parameters
    ----------
    path : str
    dt_ps : float
        Time step, ps (for the speed).
    append : bool
        Append to an existing log (cut back to its checkpoint first); a new log starts with the header.
    thermostat : bool
        Add the ``thermostat_K`` column.
    """

    def __init__(self, path: str, dt_ps: float, append: bool = False, thermostat: bool = False):
        self.path, self.dt_ps, self.thermostat = path, float(dt_ps), bool(thermostat)
        self.columns = LOG_COLUMNS + (["thermostat_K"] if thermostat else [])
        self.file = CSVFile(path, self.columns, append, "writing the log", "opening the log")
        self._last = None       # (wall time, step)

    def start_clock(self, step: int) -> None:
        """Start the speed clock at ``step`` (the start of the step loop)."""
        self._last = (time.perf_counter(), step)

    def speed(self, step: int) -> float:
        """ns/day per replica from the clock to now at ``step`` (NaN before the clock started or when no step was
        made); the clock restarts here."""
        now = time.perf_counter()
        speed = float("nan")
        if self._last is not None and step > self._last[1]:
            speed = ns_per_day(step - self._last[1], self.dt_ps, now - self._last[0])
        self._last = (now, step)
        return speed

    def write(self, step: int, time_ps: float, speed: float, energies: Sequence[float], temperatures: Sequence[float],
              replicas: Iterable[int], thermostat: Optional[Sequence[float]] = None) -> List[list]:
        """Append the rows of ``replicas`` (indices into ``energies``, kJ/mol, ``temperatures``, K, and, with the
        column, ``thermostat``, K) and return them. A failed write is one
        :class:`~flashschnet.errors.OutputError` naming the log (a resume cuts it back to its checkpoint)."""
        rows = [[step, f"{time_ps:.6g}", r, f"{energies[r]:.10g}", f"{temperatures[r]:.6g}", f"{speed:.6g}"]
                + ([f"{thermostat[r]:.10g}"] if self.thermostat else []) for r in replicas]
        self.file.rows(rows)
        return rows

    def sync(self) -> int:
        """Flush and fsync (before a checkpoint); return the size in bytes."""
        return self.file.sync()

    def close(self) -> None:
        """Close (idempotent); after a failed write (already reported) its unwritten rows are dropped."""
        self.file.close()


class ReplicaCSVReporter:
    """A CSV log (:class:`ReplicaLog`) as an OpenMM reporter: one row per replica every ``interval`` steps.

    Columns: ``step, time_ps, replica, potential_energy_kJ_mol, temperature_K, ns_per_day`` (speed per
    replica since the previous report; the aggregate is R times it). ``replica_energies(positions_nm)``
    returns the per-replica potential energies [R] in kJ/mol (OpenMM itself only sees their sum); with one
    replica it may be None (the state's potential energy). ``dof``: degrees of freedom per replica for the
    temperature (default 3N; fewer with constraints or virtual sites). ``active[r] = False`` stops replica
    ``r``'s rows (a dropped replica).
    """

    COLUMNS = LOG_COLUMNS

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
        self.log = ReplicaLog(path, dt_ps, append)
        self.last_rows: List[list] = []
        self.active = [True] * self.replicas

    def describeNextReport(self, simulation):
        return {"steps": steps_to_next(simulation, self.interval), "periodic": False,
                "include": ["positions", "velocities", "energy"]}

    def report(self, simulation, state):
        step = simulation.currentStep
        speed = self.log.speed(step)
        if self.replica_energies is None:
            energies = [state.getPotentialEnergy().value_in_unit(KJ_MOL)]
        else:
            energies = self.replica_energies(state.getPositions(asNumpy=True).value_in_unit(u.nanometer))
        temps = replica_temperatures(state, self.masses, self.replicas, self.dof)
        t_ps = state.getTime().value_in_unit(u.picosecond)
        self.last_rows = self.log.write(step, t_ps, speed, energies, temps,
                                        [r for r in range(self.replicas) if self.active[r]])

    def start_clock(self, step: int):
        """Start the speed clock at ``step`` (:meth:`ReplicaLog.start_clock`)."""
        self.log.start_clock(step)

    def sync(self) -> None:
        """Flush and fsync the log (before a checkpoint)."""
        self.log.sync()

    def close(self):
        """Close the log (idempotent); after a failed write (already reported) its unwritten rows are dropped."""
        self.log.close()
