"""flashschnet.train.forcemap: the slice position map and aggregated force map of an all-atom topology (5-bead and
CA): bead groups, conserved protein forces, dropped water, a valid force map, one-line refusal of a broken
backbone."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.errors import InputError
from flashschnet.train import build_force_map


# ALA-GLY: atoms (residue, resname, name, element) and bonds, as an OpenMM topology would list them
DIPEPTIDE = [(0, "ALA", n, e) for n, e in [("N", "N"), ("H1", "H"), ("CA", "C"), ("HA", "H"), ("CB", "C"),
                                            ("HB1", "H"), ("C", "C"), ("O", "O")]] + \
            [(1, "GLY", n, e) for n, e in [("N", "N"), ("H", "H"), ("CA", "C"), ("HA2", "H"), ("HA3", "H"),
                                            ("C", "C"), ("O", "O"), ("OXT", "O")]] + [(2, "HOH", "O", "O")]
DIPEPTIDE_BONDS = [(0, 1), (0, 2), (2, 3), (2, 4), (4, 5), (2, 6), (6, 7), (6, 8), (8, 9), (8, 10), (10, 11),
                   (10, 12), (10, 13), (13, 14), (13, 15)]


def test_force_map_groups_and_validity():
    fmap = build_force_map(DIPEPTIDE, DIPEPTIDE_BONDS)
    # beads: ALA N CA CB C O, GLY N CA C O
    assert fmap.site_atom.tolist() == [0, 2, 4, 6, 7, 8, 10, 13, 14]
    assert fmap.group.tolist() == [0, 0, 1, 1, 2, 2, 3, 4, 5, 5, 6, 6, 6, 7, 8, 8, -1]
    xyz = np.random.default_rng(0).normal(size=(3, len(DIPEPTIDE), 3))
    assert np.array_equal(fmap.positions(xyz), xyz[:, fmap.site_atom])
    f = np.random.default_rng(1).normal(size=(3, len(DIPEPTIDE), 3))
    cg = fmap.forces(f)
    assert np.allclose(cg.sum(axis=1), f[:, :-1].sum(axis=1))        # protein forces conserved, water dropped
    # a valid force map for a slice map: the force on bead I counts the site atom of bead J iff I == J
    unit = np.zeros((len(DIPEPTIDE), len(DIPEPTIDE), 3))
    unit[np.arange(len(DIPEPTIDE)), np.arange(len(DIPEPTIDE)), 0] = 1.0
    b = fmap.forces(unit)[..., 0]                                    # [atom, bead]
    assert np.array_equal(b[fmap.site_atom], np.eye(fmap.n_beads))
    ca = build_force_map(DIPEPTIDE, DIPEPTIDE_BONDS, mapping="ca")
    assert ca.site_atom.tolist() == [2, 10] and ca.group.tolist() == [0] * 8 + [1] * 8 + [-1]
    with pytest.raises(InputError, match="atom C missing"):
        build_force_map([a for a in DIPEPTIDE if a[2] != "C"], [])
