"""ReplicaDCDReporter (``flashschnet.openmm.reporters.trajectory``, on :mod:`flashschnet.openmm.dcd`'s writer):
byte-for-byte OpenMM DCD files, a header that never counts a frame that is not complete; truncate_dcd's
refusal to cut below the checkpoint. The runs killed at random moments: tests/integration/test_long_runs.py."""
from __future__ import annotations

import os
import struct

import mdtraj as md
import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.dcd import read_dcd, truncate_dcd
from flashschnet.openmm.reporters import ReplicaDCDReporter
from tests.helpers.dcd import dcd_parts


def _state(n, seed, box=None):
    """An OpenMM State of ``n`` free particles at random positions (nm)."""
    system = openmm.System()
    for _ in range(n):
        system.addParticle(1.0)
    if box is not None:
        system.setDefaultPeriodicBoxVectors(*box)
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(np.random.default_rng(seed).normal(size=(n, 3)) * 2.0)
    return ctx.getState(getPositions=True)


@pytest.mark.parametrize("periodic", [False, True])
def test_dcd_writer_writes_openmm_dcd_files(tmp_path, periodic):
    """ReplicaDCDReporter's files equal OpenMM's DCDFile output byte for byte (but the creation time in the
    title), with and without unit-cell records; the header counts each frame once it is complete."""
    box = (openmm.Vec3(3, 0, 0), openmm.Vec3(0, 4, 0), openmm.Vec3(0, 0, 5)) if periodic else None
    top = app.Topology()
    chain = top.addChain()
    for i in range(6):
        top.addAtom("C", app.element.carbon, top.addResidue("ALA", chain))
    if periodic:
        top.setPeriodicBoxVectors(box * u.nanometer)
    states = [_state(12, s) for s in range(3)]
    rep = ReplicaDCDReporter([str(tmp_path / "a.dcd"), str(tmp_path / "b.dcd")], 5, top, 0.004, first_step=5)
    for st in states:
        rep.report(None, st)
    assert rep.frame_counts == [3, 3] and rep.sizes() == [os.path.getsize(tmp_path / "a.dcd")] * 2
    rep.close()
    for r, name in enumerate("ab"):
        with open(tmp_path / f"ref_{name}.dcd", "wb") as f:
            ref = app.DCDFile(f, top, 0.004, 5, 5)
            for st in states:
                ref.writeModel(st.getPositions(asNumpy=True)[6 * r:6 * r + 6])
        assert dcd_parts(tmp_path / f"{name}.dcd") == dcd_parts(tmp_path / f"ref_{name}.dcd")
    # appending continues the same file
    more = ReplicaDCDReporter([str(tmp_path / "a.dcd"), str(tmp_path / "b.dcd")], 5, top, 0.004, append=True,
                              first_step=5)
    more.report(None, _state(12, 9))
    more.close()
    assert len(read_dcd(str(tmp_path / "a.dcd"))) == 4
    with open(tmp_path / "a.dcd", "rb") as f:
        f.seek(8)
        assert struct.unpack("<iiii", f.read(16)) == (4, 5, 5, 20)     # frames, first, interval, last step


class _DiesAtHeaderUpdate:
    """A file object that dies (raises) when the writer seeks to the header's frame count."""

    def __init__(self, f):
        self._f = f

    def seek(self, offset, whence=0):
        if offset == 8 and whence == 0:
            raise KeyboardInterrupt("killed")
        return self._f.seek(offset, whence)

    def __getattr__(self, name):
        return getattr(self._f, name)


def test_dcd_header_never_counts_a_frame_that_is_not_complete(tmp_path):
    """Each frame is written and flushed before the header counts it: a writer dying in between leaves a header
    that counts one complete frame too few (read_dcd: the counted frames; mdtraj: all complete frames) -- the
    opposite of OpenMM's DCDFile, whose header counts a frame before its data is written."""
    top = app.Topology()
    chain = top.addChain()
    for i in range(6):
        top.addAtom("C", app.element.carbon, top.addResidue("ALA", chain))
    path = tmp_path / "a.dcd"
    rep = ReplicaDCDReporter([str(path)], 5, top, 0.004, first_step=5)
    rep.report(None, _state(6, 1))
    rep._writers[0].file = _DiesAtHeaderUpdate(rep._writers[0].file)
    with pytest.raises(KeyboardInterrupt):
        rep.report(None, _state(6, 2))
    rep._writers[0].file._f.close()
    assert len(read_dcd(str(path))) == 1
    with open(tmp_path / "top.pdb", "w") as fh:
        app.PDBFile.writeFile(top, _state(6, 1).getPositions(), fh)
    assert md.load(str(path), top=str(tmp_path / "top.pdb")).n_frames == 2


def test_truncate_dcd_refuses_a_trajectory_shorter_than_the_checkpoint(tmp_path):
    p = tmp_path / "t.dcd"
    p.write_bytes(b"\0" * 100)
    with pytest.raises(InputError, match="lost data the checkpoint relies on"):
        truncate_dcd(str(p), 200, 1)
