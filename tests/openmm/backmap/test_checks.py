"""flashschnet.openmm.backmap.checks on structures with known answers: heavy-atom clashes (bonded and 1-3 pairs and
hydrogens left out), CA chirality, cis peptide bonds, the mapped atoms' distance from their beads, and the phrases a
frame's problems are noted with. The checks on a backmapped trp-cage: test_rebuild.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import checks

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def _chain(elements, bonds):
    import openmm.app as app

    top = app.Topology()
    chain = top.addChain()
    atoms = [top.addAtom(f"X{i}", app.Element.getBySymbol(e), top.addResidue("UNK", chain))
             for i, e in enumerate(elements)]
    for i, j in bonds:
        top.addBond(atoms[i], atoms[j])
    return top


@pytest.fixture(scope="module")
def trpcage():
    """1L2Y (hydrogens included): its topology and positions (nm)."""
    import openmm.app as app
    import openmm.unit as unit

    pdb = app.PDBFile(PDB)
    return pdb.topology, np.asarray(pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer), dtype=np.float64)


def test_clashes_leave_out_bonded_1_3_pairs_and_hydrogens():
    """Four carbons bonded in a chain 0-1-2-3 and a hydrogen: 0 and 3 (1-4) 0.112 nm apart are a clash; the 1-3
    pairs (0.172 and 0.187 nm) and the hydrogen 0.05 nm from atom 0 are not."""
    top = _chain("CCCCH", [(0, 1), (1, 2), (2, 3)])
    xyz = np.array([[0.0, 0.0, 0.0], [0.15, 0.0, 0.0], [0.10, 0.14, 0.0], [0.0, 0.10, 0.05], [0.0, 0.0, 0.05]])
    assert checks.heavy_atoms(top).tolist() == [0, 1, 2, 3]
    near = checks.near_in_graph(top)
    assert near == {(0, 1), (1, 2), (2, 3), (0, 2), (1, 3)}
    found = checks.clashes(xyz, top)
    assert [(i, j) for i, j, _ in found] == [(0, 3)] and found[0][2] == pytest.approx(np.hypot(0.10, 0.05))
    assert checks.clashes(xyz, top, cutoff_nm=0.11) == []
    assert checks.clashes(xyz, top, exclude=near | {(0, 3)}) == []


def test_cis_and_trans_peptide_bonds():
    """CA(0)-C(0)-N(1)-CA(1) in one plane: CA(1) on the side of CA(0) is cis (omega 0), opposite it trans (180)."""
    import openmm.app as app

    top = app.Topology()
    chain = top.addChain()
    at = {}
    for r, names in enumerate((("CA", "C"), ("N", "CA"))):
        res = top.addResidue("ALA", chain)
        for name in names:
            at[(r, name)] = top.addAtom(name, app.Element.getBySymbol(name[0]), res)
    for a, b in (((0, "CA"), (0, "C")), ((0, "C"), (1, "N")), ((1, "N"), (1, "CA"))):
        top.addBond(at[a], at[b])
    cis = np.array([[-0.05, 0.14, 0.0], [0.0, 0.0, 0.0], [0.13, 0.0, 0.0], [0.18, 0.14, 0.0]])
    trans = cis.copy()
    trans[3, 1] = -0.14
    assert list(checks.omegas(cis, top)) == [0] and abs(checks.omegas(cis, top)[0]) < 1e-6
    assert abs(checks.omegas(trans, top)[0]) == pytest.approx(180.0)
    assert checks.cis_peptides(cis, top) == [0] and checks.cis_peptides(trans, top) == []


def test_a_frame_check_on_trpcage_and_a_mirror_image(trpcage):
    top, xyz = trpcage
    ca = [a.index for a in top.atoms() if a.name == "CA"]
    beads = xyz[ca].copy()
    beads[3, 0] += 0.03                                 # ILE4's CA 0.3 A from its bead
    c = checks.check_frame(xyz, top, ca, beads)
    assert c.clashes == [] and c.d_residues == [] and c.new_cis == [] and c.converged
    assert c.max_deviation_nm == pytest.approx(0.03) and c.problems(top) == []
    assert c.problems(top, deviation_nm=0.02) == ["a mapped atom is 0.30 A from its bead (limit 0.20 A)"]
    assert len(checks.omegas(xyz, top)) == 19 and checks.cis_peptides(xyz, top) == []
    mirrored = xyz * np.array([-1.0, 1.0, 1.0])          # every CA but glycine's is D
    chiral = [r.index for r in top.residues() if r.name != "GLY"]
    assert len(chiral) == 17 and checks.d_residues(mirrored, top) == chiral
    assert checks.check_frame(mirrored, top, ca, mirrored[ca]).d_residues == chiral
    assert checks.check_frame(mirrored, top, ca, mirrored[ca], d_in_input=chiral).d_residues == []    # D in the beads


def test_each_problem_is_one_phrase_naming_atoms_and_residues(trpcage):
    top, _ = trpcage
    at = {(a.residue.index, a.name): a.index for a in top.atoms()}
    c = checks.FrameCheck(clashes=[(at[(5, "CZ2")], at[(0, "CG")], 0.15), (at[(1, "CD1")], at[(2, "OH")], 0.2)],
                          d_residues=[5], new_cis=[10, 11], max_deviation_nm=0.08, converged=False)
    assert c.problems(top) == ["2 heavy-atom clash(es) under 2.2 A (closest TRP6:CZ2-ASN1:CG 1.50 A)",
                               "D chirality at CA of TRP6", "cis peptide bond after GLY11, PRO12",
                               "a mapped atom is 0.80 A from its bead (limit 0.50 A)",
                               "the minimisation did not converge"]
    assert checks.FrameCheck().problems(top) == []
