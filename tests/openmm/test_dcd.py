"""flashschnet.openmm.dcd: the DCD reader against mdtraj (with and without unit-cell records, atom selections, a
partial last frame left out), and the writer's header, truncation to a checkpoint's size and a damaged frame."""
from __future__ import annotations

import struct

import numpy as np
import openmm.app as app
import openmm.unit as u
import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.dcd import DCDWriter, read_dcd, read_header, truncate_dcd


@pytest.mark.parametrize("cell", [False, True])
def test_read_dcd_matches_mdtraj_and_ignores_a_partial_frame(tmp_path, cell):
    import mdtraj

    top = app.Topology()
    chain = top.addChain()
    for i in range(7):
        top.addAtom("CA", app.Element.getBySymbol("C"), top.addResidue("ALA", chain))
    if cell:
        top.setUnitCellDimensions((3.0, 3.0, 3.0) * u.nanometer)
    path = tmp_path / "t.dcd"
    xyz = np.random.default_rng(1).normal(size=(5, 7, 3))
    with open(path, "wb") as f:
        dcd = app.DCDFile(f, top, 0.004)
        for x in xyz:
            dcd.writeModel(x * u.nanometer)
    pdb = tmp_path / "t.pdb"
    with open(pdb, "w") as f:
        app.PDBFile.writeFile(top, xyz[0] * u.nanometer, f)
    ours = read_dcd(str(path))
    assert np.allclose(ours, mdtraj.load_dcd(str(path), top=str(pdb)).xyz, atol=1e-6)
    assert np.allclose(ours, xyz, atol=1e-5)
    assert np.array_equal(read_dcd(str(path), [0, 3]), ours[:, [0, 3]])
    data = path.read_bytes()
    path.write_bytes(data[:-10])                                    # killed mid-write: the last frame is partial
    assert read_dcd(str(path)).shape == (4, 7, 3)


def _chain(n):
    top = app.Topology()
    chain = top.addChain()
    for _ in range(n):
        top.addAtom("CA", app.Element.getBySymbol("C"), top.addResidue("ALA", chain))
    return top


def test_the_writer_counts_frames_truncate_cuts_back_and_a_damaged_frame_ends_the_trajectory(tmp_path):
    """DCDWriter's header (steps, time step, frame count) as OpenMM's strict reader expects it; truncate_dcd back to
    a checkpoint's size, and refusing a file shorter than that; a frame with a NaN: an error naming it, or with a
    notes list the frames before it and a note."""
    path = str(tmp_path / "w.dcd")
    xyz = np.random.default_rng(2).normal(size=(3, 5, 3))
    writer = DCDWriter(path, _chain(5), 0.004, first_step=10, interval=10)
    sizes = []
    for x in xyz:
        writer.write(x)
        sizes.append(writer.size)
    writer.close()
    head = read_header(path, strict=True)
    assert (head.frames, head.first_step, head.interval, head.atoms, head.complete_frames) == (3, 10, 10, 5, 3)
    assert head.step(2) == 30 and head.dt_ps == pytest.approx(0.004, rel=1e-6) and not head.has_cell
    assert sizes == [head.data_offset + k * head.frame_bytes for k in (1, 2, 3)]
    assert np.allclose(read_dcd(path), xyz, atol=1e-5)
    assert np.allclose(read_dcd(path, frames=[2], atoms=[4]), xyz[2:, [4]], atol=1e-5)

    truncate_dcd(path, sizes[1], 2)
    assert read_header(path, strict=True).frames == 2 and np.allclose(read_dcd(path), xyz[:2], atol=1e-5)
    with pytest.raises(InputError, match="lost data the checkpoint relies on"):
        truncate_dcd(path, sizes[2], 3)

    with open(path, "r+b") as f:                      # frame 1's first x coordinate becomes NaN
        f.seek(head.data_offset + head.frame_bytes + 4)
        f.write(struct.pack("<f", float("nan")))
    with pytest.raises(InputError, match=r"frame 1 \(step 20\) is damaged"):
        read_dcd(path)
    notes = []
    assert np.allclose(read_dcd(path, notes=notes), xyz[:1], atol=1e-5)
    assert len(notes) == 1 and notes[0].startswith("w.dcd: frame 1 (step 20) is damaged") and "the 1 before" in notes[0]
