"""flashschnet.train.fit at toy scale, on one all-atom reference run of trp-cage (a module fixture, made once):
force matching (validation split, early stopping, checkpoints, loss plot) and the stages that read the same run --
the mapped data (flashschnet.train.dataset), Boltzmann-inverted priors (flashschnet.train.priors_fit) and
``flashschnet-train fit`` / ``validate`` against the reference; a clear error for CUDA training without a GPU."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet.cg import map_pdb
from flashschnet.checkpoint import load_model
from flashschnet.errors import InputError
from flashschnet.priors import PriorSet, prior_energy_forces
from flashschnet.train import TrainSettings, fit_priors, map_reference, train_force_matching
from flashschnet.train.priors_fit import KB_KCAL

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
ENTRY = Path(sys.executable).parent / "flashschnet-train"


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_training_without_a_gpu_is_a_clear_error(tmp_path):
    mol = map_pdb(PDB)
    pos = np.repeat(mol.positions[None], 12, axis=0)
    with pytest.raises(InputError, match="no CUDA device"):
        train_force_matching(mol, pos, np.zeros_like(pos), None, str(tmp_path), TrainSettings(device="cuda"),
                             progress=False)
