"""Per-replica trajectories of a packed System: :class:`ReplicaDCDReporter` (OpenMM's DCD, each frame written
before the header counts it; what flashschnet-simulate and -martini write) and
:class:`ReplicaTrajectoryReporter` (DCD, XTC or HDF5 through mdtraj, for your own scripts)."""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

import numpy as np
import openmm.unit as u

from ...errors import InputError
from ..dcd import DCDWriter
from ._common import steps_to_next


class ReplicaDCDReporter:
    """Write one DCD file per replica (``paths[r]``) every ``interval`` steps.

    ``topology`` is the topology of ONE replica (``N`` atoms). With ``append=True`` the files must exist
    (see :func:`flashschnet.openmm.dcd.truncate_dcd` for cutting them back to a checkpoint first). Each file
    is a :class:`~flashschnet.openmm.dcd.DCDWriter`: OpenMM's DCD format, but each frame is written and
    flushed *before* the header counts it, so a run killed in between never leaves a header that counts a
    missing or partial frame. ``active[r] = False`` stops replica ``r``'s file (a dropped replica).
    """

    def __init__(self, paths: Sequence[str], interval: int, topology, dt_ps: float, append: bool = False,
                 first_step: int = 0):
        self.paths = list(paths)
        self.interval = int(interval)
        self.n_beads = topology.getNumAtoms()
        self._writers: List[DCDWriter] = []
        try:
            for p in self.paths:
                self._writers.append(DCDWriter(p, topology, dt_ps, first_step, self.interval, append))
        except BaseException:
            self.close()
            raise
        self.active = [True] * len(self.paths)

    def describeNextReport(self, simulation):
        return {"steps": steps_to_next(simulation, self.interval), "periodic": False, "include": ["positions"]}

    def report(self, simulation, state):
        pos = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        for r, w in enumerate(self._writers):
            if self.active[r]:
                w.write(pos[r * self.n_beads:(r + 1) * self.n_beads])

    def sizes(self) -> List[int]:
        """Bytes written so far to each file."""
        return [w.size for w in self._writers]

    @property
    def frames(self) -> int:
        """Frames in the first file."""
        return self._writers[0].frames if self._writers else 0

    @property
    def frame_counts(self) -> List[int]:
        """Frames in each file (they differ once a replica was dropped)."""
        return [w.frames for w in self._writers]

    def sync(self) -> None:
        """Flush and fsync every file (before a checkpoint that refers to their sizes)."""
        for w in self._writers:
            w.sync()

    def close(self):
        for w in self._writers:
            w.close()


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
        return {"steps": steps_to_next(simulation, self.interval), "periodic": self.enforce_periodic_box,
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
