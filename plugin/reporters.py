"""OpenMM reporters for packed-replica CG simulations.

All of them follow OpenMM's reporter protocol (``describeNextReport`` / ``report``) and can be appended to
``Simulation.reporters`` in user scripts. Replica ``r`` of a packed System owns particles
``r*N .. r*N+N-1``.

* :class:`HealthReporter` -- stops the run with :class:`~flashschnet.errors.SimulationInstabilityError`
  naming the step, replica and bead when energies, forces or positions become NaN or huge, or (policy
  ``"drop"``) hands a broken replica to a callback that freezes it while the others go on. Put it first,
  so no other reporter records a broken state.
* :class:`ReplicaDCDReporter` -- one DCD per replica (each frame written before the header counts it).
* :class:`ReplicaCSVReporter` -- per-replica potential energy, temperature and speed.
* :class:`CheckpointReporter` -- atomic checkpoints (temporary file + fsync + rename + directory fsync)
  whose header records how much of each output belonged to the checkpointed state, so a resumed run can
  cut what was written after it.

What a run killed at an arbitrary moment (SIGKILL, power loss after the last fsync) leaves behind: the
previous or the new checkpoint, never a torn one (a stray ``*.tmp`` is ignored and overwritten); DCD files
whose header never counts a frame that is not complete, possibly followed by one complete frame the header
does not count yet or by a partial frame; a CSV log whose last row may be partial. :func:`read_dcd` reads
the frames the header counts; :func:`truncate_dcd` and :func:`truncate_csv` cut both back to the checkpoint.
"""
from __future__ import annotations

import csv
import json
import math
import os
import struct
import time
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import openmm.app as app
import openmm.unit as u
from openmm.app.internal.unitcell import computeLengthsAndAngles

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
    """Check energy, forces and positions every ``interval`` steps; raise on NaN/huge values (or drop the
    replica at fault).

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
    on_blowup : {"stop", "drop"}
        ``"stop"`` (default): raise :class:`SimulationInstabilityError` at the first problem. ``"drop"``: the
        active replicas whose positions or forces are NaN/infinite or whose largest force component exceeds
        ``max_force`` are marked inactive and handed to ``drop(simulation, [(replica, reason), ...], step)``
        (which should freeze them, e.g. :func:`flashschnet.openmm.runner.freeze_replicas`); inactive replicas
        are not checked again. A NaN or huge *total* energy names no replica and stops the run under both
        policies (with ``"drop"`` it is checked only in reports that dropped nobody: the energy of such a
        report still contains the replicas just dropped).

    Attributes
    ----------
    active : ndarray, bool, [R]
        Replicas still checked.
    last_good : ndarray, float64, [R, N, 3] or None
        Each replica's positions (nm) at its last passed check or :meth:`remember` (NaN before either).
    """

    def __init__(self, interval: int, replicas: int, n_beads: int, bead_label: Optional[Callable[[int], str]] = None,
                 max_force: float = 1.0e5, max_energy: float = 1.0e5, checkpoint_hint: Optional[Callable[[], str]] = None,
                 on_blowup: str = "stop", drop: Optional[Callable[[object, List[Tuple[int, str]], int], None]] = None):
        if on_blowup not in ("stop", "drop"):
            raise ValueError(f"on_blowup must be 'stop' or 'drop', got {on_blowup!r}")
        if on_blowup == "drop" and drop is None:
            raise ValueError("on_blowup='drop' needs a drop callback")
        self.interval = int(interval)
        self.replicas, self.n_beads = int(replicas), int(n_beads)
        self.bead_label = bead_label or (lambda i: f"bead {i}")
        self.max_force, self.max_energy = float(max_force), float(max_energy)
        self.checkpoint_hint = checkpoint_hint or (lambda: "")
        self.on_blowup, self.drop = on_blowup, drop
        self.active = np.ones(self.replicas, dtype=bool)
        self.last_good: Optional[np.ndarray] = None

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False,
                "include": ["positions", "forces", "energy"]}

    def _fail(self, step: int, what: str):
        hint = self.checkpoint_hint()
        raise SimulationInstabilityError(f"step {step}: {what}; stopping" + (f" ({hint})" if hint else ""))

    def remember(self, positions: np.ndarray) -> None:
        """Take ``positions`` [R*N, 3] (nm) as every active replica's last good positions (e.g. the state a
        resumed run starts from, which no check has seen)."""
        pos = np.array(positions, dtype=float).reshape(self.replicas, self.n_beads, 3)
        if self.last_good is None:
            self.last_good = np.full(pos.shape, np.nan)
        self.last_good[self.active] = pos[self.active]

    def _force_message(self, r: int, i: int, f: float) -> str:
        return (f"replica {r}: force {f:.3g} kJ/mol/nm on {self.bead_label(i)} exceeds {self.max_force:.3g} "
                "(the simulation is blowing up: a smaller --dt or a better model)")

    def check(self, step: int, energy: float, positions: np.ndarray, forces: np.ndarray) -> List[Tuple[int, str]]:
        """The checks themselves (positions nm, forces kJ/mol/nm, both [R*N, 3]; energy kJ/mol).

        Policy ``"stop"``: raises at the first problem, returns ``[]``. Policy ``"drop"``: returns the active
        replicas to drop as ``[(replica, reason)]`` in replica order (one reason each: a NaN position first,
        then a NaN force, then the largest force), without changing :attr:`active`; raises only for a bad
        total energy. Passed replicas' positions become their :attr:`last_good`.
        """
        pos = positions.reshape(self.replicas, self.n_beads, 3)
        frc = forces.reshape(self.replicas, self.n_beads, 3)
        act = self.active
        stop = self.on_blowup == "stop"
        found = {}
        for name, arr in (("position", pos), ("force", frc)):
            bad = ~np.isfinite(arr).all(axis=2) & act[:, None]
            if bad.any():
                if stop:
                    r, i = map(int, np.argwhere(bad)[0])
                    self._fail(step, f"replica {r}: {name} of {self.bead_label(i)} is NaN or infinite")
                for r, i in np.argwhere(bad):
                    found.setdefault(int(r), f"{name} of {self.bead_label(int(i))} is NaN or infinite")
        fmax = np.abs(frc).max(axis=2)
        fmax[~act] = 0.0
        fmax[list(found)] = 0.0
        if (fmax > self.max_force).any():
            if stop:
                r, i = np.unravel_index(int(np.argmax(fmax)), fmax.shape)
                self._fail(step, self._force_message(int(r), int(i), fmax[r, i]))
            for r in np.nonzero((fmax > self.max_force).any(axis=1))[0]:
                i = int(np.argmax(fmax[r]))
                found[int(r)] = self._force_message(int(r), i, fmax[r, i]).split(": ", 1)[1]
        if not found and (not np.isfinite(energy) or abs(energy) > self.max_energy * self.replicas * self.n_beads):
            self._fail(step, f"potential energy {energy:.6g} kJ/mol is NaN or huge")
        ok = act.copy()
        ok[list(found)] = False
        if self.last_good is None:
            self.last_good = np.full(pos.shape, np.nan)
        self.last_good[ok] = pos[ok]
        return sorted(found.items())

    def rescue(self, simulation, error: str) -> bool:
        """After OpenMM refused to go on (``error``, e.g. the CPU platform's "Particle coordinate is NaN"):
        with policy ``"drop"``, drop the active replicas whose positions are NaN or infinite and return True
        (the run can go on); False when the policy is ``"stop"`` or no replica is to blame."""
        if self.on_blowup != "drop":
            return False
        pos = simulation.context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
        bad = ~np.isfinite(pos.reshape(self.replicas, self.n_beads, 3)).all(axis=2) & self.active[:, None]
        if not bad.any():
            return False
        found = {}
        for r, i in np.argwhere(bad):
            found.setdefault(int(r), f"position of {self.bead_label(int(i))} is NaN or infinite (OpenMM: {error})")
        for r in found:
            self.active[r] = False
        self.drop(simulation, sorted(found.items()), simulation.currentStep)
        return True

    def report(self, simulation, state):
        step = simulation.currentStep
        bad = self.check(step, state.getPotentialEnergy().value_in_unit(KJ_MOL),
                         state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
                         state.getForces(asNumpy=True).value_in_unit(KJ_MOL_NM))
        if bad:
            for r, _ in bad:
                self.active[r] = False
            self.drop(simulation, bad, step)


class ReplicaDCDReporter:
    """Write one DCD file per replica (``paths[r]``) every ``interval`` steps.

    ``topology`` is the topology of ONE replica (``N`` atoms). With ``append=True`` the files must exist
    (see :func:`truncate_dcd` for cutting them back to a checkpoint first). The files are OpenMM's DCD
    format (header written by ``openmm.app.DCDFile``), but each frame is written and flushed *before* the
    header's frame count and last step are raised to include it (``DCDFile.writeModel`` does it the other
    way round): a run killed between the two leaves a header that counts one complete frame too few, never
    one that counts a missing or partial frame. ``active[r] = False`` stops replica ``r``'s file (a dropped
    replica).
    """

    def __init__(self, paths: Sequence[str], interval: int, topology, dt_ps: float, append: bool = False,
                 first_step: int = 0):
        self.paths = list(paths)
        self.interval = int(interval)
        self.n_beads = topology.getNumAtoms()
        self._box = topology.getPeriodicBoxVectors()
        self._files = [open(p, "r+b" if append else "w+b") for p in self.paths]
        self._dcd = [app.DCDFile(f, topology, dt_ps, first_step, self.interval, append) for f in self._files]
        self._counts = [d._modelCount for d in self._dcd]
        self._header = []                                  # (first step, interval, dt) as in each file
        for f in self._files:
            f.flush()
            f.seek(12)
            first, every = struct.unpack("<ii", f.read(8))
            f.seek(44)
            (dt,) = struct.unpack("<f", f.read(4))
            self._header.append([first, every, dt])
            f.seek(0, os.SEEK_END)
        self.active = [True] * len(self.paths)

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False, "include": ["positions"]}

    def _frame(self, xyz_nm: np.ndarray) -> bytes:
        if not np.isfinite(xyz_nm).all():
            raise ValueError("Particle position is NaN or infinite; not written to the DCD file")
        parts = []
        if self._box is not None:                         # as DCDFile: the topology's box, in Angstrom
            a, b, c, alpha, beta, gamma = computeLengthsAndAngles(self._box)
            parts.append(struct.pack("<i6di", 48, 10 * a, math.sin(math.pi / 2 - gamma), 10 * b,
                                     math.sin(math.pi / 2 - beta), math.sin(math.pi / 2 - alpha), 10 * c, 48))
        length = struct.pack("<i", 4 * xyz_nm.shape[0])
        for axis in range(3):
            parts += [length, (10.0 * xyz_nm[:, axis]).astype("<f4").tobytes(), length]
        return b"".join(parts)

    def _write(self, r: int, xyz_nm: np.ndarray) -> None:
        f, head = self._files[r], self._header[r]
        frame = self._frame(xyz_nm)
        n = self._counts[r] + 1
        f.seek(0, os.SEEK_END)
        f.write(frame)
        f.flush()                                          # the frame is in the file ...
        if head[1] > 1 and head[0] + n * head[1] > 1 << 31:
            # as DCDFile: keep the 32-bit step fields in range by recording fewer, longer steps
            head[0] //= head[1]
            head[2] *= head[1]
            head[1] = 1
            f.seek(12)
            f.write(struct.pack("<ii", head[0], head[1]))
            f.seek(44)
            f.write(struct.pack("<f", head[2]))
        f.seek(8)
        f.write(struct.pack("<i", n))                      # ... before the header counts it
        f.seek(20)
        f.write(struct.pack("<i", head[0] + (n - 1) * head[1]))
        f.seek(0, os.SEEK_END)
        f.flush()
        self._counts[r] = n

    def report(self, simulation, state):
        pos = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        for r in range(len(self._files)):
            if self.active[r]:
                self._write(r, pos[r * self.n_beads:(r + 1) * self.n_beads])

    def sizes(self) -> List[int]:
        """Bytes written so far to each file."""
        return [f.tell() if not f.closed else os.path.getsize(p) for f, p in zip(self._files, self.paths)]

    @property
    def frames(self) -> int:
        """Frames in the first file."""
        return self._counts[0] if self._counts else 0

    @property
    def frame_counts(self) -> List[int]:
        """Frames in each file (they differ once a replica was dropped)."""
        return list(self._counts)

    def sync(self) -> None:
        """Flush and fsync every file (before a checkpoint that refers to their sizes)."""
        for f in self._files:
            if not f.closed:
                f.flush()
                os.fsync(f.fileno())

    def close(self):
        for f in self._files:
            if not f.closed:
                f.close()


def truncate_dcd(path: str, nbytes: int, nframes: int) -> None:
    """Cut a DCD file written by OpenMM back to ``nbytes`` holding ``nframes`` frames (header updated).

    Raises :class:`InputError` when the file is shorter than ``nbytes`` (data the checkpoint relies on was
    lost, e.g. by a system crash before it reached the disk)."""
    size = os.path.getsize(path) if os.path.exists(path) else -1
    if size < nbytes:
        raise InputError(f"{path}: {'missing' if size < 0 else f'holds {size} bytes'}, but the checkpoint "
                         f"counts {nbytes} bytes ({nframes} frames) in it; the trajectory lost data the checkpoint "
                         "relies on; start a new run")
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
    without unit-cell records); ``atoms`` selects particle indices.

    Frames past the header's count and a partial last frame (a run killed mid-write) are ignored: ``T`` is
    the smaller of the header's count and the number of complete frames. mdtraj (VMD's dcdplugin) instead
    counts the complete frames from the file size whatever the header says (printing a "DCD header claims
    ... frames" warning on a mismatch) and also ignores a partial last frame; so for a file a killed run
    left behind it may show one complete frame more than this function (see :class:`ReplicaDCDReporter`).
    mdtraj cannot open a DCD file without frames at all (``OSError: Could not open file``; a run killed
    before its first frame); this function returns ``[0, N, 3]``.
    """
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
        self._file = open(path, "a" if append else "w", newline="")
        self._writer = csv.writer(self._file)
        if not append:
            self._writer.writerow(self.COLUMNS)
        self._last = None       # (wall time, step)
        self.last_rows: List[list] = []
        self.active = [True] * self.replicas

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
                          for r in range(self.replicas) if self.active[r]]
        self._writer.writerows(self.last_rows)
        self._file.flush()

    def start_clock(self, step: int):
        self._last = (time.perf_counter(), step)

    def sync(self) -> None:
        """Flush and fsync the log (before a checkpoint)."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self):
        if not self._file.closed:
            self._file.close()


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
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(keep)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


CHECKPOINT_MAGIC = b"FSCHNCK1"


def _fsync_dir(path: str) -> None:
    """fsync a directory, so a rename in it survives a system crash (no-op where directories cannot be
    opened, e.g. Windows)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointReporter:
    """Atomic checkpoints every ``interval`` steps.

    One file: ``CHECKPOINT_MAGIC``, an 8-byte length, a JSON header (``{"step", "time_ps", ...extra()}``)
    and OpenMM's checkpoint (``Context.createCheckpoint``; reloads on the same platform and OpenMM version).
    It is written to a temporary file (``path + ".tmp"``), fsynced, renamed into place and the directory
    fsynced, so a run killed at any moment (or a system crash) leaves either the previous complete checkpoint
    or the new one; a leftover temporary file is never read and is overwritten by the next save. ``extra()``
    adds e.g. the trajectory sizes that belong to this state; ``before_save()`` runs first (e.g. fsync those
    trajectories, so the checkpoint never counts bytes that a crash could lose).
    """

    def __init__(self, path: str, interval: int, extra: Optional[Callable[[], dict]] = None,
                 before_save: Optional[Callable[[], None]] = None):
        self.path, self.interval = path, int(interval)
        self.extra = extra or (lambda: {})
        self.before_save = before_save
        self.last_step: Optional[int] = None

    def describeNextReport(self, simulation):
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": False, "include": []}

    def report(self, simulation, state):
        self.save(simulation)

    def save(self, simulation):
        if self.before_save is not None:
            self.before_save()
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
        _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self.last_step = meta["step"]


def read_checkpoint(path: str):
    """Return ``(meta dict, openmm checkpoint bytes)`` of a file written by :class:`CheckpointReporter`."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != CHECKPOINT_MAGIC or len(data) < 16:
        raise ValueError(f"{path}: not a flashschnet checkpoint")
    (n,) = struct.unpack("<Q", data[8:16])
    return json.loads(data[16:16 + n].decode()), data[16 + n:]


TRAJECTORY_FORMATS = {".dcd": "dcd", ".xtc": "xtc", ".h5": "hdf5", ".hdf5": "hdf5"}


class ReplicaTrajectoryReporter:
    """One trajectory file per replica of a packed System (DCD, XTC or HDF5), through mdtraj's file classes.

    Replica ``r`` is particles ``r*N .. r*N+N-1`` (``N`` atoms in ``topology``) and goes to
    ``path_pattern.format(replica=r)``, e.g. ``"rep_{replica:03d}.xtc"``. Use it from any OpenMM script::

        simulation.reporters.append(ReplicaTrajectoryReporter("rep_{replica:03d}.xtc", 100, R, top1))
        simulation.step(n)
        ...  # the reporter's close() flushes and closes the files

    Units and unit cells, per format (what mdtraj reads back as ``Trajectory.xyz`` / ``unitcell_vectors``):

    ======  ===============  ===========================================  ===================================
    format  positions        periodic System (box of each frame)          non-periodic System
    ======  ===============  ===========================================  ===================================
    .dcd    Angstrom, f32    CHARMM unit-cell record: lengths (A), angles  no unit-cell record
    .xtc    nm, 1e-3 nm      box vectors (nm), with time (ps) and step    zero box (GROMACS: no box)
    .h5     nm, f32          cell_lengths (nm), cell_angles (deg)         no cell arrays
    ======  ===============  ===========================================  ===================================

    The box is the state's periodic box vectors at that step, so a barostat's changing box is recorded
    frame by frame. HDF5 files also hold the time (ps) of each frame and the topology of one replica; XTC
    holds time and step; DCD holds neither (frame ``k`` is step ``(k + 1) * interval`` after the start).

    Parameters
    ----------
    path_pattern : str
        File path with a ``{replica}`` field (format spec allowed, ``{replica:03d}``); the field may be
        omitted when ``replicas == 1``.
    interval : int
        Steps between frames.
    replicas : int
        Number of packed replicas R; the System must have exactly ``R * N`` particles.
    topology_one_replica : openmm.app.Topology or mdtraj.Topology
        Topology of ONE replica (``N`` atoms); stored in HDF5 files.
    format : {"dcd", "xtc", "h5"}, optional
        Default: from the file extension (``.dcd``, ``.xtc``, ``.h5``/``.hdf5``).
    append : bool
        Add frames to existing files (which must exist and hold ``N`` atoms per frame). DCD and XTC files are
        rewritten once at start-up (mdtraj cannot append to them): old frames are copied to a temporary file
        that then replaces the original.
    enforce_periodic_box : bool or None
        As OpenMM's ``DCDReporter``: wrap molecules into the box; None (default) -> when the System is periodic.

    Raises
    ------
    InputError
        Unknown extension/format, a pattern without ``{replica}`` for R > 1 (or with other fields),
        missing files with ``append=True``; at the first step, a System whose particle count is not
        ``R * N``.
    """

    def __init__(self, path_pattern: str, interval: int, replicas: int, topology_one_replica, format: Optional[str] = None,
                 append: bool = False, enforce_periodic_box: Optional[bool] = None):
        self.interval, self.replicas = int(interval), int(replicas)
        if self.interval < 1 or self.replicas < 1:
            raise InputError(f"ReplicaTrajectoryReporter: interval and replicas must be >= 1, got {interval} and {replicas}")
        pattern = os.fspath(path_pattern)
        if format is None:
            ext = os.path.splitext(pattern)[1].lower()
            if ext not in TRAJECTORY_FORMATS:
                raise InputError(f"{pattern}: unknown trajectory format {ext or '(no extension)'!r}; "
                                 "name the file .dcd, .xtc or .h5 (or pass format='dcd'|'xtc'|'h5')")
            self.format = TRAJECTORY_FORMATS[ext]
        else:
            key = "." + str(format).lower().lstrip(".")
            if key not in TRAJECTORY_FORMATS:
                raise InputError(f"ReplicaTrajectoryReporter: unknown format {format!r}; use 'dcd', 'xtc' or 'h5'")
            self.format = TRAJECTORY_FORMATS[key]
        if self.replicas > 1 and "{replica" not in pattern:
            raise InputError(f"{pattern}: {self.replicas} replicas need one file each; put {{replica}} in the path "
                             "pattern, e.g. 'rep_{replica:03d}" + os.path.splitext(pattern)[1] + "'")
        try:
            self.paths = [pattern.format(replica=r) for r in range(self.replicas)]
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(f"{pattern}: not a usable path pattern ({exc!r}); the only field allowed is {{replica}}, "
                             "e.g. 'rep_{replica:03d}.dcd'") from None
        if len(set(self.paths)) != len(self.paths):
            raise InputError(f"{pattern}: gives the same file name to several replicas; use e.g. {{replica:03d}}")
        self.enforce_periodic_box = enforce_periodic_box
        import mdtraj

        if isinstance(topology_one_replica, mdtraj.Topology):
            self.topology = topology_one_replica
        else:
            self.topology = mdtraj.Topology.from_openmm(topology_one_replica)
        self.n_atoms = self.topology.n_atoms
        if self.n_atoms < 1:
            raise InputError("ReplicaTrajectoryReporter: the topology has no atoms; give the topology of one replica")
        if append:
            missing = [p for p in self.paths if not os.path.exists(p)]
            if missing:
                raise InputError(f"{missing[0]}: does not exist, so nothing can be appended to it; start without append")
        self._periodic: Optional[bool] = None      # does the System use periodic boundary conditions
        self._files = []
        self.frames = 0
        try:
            for p in self.paths:
                self._files.append(self._open(p, append))
        except Exception:
            self.close()
            raise

    # -- files -------------------------------------------------------------------------------------------
    def _open(self, path: str, append: bool):
        from mdtraj.formats import DCDTrajectoryFile, HDF5TrajectoryFile, XTCTrajectoryFile

        if self.format == "hdf5":
            f = HDF5TrajectoryFile(path, "a" if append else "w")
            if append:
                top = f.topology
                if top is not None and top.n_atoms != self.n_atoms:
                    f.close()
                    raise InputError(f"{path}: holds {top.n_atoms} atoms per frame, the topology {self.n_atoms}; "
                                     "append only to files of the same system")
                self.frames = len(f) if hasattr(f, "__len__") else len(f.root.coordinates)
            else:
                f.topology = self.topology
            return f
        cls = DCDTrajectoryFile if self.format == "dcd" else XTCTrajectoryFile
        old = None
        if append:                                     # mdtraj cannot append: copy the old frames
            with cls(path, "r") as f:
                old = f.read()
            if len(old[0]) and old[0].shape[1] != self.n_atoms:
                raise InputError(f"{path}: holds {old[0].shape[1]} atoms per frame, the topology {self.n_atoms}; "
                                 "append only to files of the same system")
            self.frames = len(old[0])
        tmp = path + ".tmp" if append else path
        f = cls(tmp, "w")
        if old is not None:
            if len(old[0]):
                if self.format == "dcd":
                    f.write(old[0], cell_lengths=old[1], cell_angles=old[2])
                else:
                    f.write(old[0], time=old[1], step=old[2],
                            box=old[3] if old[3] is not None else np.zeros((len(old[0]), 3, 3), np.float32))
            os.replace(tmp, path)                      # the open handle keeps writing to the renamed file
        return f

    # -- OpenMM reporter protocol ----------------------------------------------------------------------------
    def describeNextReport(self, simulation):
        if self._periodic is None:
            n = simulation.system.getNumParticles()
            if n % self.n_atoms:
                raise InputError(f"ReplicaTrajectoryReporter: the topology has {self.n_atoms} atoms, which does not "
                                 f"divide the System's {n} particles; give the topology of ONE replica")
            if n != self.replicas * self.n_atoms:
                raise InputError(f"ReplicaTrajectoryReporter: the System has {n} particles = {n // self.n_atoms} "
                                 f"replicas of {self.n_atoms}, but replicas={self.replicas}")
            self._periodic = bool(simulation.system.usesPeriodicBoundaryConditions())
        return {"steps": _steps_to_next(simulation, self.interval), "periodic": self.enforce_periodic_box,
                "include": ["positions"]}

    def report(self, simulation, state):
        if self._periodic is None:                    # report() called directly, without describeNextReport()
            self.describeNextReport(simulation)
        pos = np.asarray(state.getPositions(asNumpy=True).value_in_unit(u.nanometer), dtype=np.float32)
        t_ps = np.array([state.getTime().value_in_unit(u.picosecond)], dtype=np.float32)
        step = np.array([simulation.currentStep], dtype=np.int32)
        box = lengths = angles = None
        if self._periodic:
            from mdtraj.utils import box_vectors_to_lengths_and_angles

            box = np.asarray(state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer), dtype=np.float64)
            a, b, c, alpha, beta, gamma = box_vectors_to_lengths_and_angles(box[0], box[1], box[2])
            lengths = np.array([[a, b, c]], dtype=np.float32)             # nm
            angles = np.array([[alpha, beta, gamma]], dtype=np.float32)   # degrees
        n = self.n_atoms
        for r, f in enumerate(self._files):
            xyz = pos[r * n:(r + 1) * n][None]
            if self.format == "dcd":
                f.write(xyz * 10.0, cell_lengths=None if lengths is None else lengths * 10.0, cell_angles=angles)
            elif self.format == "xtc":
                f.write(xyz, time=t_ps, step=step,
                        box=(box[None] if box is not None else np.zeros((1, 3, 3))).astype(np.float32))
            else:
                f.write(xyz, time=t_ps, cell_lengths=lengths, cell_angles=angles)
            if hasattr(f, "flush"):
                f.flush()
        self.frames += 1

    def close(self):
        """Flush and close every file (idempotent)."""
        files, self._files = self._files, []
        for f in files:
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
