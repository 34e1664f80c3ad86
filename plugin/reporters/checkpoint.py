"""Atomic checkpoints: temporary file + fsync + rename + directory fsync, with a JSON header recording how much
of each output belongs to the checkpointed state."""
from __future__ import annotations

from typing import Callable, Optional

import openmm.unit as u

from ._common import steps_to_next
from .files import write_checkpoint


class CheckpointReporter:
    """Atomic checkpoints every ``interval`` steps.

    One file (:func:`~.files.write_checkpoint`): ``CHECKPOINT_MAGIC``, an 8-byte length, a JSON header (``{"step",
    "time_ps", ...extra()}``) and OpenMM's checkpoint (``Context.createCheckpoint``; reloads on the same platform and
    OpenMM version). It is written to a temporary file (``path + ".tmp"``), fsynced, renamed into place and the
    directory fsynced (:func:`flashschnet.atomic.atomic_write`), so a run killed at any moment (or a system crash) leaves
    either the previous complete checkpoint or the new one; a leftover temporary file is never read and is
    overwritten by the next save. A save that cannot be written (a full disk, an I/O error) removes its temporary
    file, keeps the previous checkpoint and raises :class:`~flashschnet.errors.OutputError` naming the file. ``extra()``
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
        return {"steps": steps_to_next(simulation, self.interval), "periodic": False, "include": []}

    def report(self, simulation, state):
        self.save(simulation)

    def save(self, simulation, blob: Optional[bytes] = None):
        """Write the checkpoint of the current state (``blob``: OpenMM's checkpoint of it taken earlier, e.g. before
        a state was read for the health check: with a custom integrator on the CPU and Reference platforms, reading
        the energy draws from the random stream the checkpoint must hold)."""
        if self.before_save is not None:
            self.before_save()
        meta = {"step": int(simulation.currentStep),
                "time_ps": simulation.context.getTime().value_in_unit(u.picosecond)}
        meta.update(self.extra())
        write_checkpoint(self.path, meta, blob if blob is not None else simulation.context.createCheckpoint())
        self.last_step = meta["step"]
