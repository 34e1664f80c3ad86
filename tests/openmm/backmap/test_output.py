"""flashschnet.openmm.backmap.output on trp-cage's own all-atom frames: the hydrogens dropped from the topology and
every frame, and the four files of a backmapping (one MODEL per frame, the DCD with its header's steps and time step,
the topology as the first frame, backmap.json). The files of a real rebuild, in mdtraj and amber14, and a failed
write: test_rebuild.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import drop_hydrogens, write_backmapped
from flashschnet.openmm.backmap.output import FILES

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def test_hydrogens_dropped_and_the_four_files_written(tmp_path):
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.openmm.dcd import read_dcd, read_header

    pdb = app.PDBFile(PDB)
    top = pdb.topology
    xyz = np.asarray(pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer), dtype=np.float64)
    frames = np.stack([xyz, xyz + 0.1])
    heavy = [a.index for a in top.atoms() if a.element.symbol != "H"]
    assert 0 < len(heavy) < top.getNumAtoms()

    top_heavy, pos = drop_hydrogens(top, frames)
    assert [a.name for a in top_heavy.atoms()] == [a.name for a in top.atoms() if a.element.symbol != "H"]
    assert top_heavy.getNumResidues() == 20 and top_heavy.getNumBonds() > 0
    assert pos.shape == (2, len(heavy), 3) and np.array_equal(pos, frames[:, heavy])

    summary = {"frames": [0, 1], "what": "structure"}
    files = write_backmapped(str(tmp_path), top_heavy, pos, summary, first_step=100, interval=50, dt_ps=0.004)
    assert files == {name: str(tmp_path / name) for name in FILES}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)          # no staging folder left
    assert json.loads((tmp_path / "backmap.json").read_text()) == summary
    np.testing.assert_allclose(read_dcd(files["backmapped.dcd"]), pos, atol=1e-5)
    head = read_header(files["backmapped.dcd"])
    assert (head.frames, head.first_step, head.interval, head.atoms) == (2, 100, 50, len(heavy))
    assert head.dt_ps == pytest.approx(0.004, rel=1e-5)
    models = app.PDBFile(files["backmapped.pdb"])
    assert models.getNumFrames() == 2 and models.topology.getNumAtoms() == len(heavy)
    for k in range(2):
        got = models.getPositions(asNumpy=True, frame=k).value_in_unit(unit.nanometer)
        np.testing.assert_allclose(got, pos[k], atol=1e-4)                   # PDB: 0.001 A
    first = app.PDBFile(files["topology_allatom.pdb"])
    assert first.getNumFrames() == 1 and [r.id for r in first.topology.residues()] == [str(i) for i in range(1, 21)]
    np.testing.assert_allclose(first.getPositions(asNumpy=True).value_in_unit(unit.nanometer), pos[0], atol=1e-4)
