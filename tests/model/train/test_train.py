"""flashschnet-train at toy scale: the force map, the all-atom reference run, Boltzmann-inverted priors, force
matching (validation split, early stopping, checkpoints, loss plot) and validation against the reference."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import EXAMPLES
from flashschnet.cg import map_pdb
from flashschnet.checkpoint import load_model
from flashschnet.errors import InputError
from flashschnet.priors import PriorSet, prior_energy_forces
from flashschnet.train import (TrainSettings, build_force_map, fit_priors, map_reference, train_force_matching)
from flashschnet.train.priors_fit import KB_KCAL, _fourier_fit

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
ENTRY = Path(sys.executable).parent / "flashschnet-train"

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


def test_fourier_fit_recovers_a_known_dihedral_potential():
    kT = KB_KCAL * 300.0
    rng = np.random.default_rng(3)
    grid = np.linspace(-np.pi, np.pi, 20001)
    u = 1.2 * np.cos(grid) - 0.7 * np.sin(2 * grid)                  # kcal/mol
    p = np.exp(-u / kT)
    samples = rng.choice(grid, size=400_000, p=p / p.sum())
    k1, k2, _ = _fourier_fit(samples, kT, n_degs=3)
    assert k2[0] == pytest.approx(1.2, abs=0.08) and k1[1] == pytest.approx(-0.7, abs=0.08)
    assert abs(k1[0]) < 0.08 and abs(k2[1]) < 0.08 and abs(k1[2]) < 0.08 and abs(k2[2]) < 0.08


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from flashschnet.openmm.reference_md import reference_md

    out = tmp_path_factory.mktemp("ref") / "ref.npz"
    reference_md(PDB, str(out), frames=30, interval=25, equilibration_steps=50, progress=False, echo=lambda m: None)
    return out


def test_reference_run_and_mapping(reference):
    z = np.load(reference, allow_pickle=False)
    assert z["positions_nm"].shape == z["forces_kj_mol_nm"].shape == (30, 304, 3)
    assert np.isfinite(z["forces_kj_mol_nm"]).all() and float(z["temperature_K"]) == 300.0
    mol = map_pdb(PDB)
    data = map_reference(str(reference), mol)
    assert data.positions.shape == data.forces.shape == (30, mol.n_beads, 3)
    # CA beads sit on the CA atoms (Angstrom); forces in kcal/mol/A
    atoms = [tuple(a) for a in z["atoms"]]
    ca_atoms = [i for i, a in enumerate(atoms) if a[2] == "CA"]
    ca_beads = [i for i, n in enumerate(mol.bead_names) if n == "CA"]
    assert np.allclose(data.positions[:, ca_beads], z["positions_nm"][:, ca_atoms] * 10.0, atol=1e-4)
    total = z["forces_kj_mol_nm"].astype(float).sum(axis=1) / 41.84
    assert np.allclose(data.forces.sum(axis=1), total, atol=1e-3)   # implicit solvent: every atom is protein
    with pytest.raises(InputError, match="maps to"):
        map_reference(str(reference), map_pdb(str(EXAMPLES / "4PTI_bpti.pdb")))


def test_reference_md_refuses_what_amber_cannot_parameterise(tmp_path):
    from flashschnet.openmm.reference_md import reference_md

    bad = tmp_path / "lig.pdb"
    lines = [l for l in open(PDB) if l.startswith("ATOM")][:30]
    lines.append("HETATM  999  C1  LIG B   1       1.000   1.000   1.000  1.00  0.00           C\n")
    bad.write_text("".join(lines) + "END\n")
    with pytest.raises(InputError, match="cannot parameterise"):
        reference_md(str(bad), str(tmp_path / "o.npz"), frames=1, interval=1, progress=False)


def test_fit_priors_from_reference(reference):
    mol = map_pdb(PDB)
    data = map_reference(str(reference), mol)
    pri = fit_priors(mol, data.positions, data.temperature_K)
    names = {t.name: t for t in pri.terms}
    assert set(names) == {"bonds", "angles", "phi", "psi", "omega", "gamma_1", "gamma_2", "non_bonded"}
    bonds = names["bonds"]
    d = np.linalg.norm(data.positions[:, bonds.indices[:, 1]] - data.positions[:, bonds.indices[:, 0]], axis=-1)
    assert np.allclose(bonds.params["x0"].numpy(), d.mean(0))
    kT = KB_KCAL * 300.0
    assert np.allclose(bonds.params["k"].numpy(), kT / (2 * d.var(0, ddof=1)), rtol=1e-6)
    assert (names["non_bonded"].params["sigma"] > 0).all()
    e, f = prior_energy_forces(pri, torch.as_tensor(data.positions))
    assert torch.isfinite(e).all() and torch.isfinite(f).all()
    with pytest.raises(InputError, match="too few"):
        fit_priors(mol, data.positions[:5], 300.0)


def test_force_matching_learns_and_checkpoints(reference, tmp_path):
    mol = map_pdb(PDB)
    data = map_reference(str(reference), mol)
    pri = fit_priors(mol, data.positions, data.temperature_K)
    hist = train_force_matching(mol, data.positions, data.forces, pri, str(tmp_path / "t"),
                                TrainSettings(epochs=4, batch_frames=8, learning_rate=3e-3), progress=False,
                                metadata={"description": "toy"}, echo=lambda m: None)
    assert hist["frames"] == {"train": 24, "val": 6} and len(hist["val"]) == 4
    assert hist["best_val"] < hist["baseline_val"]                    # the network explains part of the residual
    for name in ("best.pt", "last.pt", "history.json", "loss.png"):
        assert (tmp_path / "t" / name).exists()
    model = load_model(tmp_path / "t" / "best.pt")
    assert isinstance(model.priors, PriorSet) and model.metadata["epoch"] == hist["best_epoch"]
    notes = []
    hist = train_force_matching(mol, data.positions, data.forces, pri, str(tmp_path / "stop"),
                                TrainSettings(epochs=10, batch_frames=8, learning_rate=1e-12, patience=1),
                                progress=False, echo=notes.append)
    assert len(hist["val"]) < 10 and any("early stop" in n for n in notes)


def test_cli_fit_and_validate(reference, tmp_path, capsys):
    from flashschnet.scripts.train import main

    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and all(s in res.stdout for s in ("md", "fit", "validate"))
    out = tmp_path / "model"
    assert main(["fit", PDB, "--data", str(reference), "--out", str(out), "--epochs", "2", "--batch-frames", "8",
                 "--quiet"]) == 0
    assert "best validation force MSE" in capsys.readouterr().err
    assert main(["fit", PDB, "--data", str(reference), "--out", str(out), "--quiet"]) == 2
    assert "already holds" in capsys.readouterr().err
    assert main(["validate", PDB, "--model", str(out / "best.pt"), "--data", str(reference), "--out",
                 str(tmp_path / "val"), "--steps", "40", "--dt", "2", "--replicas", "2", "--report-interval", "10", "--quiet",
                 "--threads", "1"]) == 0
    summary = json.loads((tmp_path / "val" / "validation.json").read_text())
    assert summary["cg_frames"] == 8 and summary["reference_frames"] == 30
    assert all(0.0 <= v <= 1.0 for v in summary["overlap"].values())
    assert (tmp_path / "val" / "validation.png").stat().st_size > 10_000
    assert main(["fit", PDB, "--data", str(tmp_path / "missing.npz"), "--out", str(tmp_path / "m2"), "--quiet"]) == 2
    assert "reference data not found" in capsys.readouterr().err


def test_cli_md(tmp_path, capsys):
    from flashschnet.scripts.train import main

    out = tmp_path / "d.npz"
    assert main(["md", PDB, "--out", str(out), "--frames", "3", "--interval", "5", "--equilibration", "0",
                 "--quiet"]) == 0
    assert "done: reference data" in capsys.readouterr().err
    assert np.load(out)["positions_nm"].shape == (3, 304, 3)
    assert main(["md", str(tmp_path / "nope.pdb"), "--out", str(out), "--frames", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.pdb" in err[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_training_without_a_gpu_is_a_clear_error(tmp_path):
    mol = map_pdb(PDB)
    pos = np.repeat(mol.positions[None], 12, axis=0)
    with pytest.raises(InputError, match="no CUDA device"):
        train_force_matching(mol, pos, np.zeros_like(pos), None, str(tmp_path), TrainSettings(device="cuda"),
                             progress=False)
