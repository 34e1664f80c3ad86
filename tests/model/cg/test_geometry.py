"""flashschnet.cg.geometry: where a missing atom goes -- the ideal CB of an L-amino acid, the IUPAC dihedral, an
atom placed from a bond, an angle and a torsion. The cleaning step's and the backmappers' uses:
tests/openmm/test_cleaning.py, tests/openmm/backmap/."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import STRUCTURES
from flashschnet.cg import map_pdb
from flashschnet.cg.geometry import dihedral, ideal_cb, place_atom

# an ideal backbone (Angstrom): N-CA 1.458, CA-C 1.525, N-CA-C 111 degrees
N = np.array([-1.458, 0.0, 0.0])
CA = np.zeros(3)
C = 1.525 * np.array([math.cos(math.radians(69.0)), math.sin(math.radians(69.0)), 0.0])


def test_the_ideal_cb_is_tetrahedral_and_where_real_proteins_have_it():
    cb = ideal_cb(N, CA, C)
    assert np.linalg.norm(cb - CA) == pytest.approx(1.52, abs=0.02)
    for other in (N, C):
        u, v = other - CA, cb - CA
        angle = math.degrees(math.acos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v)))
        assert 105.0 < angle < 114.0, angle
    shift = np.array([3.0, -2.0, 7.5])                                   # it moves with the backbone
    np.testing.assert_allclose(ideal_cb(N + shift, CA + shift, C + shift), cb + shift, atol=1e-12)
    # the CBs of a real protein (L-amino acids) from their N, CA and C: a few tenths of an Angstrom off at most
    mol = map_pdb(STRUCTURES / "1L2Y_trpcage.pdb")
    found = 0
    for r in range(len(mol.residues)):
        beads = {mol.bead_names[i]: mol.positions[i] for i in np.flatnonzero(mol.bead_residue == r)}
        if "CB" in beads:
            assert np.linalg.norm(ideal_cb(beads["N"], beads["CA"], beads["C"]) - beads["CB"]) < 0.3, r
            found += 1
    assert found == len(mol.residues) - mol.sequence().count("G") == 17


def test_dihedral_sign_convention():
    a, b, c = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0)
    assert dihedral(a, b, c, (1.0, 1.0, 1.0)) == pytest.approx(math.pi / 2)
    assert dihedral(a, b, c, (1.0, 1.0, -1.0)) == pytest.approx(-math.pi / 2)
    assert abs(dihedral(a, b, c, (2.0, 1.0, 0.0))) == pytest.approx(math.pi)     # trans
    assert dihedral(a, b, c, (0.0, 1.0, 0.0)) == pytest.approx(0.0)              # cis


@pytest.mark.parametrize("torsion", [-2.5, -math.pi / 2, 0.3, math.pi])
def test_place_atom_gives_the_bond_angle_and_torsion_asked_for(torsion):
    a, b, c = N + np.array([0.2, 1.0, -0.4]), N, CA
    d = np.array(place_atom(a, b, c, 1.23, math.radians(120.5), torsion))
    assert np.linalg.norm(d - c) == pytest.approx(1.23)
    u, v = b - c, d - c
    assert math.degrees(math.acos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v))) == pytest.approx(120.5)
    assert math.cos(dihedral(a, b, c, d) - torsion) == pytest.approx(1.0)
