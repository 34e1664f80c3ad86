"""flashschnet.cg.molecule: the CG molecule on a hand-made one -- residue and bead labels for messages, the sequence,
the fingerprint a topology-specific parameter set must match, and bonded-path distances within and across chains.
Molecules mapped from PDB files: tests/model/cg/test_mapping.py."""
from __future__ import annotations

import numpy as np

from flashschnet.cg import CGMolecule, CGResidue


def _molecule() -> CGMolecule:
    """CA beads of ALA 1 - GLY 2 - SER 3 (chain A, bonded) and LYS 12A (blank chain, a chain of its own)."""
    residues = [CGResidue("A", 1, "", "ALA", "A"), CGResidue("A", 2, "", "GLY", "G"), CGResidue("A", 3, "", "SER", "S"),
                CGResidue(" ", 12, "A", "LYS", "K")]
    return CGMolecule(mapping="ca", bead_names=["CA"] * 4, bead_types=np.array([1, 6, 16, 9]),
                      masses=np.full(4, 12.0), positions=np.zeros((4, 3)), bead_residue=np.arange(4),
                      residues=residues, chain_of_residue=np.array([0, 0, 0, 1]), bonds=np.array([[0, 1], [1, 2]]),
                      source="hand-made")


def test_labels_sequence_and_fingerprint():
    mol = _molecule()
    assert mol.n_beads == 4 and mol.sequence() == "AGSK" and mol.notes == []
    assert mol.residues[0].label == "ALA 1 (chain A)" and mol.residues[3].label == "LYS 12A (chain -)"
    assert mol.bead_label(1) == "CA of GLY 2 (chain A)"
    assert mol.fingerprint() == ("ca", (1, 6, 16, 9))
    assert all(type(t) is int for t in mol.fingerprint()[1])


def test_bond_graph_distances():
    d = _molecule().bond_graph_distances(max_distance=8)
    assert d.dtype == np.int64 and d.shape == (4, 4)
    np.testing.assert_array_equal(d[:3, :3], [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    assert d[3, 3] == 0 and set(d[3, :3]) == {9} and set(d[:3, 3]) == {9}      # another chain: max_distance + 1
    np.testing.assert_array_equal(_molecule().bond_graph_distances(max_distance=1)[0], [0, 1, 2, 2])
