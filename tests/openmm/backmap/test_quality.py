"""flashschnet.openmm.backmap.quality on trp-cage's own atoms: RMSDs (no superposition) of the backbone, of all heavy
atoms and of the side chains per residue type, over the heavy atoms both structures hold (and how many the
structure lacks); the 5-bead positions of an all-atom frame (:func:`beads_of`) are the mapping's beads. A rebuilt
trp-cage measured with it: test_rebuild.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import beads_of, compare

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.fixture(scope="module")
def trpcage():
    import openmm.app as app
    import openmm.unit as unit

    pdb = app.PDBFile(PDB)
    return pdb.topology, np.asarray(pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer), dtype=np.float64)


def test_rmsds_of_known_displacements(trpcage):
    top, xyz = trpcage
    at = {(a.residue.index, a.name): a.index for a in top.atoms()}
    n_heavy = sum(1 for a in top.atoms() if a.element.symbol != "H")
    same = compare(top, xyz, top, xyz)
    assert (same["backbone_rmsd_nm"], same["heavy_rmsd_nm"], same["n_heavy"], same["missing"]) == (0.0, 0.0, n_heavy, 0)
    assert sorted(same["side_chain"]) == ["ARG", "ASN", "ASP", "GLN", "ILE", "LEU", "LYS", "PRO", "SER", "TRP", "TYR"]
    assert same["side_chain"]["TRP"] == {"rmsd_nm": 0.0, "atoms": 9}            # CG .. CH2 of TRP6
    moved = xyz.copy()
    moved[at[(5, "CZ2")], 0] += 0.3                   # a side-chain atom
    moved[at[(0, "N")], 1] -= 0.4                      # a backbone atom
    moved[at[(5, "HZ2")], 2] += 1.0                    # a hydrogen: not compared
    q = compare(top, xyz, top, moved)
    assert q["backbone_rmsd_nm"] == pytest.approx(np.sqrt(0.4 ** 2 / 80))       # N, CA, C, O of 20 residues
    assert q["heavy_rmsd_nm"] == pytest.approx(np.sqrt((0.3 ** 2 + 0.4 ** 2) / n_heavy))
    assert q["side_chain"]["TRP"]["rmsd_nm"] == pytest.approx(np.sqrt(0.3 ** 2 / 9))
    assert q["side_chain"]["ASN"]["rmsd_nm"] == 0.0


def test_atoms_the_structure_lacks_are_counted_not_compared(trpcage):
    import openmm.app as app
    import openmm.unit as unit

    top, xyz = trpcage
    modeller = app.Modeller(top, xyz * unit.nanometer)
    modeller.delete([a for a in modeller.topology.atoms() if (a.residue.index, a.name) in ((5, "CZ2"), (6, "CA"))])
    less = np.asarray(modeller.getPositions().value_in_unit(unit.nanometer), dtype=np.float64)
    q = compare(top, xyz, modeller.topology, less)
    assert q["missing"] == 2 and q["n_heavy"] == compare(top, xyz, top, xyz)["n_heavy"] - 2
    assert q["backbone_rmsd_nm"] == 0.0 and q["heavy_rmsd_nm"] == 0.0 and q["side_chain"]["TRP"]["atoms"] == 8


def test_beads_of_an_all_atom_frame_are_the_mappings_beads(trpcage):
    from flashschnet.cg import map_pdb
    from flashschnet.openmm import cg_topology

    top, xyz = trpcage
    mol = map_pdb(PDB)
    beads = beads_of(cg_topology(mol), top, xyz)
    assert beads.shape == (mol.n_beads, 3)
    np.testing.assert_allclose(beads, mol.positions / 10.0, atol=1e-9)
    shifted = beads_of(cg_topology(mol), top, xyz + np.array([1.0, 0.0, 0.0]))
    np.testing.assert_allclose(shifted - beads, np.tile([1.0, 0.0, 0.0], (mol.n_beads, 1)), atol=1e-12)
