"""OpenMM reporters for packed-replica CG simulations.

All of them follow OpenMM's reporter protocol (``describeNextReport`` / ``report``) and can be appended to
``Simulation.reporters`` in user scripts. Replica ``r`` of a packed System owns particles
``r*N .. r*N+N-1``.

* :class:`HealthReporter` -- stops the run with :class:`~flashschnet.errors.SimulationInstabilityError`
  naming the step, replica and bead when energies, forces or positions become NaN or huge. Put it first,
  so no other reporter records a broken state.
* :class:`ReplicaDCDReporter` -- one DCD per replica.
* :class:`ReplicaCSVReporter` -- per-replica potential energy, temperature and speed.
* :class:`CheckpointReporter` -- atomic checkpoints (temporary file + rename) with a JSON side file that
  records how much of each output belonged to the checkpointed state, so a resumed run can cut what was
  written after it.
"""
from __future__ import annotations

import csv
import json
import os
import struct
import time
from typing import Callable, List, Optional, Sequence

import numpy as np
import openmm.app as app
import openmm.unit as u

from ..errors import InputError, SimulationInstabilityError

KJ_MOL = u.kilojoule_per_mole
KJ_MOL_NM = u.kilojoule_per_mole / u.nanometer
BOLTZMANN_KJ_MOL_K = (u.BOLTZMANN_CONSTANT_kB * u.AVOGADRO_CONSTANT_NA).value_in_unit(KJ_MOL / u.kelvin)


def _steps_to_next(simulation, interval: int) -> int:
    return interval - simulation.currentStep % interval


def replica_temperatures(state, masses_amu: np.ndarray, replicas: int, dof: Optional[int] = None) -> np.ndarray:
    """Instantaneous temperature of each replica [R] in K from the state's velocities, with ``dof`` degrees
    of freedom per replica (default 3N: no constraints, no virtual sites, no centre-of-mass removal)."""
    v = state.getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond).reshape(replicas, -1, 3)
    m = np.asarray(masses_amu, dtype=float).reshape(1, -1, 1)
    ke = 0.5 * (m * v * v).sum(axis=(1, 2))                         # kJ/mol
    n = 3 * v.shape[1] if dof is None else int(dof)
    return 2.0 * ke / (n * BOLTZMANN_KJ_MOL_K)


class HealthReporter:
    """Check energy, forces and positions every ``interval`` steps; raise on NaN/huge values.

    Parameters
    ----------
    interval : int
    replicas, n_beads : int
        Layout of the packed System (to name the replica and bead at fault).
    bead_label : callable(int) -> str, optional
        Names bead ``i`` of a replica in messages (e.g. ``CGMolecule.bead_label``).
    max_force : float
        Largest acceptable force component, kJ/mol/nm.
    max_energy : float
        Largest acceptable |potential energy| per bead, kJ/mol.
    checkpoint_hint : callable() -> str, optional
        Returns where the last good checkpoint is, for the message.
    """

    def __init__(self, interval: int, replicas: int, n_beads: int, bead_label: Optional[Callable[[int], str]] = None,
                 max_force: float = 1.0e5, max_energy: float = 1.0e5, checkpoint_hint: Optional[Callable[[], str]] = None):
        self.interval = int(interval)
        self.replicas, self.n_beads = int(replicas), int(n_beads)
        self.bead_label = bead_label or (lambda i: f"bead {i}")
        self.max_force, self.max_energy = float(max_force), float(max_energy)
        self.checkpoint_hint = checkpoint_hint or (lambda: "")

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False,
                "include": ["positions", "forces", "energy"]}

    def _fail(self, step: int, what: str):
        hint = self.checkpoint_hint()
        raise SimulationInstabilityError(f"step {step}: {what}; stopping" + (f" ({hint})" if hint else ""))

    def check(self, step: int, energy: float, positions: np.ndarray, forces: np.ndarray) -> None:
        """The checks themselves (positions nm, forces kJ/mol/nm, both [R*N, 3]; energy kJ/mol)."""
        pos = positions.reshape(self.replicas, self.n_beads, 3)
        frc = forces.reshape(self.replicas, self.n_beads, 3)
        for name, arr in (("position", pos), ("force", frc)):
            bad = ~np.isfinite(arr).all(axis=2)
            if bad.any():
                r, i = map(int, np.argwhere(bad)[0])
                self._fail(step, f"replica {r}: {name} of {self.bead_label(i)} is NaN or infinite")
        fmax = np.abs(frc).max(axis=2)
        if (fmax > self.max_force).any():
            r, i = np.unravel_index(int(np.argmax(fmax)), fmax.shape)
            self._fail(step, f"replica {int(r)}: force {fmax[r, i]:.3g} kJ/mol/nm on {self.bead_label(int(i))} "
                             f"exceeds {self.max_force:.3g} (the simulation is blowing up: a smaller --dt or a better model)")
        if not np.isfinite(energy) or abs(energy) > self.max_energy * self.replicas * self.n_beads:
            self._fail(step, f"potential energy {energy:.6g} kJ/mol is NaN or huge")

    def report(self, simulation, state):
        self.check(simulation.currentStep, state.getPotentialEnergy().value_in_unit(KJ_MOL),
                   state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
                   state.getForces(asNumpy=True).value_in_unit(KJ_MOL_NM))


class ReplicaDCDReporter:
    """Write one DCD file per replica (``paths[r]``) every ``interval`` steps.

    ``topology`` is the topology of ONE replica (``N`` atoms). With ``append=True`` the files must exist
    (see :func:`truncate_dcd` for cutting them back to a checkpoint first).
    """

    def __init__(self, paths: Sequence[str], interval: int, topology, dt_ps: float, append: bool = False,
                 first_step: int = 0):
        self.paths = list(paths)
        self.interval = int(interval)
        self.n_beads = topology.getNumAtoms()
        self._files = [open(p, "r+b" if append else "wb") for p in self.paths]
        self._dcd = [app.DCDFile(f, topology, dt_ps, first_step, self.interval, append) for f in self._files]

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False, "include": ["positions"]}

    def report(self, simulation, state):
        pos = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        for r, dcd in enumerate(self._dcd):
            block = pos[r * self.n_beads:(r + 1) * self.n_beads]
            dcd.writeModel(block * u.nanometer)
        for f in self._files:
            f.flush()

    def sizes(self) -> List[int]:
        """Bytes written so far to each file."""
        return [f.tell() if not f.closed else os.path.getsize(p) for f, p in zip(self._files, self.paths)]

    @property
    def frames(self) -> int:
        return self._dcd[0]._modelCount if self._dcd else 0

    def close(self):
        for f in self._files:
            if not f.closed:
                f.close()


def truncate_dcd(path: str, nbytes: int, nframes: int) -> None:
    """Cut a DCD file written by OpenMM back to ``nbytes`` holding ``nframes`` frames (header updated)."""
    with open(path, "r+b") as f:
        f.truncate(nbytes)
        f.seek(8)
        f.write(struct.pack("<i", nframes))
        f.seek(12)
        first, interval = struct.unpack("<ii", f.read(8))
        f.seek(20)
        f.write(struct.pack("<i", first + max(nframes - 1, 0) * interval))


def read_dcd(path: str, atoms: Optional[np.ndarray] = None) -> np.ndarray:
    """Positions [T, N, 3] in nm (float64) from a DCD file written by OpenMM (CHARMM format, Angstrom, with or
    without unit-cell records); ``atoms`` selects particle indices. Frames past the header's count and a
    partial last frame (a run killed mid-write) are ignored."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        if struct.unpack("<i", data[:4])[0] != 84 or data[4:8] != b"CORD":
            raise ValueError("not a little-endian CHARMM DCD file")
        header = struct.unpack("<20i", data[8:88])
        nframes, has_cell = header[0], header[10] != 0
        off = 92
        (n_title,) = struct.unpack("<i", data[off:off + 4])            # title record
        off += 4 + n_title + 4
        off += 4
        (n,) = struct.unpack("<i", data[off:off + 4])
        off += 8
    except (struct.error, ValueError) as exc:
        raise InputError(f"{path}: not a readable DCD trajectory ({exc})") from None
    frame_bytes = (56 if has_cell else 0) + 3 * (8 + 4 * n)
    count = min(nframes, (len(data) - off) // frame_bytes)
    out = np.empty((count, n, 3))
    for t in range(count):
        p = off + t * frame_bytes + (56 if has_cell else 0)
        for axis in range(3):
            out[t, :, axis] = np.frombuffer(data, dtype="<f4", count=n, offset=p + 4)
            p += 8 + 4 * n
    out *= 0.1                                                          # Angstrom -> nm
    return out if atoms is None else out[:, np.asarray(atoms, dtype=int)]


class ReplicaCSVReporter:
    """A CSV log: one row per replica every ``interval`` steps.

    Columns: ``step, time_ps, replica, potential_energy_kJ_mol, temperature_K, ns_per_day`` (speed per
    replica since the previous report; the aggregate is R times it). ``replica_energies(positions_nm)``
    returns the per-replica potential energies [R] in kJ/mol (OpenMM itself only sees their sum); with one
    replica it may be None (the state's potential energy). ``dof``: degrees of freedom per replica for the
    temperature (default 3N; fewer with constraints or virtual sites).
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
        self._file = open(path, "a" if append else "w", newline="")
        self._writer = csv.writer(self._file)
        if not append:
            self._writer.writerow(self.COLUMNS)
        self._last = None       # (wall time, step)
        self.last_rows: List[list] = []

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False,
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
                          for r in range(self.replicas)]
        self._writer.writerows(self.last_rows)
        self._file.flush()

    def start_clock(self, step: int):
        self._last = (time.perf_counter(), step)

    def close(self):
        if not self._file.closed:
            self._file.close()


def truncate_csv(path: str, last_step: int) -> None:
    """Keep the header and the rows with ``step <= last_step`` (atomic rewrite)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    keep = rows[:1] + [r for r in rows[1:] if r and int(r[0]) <= last_step]
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(keep)
    os.replace(tmp, path)


CHECKPOINT_MAGIC = b"FSCHNCK1"


class CheckpointReporter:
    """Atomic checkpoints every ``interval`` steps.

    One file: ``CHECKPOINT_MAGIC``, an 8-byte length, a JSON header (``{"step", "time_ps", ...extra()}``)
    and OpenMM's checkpoint (``Context.createCheckpoint``; reloads on the same platform and OpenMM version).
    It is written to a temporary file, synced and renamed into place, so a run killed at any moment leaves
    either the previous complete checkpoint or the new one. ``extra()`` adds e.g. the trajectory sizes that
    belong to this state.
    """

    def __init__(self, path: str, interval: int, extra: Optional[Callable[[], dict]] = None):
        self.path, self.interval = path, int(interval)
        self.extra = extra or (lambda: {})
        self.last_step: Optional[int] = None

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False, "include": []}

    def report(self, simulation, state):
        self.save(simulation)

    def save(self, simulation):
        meta = {"step": int(simulation.currentStep),
                "time_ps": simulation.context.getTime().value_in_unit(u.picosecond)}
        meta.update(self.extra())
        header = json.dumps(meta).encode()
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header)
            f.write(simulation.context.createCheckpoint())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.last_step = meta["step"]


def read_checkpoint(path: str):
    """Return ``(meta dict, openmm checkpoint bytes)`` of a file written by :class:`CheckpointReporter`."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != CHECKPOINT_MAGIC or len(data) < 16:
        raise ValueError(f"{path}: not a flashschnet checkpoint")
    (n,) = struct.unpack("<Q", data[8:16])
    return json.loads(data[16:16 + n].decode()), data[16 + n:]
