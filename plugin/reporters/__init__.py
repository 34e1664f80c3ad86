"""OpenMM reporters for packed-replica CG simulations.

All of them follow OpenMM's reporter protocol (``describeNextReport`` / ``report``) and can be appended to
``Simulation.reporters`` in user scripts. Replica ``r`` of a packed System owns particles
``r*N .. r*N+N-1``.

* :class:`HealthReporter` (``health``) -- stops the run with
  :class:`~flashschnet.errors.SimulationInstabilityError` naming the step, replica and bead when energies,
  forces or positions become NaN or huge, or (policy ``"drop"``) hands a broken replica to a callback that
  freezes it while the others go on. Put it first, so no other reporter records a broken state.
* :class:`ReplicaDCDReporter` (``trajectory``) -- one DCD per replica (each frame written before the header
  counts it; :mod:`flashschnet.openmm.dcd`).
* :class:`ReplicaTrajectoryReporter` (``trajectory``) -- one DCD, XTC or HDF5 file per replica through mdtraj.
* :class:`ReplicaCSVReporter` (``log``) -- per-replica potential energy, temperature and speed.
* :class:`CheckpointReporter` (``checkpoint``) -- atomic checkpoints (temporary file + fsync + rename +
  directory fsync) whose header records how much of each output belonged to the checkpointed state, so a
  resumed run can cut what was written after it.
* ``files`` -- what plain runs and ensembles share: the checkpoint file (:func:`write_checkpoint`,
  :func:`read_checkpoint`), the CSV appender (:class:`CSVFile`) and cutting the outputs back to a checkpoint.

What a run killed at an arbitrary moment (SIGKILL, power loss after the last fsync) leaves behind: the
previous or the new checkpoint, never a torn one (a stray ``*.tmp`` is ignored and overwritten); DCD files
whose header never counts a frame that is not complete, possibly followed by one complete frame the header
does not count yet or by a partial frame; a CSV log whose last row may be partial.
:func:`flashschnet.openmm.dcd.read_dcd` reads the frames the header counts;
:func:`cut_trajectories` and :func:`truncate_csv` cut both back to the checkpoint.
"""
from .checkpoint import CheckpointReporter
from .files import (CHECKPOINT_MAGIC, CSVFile, cut_csv_to_size, cut_trajectories, read_checkpoint, truncate_csv,
                    write_checkpoint)
from .health import HealthReporter
from .log import ReplicaCSVReporter, ReplicaLog, ns_per_day, replica_temperatures
from .trajectory import TRAJECTORY_FORMATS, ReplicaDCDReporter, ReplicaTrajectoryReporter

__all__ = ["CHECKPOINT_MAGIC", "CSVFile", "CheckpointReporter", "HealthReporter", "ReplicaCSVReporter",
           "ReplicaDCDReporter", "ReplicaLog", "ReplicaTrajectoryReporter", "TRAJECTORY_FORMATS", "cut_csv_to_size",
           "cut_trajectories", "ns_per_day", "read_checkpoint", "replica_temperatures", "truncate_csv",
           "write_checkpoint"]
