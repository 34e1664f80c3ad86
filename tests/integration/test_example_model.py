"""The bundled trained model (examples/trpcage_trained.pt, made by examples/train_trpcage.sh): it loads as a
trained (not placeholder) checkpoint with its priors and runs 1,000 stable Langevin steps of trp-cage."""
from __future__ import annotations

import csv

import numpy as np

from tests.conftest import EXAMPLES
from flashschnet.cg import map_pdb
from flashschnet.checkpoint import load_model
from flashschnet.openmm.observables import kabsch_align
from flashschnet.openmm.dcd import read_dcd
from flashschnet.scripts.simulate import main as simulate

MODEL = EXAMPLES / "trpcage_trained.pt"
PDB = EXAMPLES / "1L2Y_trpcage.pdb"


def test_shipped_model_is_a_trained_checkpoint():
    model = load_model(MODEL)
    meta = model.metadata
    assert meta["placeholder"] is False and meta["source"] == "flashschnet-train"
    assert "amber14/GBn2" in meta["description"] and meta["val_loss"] > 0
    mol = map_pdb(PDB)
    assert model.priors is not None and model.priors.n_beads == mol.n_beads
    assert {t.name for t in model.priors.terms} == {"bonds", "angles", "phi", "psi", "omega", "gamma_1", "gamma_2",
                                                   "non_bonded"}


def test_shipped_model_runs_1000_stable_steps(tmp_path):
    out = tmp_path / "run"
    assert simulate([str(PDB), "--model", str(MODEL), "--steps", "1000", "--report-interval", "100", "--seed", "17",
                     "--replicas", "2", "--threads", "1", "--quiet", "--out", str(out)]) == 0
    with open(out / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    temps = np.array([float(r["temperature_K"]) for r in rows])
    energies = np.array([float(r["potential_energy_kJ_mol"]) for r in rows])
    assert len(rows) == 22 and np.isfinite(energies).all() and 250.0 < temps.mean() < 350.0    # steps 0, 100, ..., 1000
    mol = map_pdb(PDB)
    bonds = np.asarray(mol.bonds)
    native = np.linalg.norm(mol.positions[bonds[:, 1]] - mol.positions[bonds[:, 0]], axis=1) / 10.0
    for r in range(2):
        frames = read_dcd(str(out / f"replica_{r:03d}.dcd"))
        assert frames.shape == (11, mol.n_beads, 3)
        d = np.linalg.norm(frames[:, bonds[:, 1]] - frames[:, bonds[:, 0]], axis=2)
        assert np.abs(d - native).max() < 0.03                    # nm: every CG bond stays near its length
        rmsd, _ = kabsch_align(frames, mol.positions / 10.0)
        assert rmsd.max() < 0.5                                    # nm: still folded-like after 4 ps
