"""flashschnet.openmm.reporters.checkpoint: CheckpointReporter's atomic save (outputs synced, temporary file
fsynced, renamed, directory fsynced) that read_checkpoint and Context.loadCheckpoint read back."""
from __future__ import annotations

import os

import openmm

from flashschnet.openmm.reporters import read_checkpoint


def test_checkpoint_is_fsynced_renamed_and_its_directory_fsynced(tmp_path, monkeypatch):
    """CheckpointReporter.save: outputs synced first (before_save), the temporary file written and fsynced, renamed
    into place, then the directory fsynced (so the rename survives a system crash)."""
    from flashschnet.openmm.reporters import CheckpointReporter

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                  real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))),
                                                     real_replace(a, b))[1])
    system = openmm.System()
    system.addParticle(1.0)
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions([[0.0, 0.0, 0.0]])

    class Sim:
        context, currentStep = ctx, 7

    path = str(tmp_path / "checkpoint.chk")
    ck = CheckpointReporter(path, 10, extra=lambda: {"x": 1}, before_save=lambda: events.append(("outputs",)))
    ck.save(Sim())
    assert events == [("outputs",), ("fsync", path + ".tmp"), ("replace", path + ".tmp", path),
                      ("fsync", str(tmp_path))]
    meta, blob = read_checkpoint(path)
    assert meta["step"] == 7 and meta["x"] == 1 and ck.last_step == 7
    ctx.loadCheckpoint(blob)
