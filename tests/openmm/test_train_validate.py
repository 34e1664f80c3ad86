"""flashschnet.openmm.train_validate: the prior coordinates and global structure a validation compares (bond lengths,
angles, phi/psi, RMSD and Rg of trp-cage's 5-bead frames) against direct computations, unchanged by a rigid motion;
the histogram overlap (1 identical, 0 disjoint); too few steps for a frame refused before anything runs. (A whole
``flashschnet-train validate``: tests/scripts.)"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.cg import map_pdb
from flashschnet.errors import InputError
from flashschnet.openmm.observables import radius_of_gyration
from flashschnet.openmm.train_validate import _overlap, features, validate
from flashschnet.priors import angle_tuples, dihedral_tuples


@pytest.fixture(scope="module")
def mol():
    return map_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"))


def test_the_features_are_the_frames_prior_coordinates_and_structure(mol):
    native = np.asarray(mol.positions, dtype=float)                          # Angstrom
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    moved = native @ (q * np.sign(np.linalg.det(q))).T + [5.0, -3.0, 1.0]  # a rigid motion of the native structure
    bent = native + np.random.default_rng(1).normal(scale=0.5, size=native.shape)
    f = features(mol, np.stack([native, moved, bent]))
    bonds = np.asarray(mol.bonds).reshape(-1, 2)
    nb, na = len(bonds), len(angle_tuples(mol.n_beads, bonds))
    dih = dihedral_tuples(mol)
    assert f["bond"].shape == (3 * nb,) and f["angle"].shape == (3 * na,)
    assert f["phi"].shape == (3 * len(dih["phi"]),) and f["psi"].shape == (3 * len(dih["psi"]),) and len(dih["phi"])
    want = np.linalg.norm(native[bonds[:, 0]] - native[bonds[:, 1]], axis=1) / 10.0       # nm
    assert f["bond"][:nb] == pytest.approx(want, rel=1e-12)
    for key, n in (("bond", nb), ("angle", na), ("phi", len(dih["phi"])), ("psi", len(dih["psi"]))):
        assert f[key][n:2 * n] == pytest.approx(f[key][:n], abs=1e-9), key                # rigid motion: the same
        assert not np.allclose(f[key][2 * n:], f[key][:n], atol=1e-3), key
    assert (0.0 < f["angle"]).all() and (f["angle"] < 180.0).all() and (np.abs(f["phi"]) <= 180.0).all()
    assert f["rmsd"][:2] == pytest.approx([0.0, 0.0], abs=1e-6) and f["rmsd"][2] > 0.03
    assert f["rg"] == pytest.approx(radius_of_gyration(np.stack([native, moved, bent]) / 10.0), rel=1e-12)


def test_the_overlap_of_two_histograms():
    edges = np.linspace(0.0, 1.0, 11)
    a = np.linspace(0.01, 0.49, 50)
    assert _overlap(a, a, edges) == pytest.approx(1.0)
    assert _overlap(a, a + 0.5, edges) == 0.0
    assert _overlap(a, np.concatenate([a, a + 0.5]), edges) == pytest.approx(0.5)
    assert math.isnan(_overlap(a, np.array([2.0]), edges))                    # nothing inside the edges


def test_too_few_steps_for_a_frame_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(InputError, match="--steps 50 gives no frame to compare at --report-interval 100"):
        validate(str(EXAMPLES / "1L2Y_trpcage.pdb"), str(EXAMPLES / "trpcage_placeholder.pt"), "missing.npz",
                 str(tmp_path / "v"), steps=50, report_interval=100)
    assert not (tmp_path / "v").exists()
