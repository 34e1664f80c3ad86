"""flashschnet.openmm.backmap.inputs: what a backmapping reads -- ``--frames START:STOP:STEP`` within a trajectory
(and its one-line refusals), and a CG structure's models as frames (:func:`structure_frames`). Run directories as
input: tests/scripts/test_backmap.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.backmap import frame_selection, structure_frames

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.mark.parametrize("text, n, expect", [
    (None, 21, range(21)), ("0:3", 21, range(0, 3)), ("::10", 21, range(0, 21, 10)), ("5", 21, range(5, 6)),
    ("1:", 3, range(1, 3))])
def test_frame_selection(text, n, expect):
    assert frame_selection(text, n, "t.dcd") == expect


@pytest.mark.parametrize("text, match", [
    ("500:600", r"has 21 frames \(0 to 20\)"), ("0:22", "has 21 frames"), ("a:b", "START:STOP:STEP"),
    ("5:2", "selects no frame"), ("0:5:0", "STEP >= 1"), ("1:2:3:4", "START:STOP:STEP"), ("-1:", ">= 0")])
def test_frame_selection_refuses(text, match):
    with pytest.raises(InputError, match=match):
        frame_selection(text, 21, "t.dcd")


def test_a_structures_models_are_its_frames(tmp_path):
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.cg import map_pdb
    from flashschnet.openmm import cg_topology

    mol = map_pdb(PDB)
    top = cg_topology(mol)
    models = np.stack([mol.positions / 10.0 + 0.5 * k for k in range(3)])         # nm
    path = tmp_path / "beads.pdb"
    with open(path, "w") as f:
        app.PDBFile.writeHeader(top, f)
        for k, xyz in enumerate(models):
            app.PDBFile.writeModel(top, xyz * unit.nanometer, f, modelIndex=k + 1)
        app.PDBFile.writeFooter(top, f)
    cg = structure_frames(str(path), PDB, "1:")
    assert cg.frames == [1, 2] and cg.what == "structure" and (cg.first_step, cg.interval) == (1, 1)
    assert cg.reference == PDB and cg.source == cg.topology_source == str(path) and cg.notes == []
    assert cg.topology.getNumAtoms() == mol.n_beads and cg.positions_nm.shape == (2, mol.n_beads, 3)
    np.testing.assert_allclose(cg.positions_nm, models[1:], atol=1e-4)          # PDB: 0.001 A
    with pytest.raises(InputError, match=r"--structure .*none\.pdb: missing; give the CG structure"):
        structure_frames(str(tmp_path / "none.pdb"), PDB)
    with pytest.raises(InputError, match=r"--frames 3: .* has 3 frames \(0 to 2\)"):
        structure_frames(str(path), PDB, "3")
