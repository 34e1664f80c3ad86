"""flashschnet.train.dataset: a reference run's ``.npz`` read with one-line errors, and mapped onto the CG molecule
(slice positions in Angstrom, aggregated forces in kcal/mol/Angstrom) -- on a hand-made one-residue run. The same on
a real all-atom run of trp-cage: tests/model/train/test_fit.py (it shares that run with the other stages)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from flashschnet.errors import InputError
from flashschnet.train import load_reference, map_reference

# one ALA and a water, as flashschnet.openmm.reference_md lists them: (residue, resname, name, element)
ATOMS = [(0, "ALA", "N", "N"), (0, "ALA", "H", "H"), (0, "ALA", "CA", "C"), (0, "ALA", "CB", "C"),
         (0, "ALA", "C", "C"), (0, "ALA", "O", "O"), (1, "HOH", "O", "O")]
BONDS = [(0, 1), (0, 2), (2, 3), (2, 4), (4, 5)]


def _run(path, **arrays):
    rng = np.random.default_rng(0)
    data = dict(positions_nm=rng.normal(size=(2, len(ATOMS), 3)).astype(np.float32),
                forces_kj_mol_nm=rng.normal(size=(2, len(ATOMS), 3)).astype(np.float32),
                atoms=np.array(ATOMS, dtype=object).astype(str), bonds=np.array(BONDS, dtype=np.int64),
                temperature_K=np.float64(310.0))
    data.update(arrays)
    np.savez(path, **data)
    return data


def test_a_reference_run_maps_to_slice_positions_and_summed_forces(tmp_path):
    z = _run(tmp_path / "ref.npz")
    mol = SimpleNamespace(mapping="5bead", n_beads=5, source="ala.pdb")
    data = map_reference(str(tmp_path / "ref.npz"), mol)
    assert data.n_frames == 2 and data.temperature_K == 310.0
    assert data.positions.dtype == np.float64 and data.forces.shape == (2, 5, 3)
    pos, frc = z["positions_nm"].astype(np.float64), z["forces_kj_mol_nm"].astype(np.float64)
    np.testing.assert_allclose(data.positions, pos[:, [0, 2, 3, 4, 5]] * 10.0, rtol=1e-12)      # N CA CB C O
    expected = np.stack([frc[:, 0] + frc[:, 1], frc[:, 2], frc[:, 3], frc[:, 4], frc[:, 5]], axis=1) / 41.84
    np.testing.assert_allclose(data.forces, expected, rtol=1e-12)      # H with its N, the water dropped
    with pytest.raises(InputError, match="maps to 5 beads but ala.pdb to 4"):
        map_reference(str(tmp_path / "ref.npz"), SimpleNamespace(mapping="5bead", n_beads=4, source="ala.pdb"))
    ca = map_reference(str(tmp_path / "ref.npz"), SimpleNamespace(mapping="ca", n_beads=1, source="ala.pdb"))
    np.testing.assert_allclose(ca.forces[:, 0], frc[:, :6].sum(axis=1) / 41.84, rtol=1e-12)


def test_unreadable_reference_data_is_one_line(tmp_path):
    with pytest.raises(InputError, match="reference data not found"):
        load_reference(str(tmp_path / "missing.npz"))
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(InputError, match="empty.npz: not a reference-data .npz"):
        load_reference(str(tmp_path / "empty.npz"))
    np.savez(tmp_path / "partial.npz", positions_nm=np.zeros((1, 2, 3)), forces_kj_mol_nm=np.zeros((1, 2, 3)))
    with pytest.raises(InputError, match="partial.npz: lacks atoms, bonds, temperature_K"):
        load_reference(str(tmp_path / "partial.npz"))
    _run(tmp_path / "ok.npz")
    assert sorted(load_reference(str(tmp_path / "ok.npz"))) == \
        ["atoms", "bonds", "forces_kj_mol_nm", "positions_nm", "temperature_K"]
