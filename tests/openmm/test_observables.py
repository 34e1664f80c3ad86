"""flashschnet.openmm.observables: the structure metrics of flashschnet-compare and flashschnet-analyze (RMSD after
Kabsch superposition, radius of gyration, RMSF, native contacts and Q, secondary-structure retention) on cases with
known answers."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.openmm.observables import (fraction_native_contacts, kabsch_align, native_contacts, radius_of_gyration,
                                         rmsf, ss_pairs, ss_retention, structure_metrics)


def _rotation(seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def _helix(n):
    """An ideal alpha-helix CA trace (nm): radius 0.23, rise 0.15, 100 degrees per residue."""
    t = np.radians(100.0) * np.arange(n)
    return np.stack([0.23 * np.cos(t), 0.23 * np.sin(t), 0.15 * np.arange(n)], axis=1)


@pytest.mark.parametrize("n", [3, 4, 20])
def test_rmsd_is_zero_for_rigid_motions_but_not_for_a_mirror_image(n):
    ref = np.random.default_rng(n).normal(size=(n, 3))
    frames = np.stack([ref @ _rotation(s).T + np.array([1.0, -2.0, 0.5]) * s for s in range(4)])
    rmsd, aligned = kabsch_align(frames, ref)
    assert np.allclose(rmsd, 0.0, atol=1e-6) and np.allclose(aligned, ref, atol=1e-6)
    mirror = ref * np.array([1.0, 1.0, -1.0])                      # improper: no rotation makes it the reference
    if n >= 4:                                                      # (three points are always planar)
        assert kabsch_align(mirror[None], ref)[0][0] > 1e-3
    assert np.allclose(rmsf(aligned), 0.0, atol=1e-6)


def test_rmsd_matches_the_definition_for_a_known_deformation():
    ref = np.concatenate([np.eye(3), -np.eye(3)]) * np.array([1.0, 2.0, 3.0])   # an octahedron, unequal axes
    moved = ref.copy()
    moved[:, 0] *= 1.1                                 # stretch along x: by symmetry the best rotation is none
    rmsd, _ = kabsch_align(moved[None] @ _rotation(7).T, ref)
    assert rmsd[0] == pytest.approx(np.sqrt(2 * 0.1 ** 2 / 6), rel=1e-5)


def test_radius_of_gyration_of_known_shapes():
    assert radius_of_gyration(np.array([[0.0, 0, 0], [2, 0, 0]])) == pytest.approx(1.0)
    square = np.array([[1.0, 1, 0], [-1, 1, 0], [1, -1, 0], [-1, -1, 0]])
    assert radius_of_gyration(np.stack([square, 2 * square])) == pytest.approx([np.sqrt(2), 2 * np.sqrt(2)])


def test_rmsf_of_a_bead_moving_back_and_forth():
    ref = np.random.default_rng(0).normal(size=(6, 3)) * 2
    frames = np.stack([ref.copy() for _ in range(4)])
    frames[::2, 5, 0] += 0.01
    frames[1::2, 5, 0] -= 0.01
    r = rmsf(frames)                                               # already superimposed
    assert r[5] == pytest.approx(0.01) and np.allclose(r[:5], 0.0)


def test_native_contacts_and_q():
    ref = _helix(12)
    pairs = native_contacts(ref, cutoff=0.8, min_separation=3)
    assert len(pairs) > 0 and (pairs[:, 1] - pairs[:, 0] >= 3).all()
    d = np.linalg.norm(ref[pairs[:, 0]] - ref[pairs[:, 1]], axis=1)
    assert (d < 0.8).all()
    stretched = ref * np.array([1.0, 1.0, 3.0])                     # pull the helix out along its axis
    q = fraction_native_contacts(np.stack([ref, stretched]), ref, pairs)
    assert q[0] == 1.0 and q[1] < 0.5
    assert np.isnan(fraction_native_contacts(np.stack([ref]), ref, np.zeros((0, 2), int))).all()


def test_secondary_structure_retention():
    ss = "CHHHHHHHHC"
    pairs = ss_pairs(ss)
    assert {tuple(p) for p in pairs} == {(i, i + k) for k in (2, 3, 4) for i in range(1, 9 - k)}
    assert len(ss_pairs("CHHCEEC")) == 0                            # segments shorter than 3: no partners
    assert {tuple(p) for p in ss_pairs("HHHEEE")} == {(0, 2), (3, 5)}  # helix and strand segments are separate
    ref = _helix(10)
    unwound = ref.copy()
    unwound[6:] = ref[5] + np.outer(np.arange(1, 5), [0.0, 0.0, 0.38])   # residues 6-9 straightened
    kept = ss_retention(np.stack([ref, unwound]), ref, ss)
    assert kept[0] == 1.0 and 0.0 < kept[1] < 0.6
    assert np.isnan(ss_retention(np.stack([ref]), ref, "C" * 10)).all()


def test_structure_metrics_shapes_and_checks():
    ref = _helix(8)
    frames = np.stack([ref @ _rotation(s).T for s in range(3)])
    m = structure_metrics(frames, ref, "CHHHHHHC")
    assert m["rmsd"].shape == (3,) and m["rmsf"].shape == (8,) and np.allclose(m["q"], 1.0)
    assert np.allclose(m["ss_retention"], 1.0) and m["rg"] == pytest.approx([m["rg_native"]] * 3)
    with pytest.raises(ValueError):
        structure_metrics(frames, ref[:-1])
    with pytest.raises(ValueError):
        structure_metrics(frames, ref, "HHH")
