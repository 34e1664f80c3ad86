"""flashschnet.tiny: the tiny random-weight test model -- a checkpoint every loader reads, with the tiny network's
hyper-parameters, placeholder priors fitted to the structure given, weights fixed by the seed, and the caller's random
state left alone. Its uses (a fast model for run life cycles): tests/model/test_tablecache.py, tests/openmm/."""
from __future__ import annotations

import torch

from flashschnet import load_model, map_pdb
from flashschnet.tiny import TINY_CONFIG, tiny_model
from tests.helpers.pdb_text import peptide, write_pdb


def test_a_tiny_model_for_the_structure_given(tmp_path):
    pdb = write_pdb(tmp_path, peptide(("ALA", "GLY", "SER", "LYS")), name="tetra.pdb")
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    path = tiny_model(pdb, tmp_path / "a.pt", seed=5)
    assert path == str(tmp_path / "a.pt")
    assert torch.equal(torch.rand(3), before)                      # the caller's random state is restored
    model = load_model(path, dtype=torch.float64, backend="reference")
    net = model.network
    for key in ("hidden_channels", "num_filters", "num_interactions", "cutoff", "rbf", "embedding_size"):
        assert net.config[key] == TINY_CONFIG[key], key
    mol = map_pdb(str(pdb))
    assert model.priors.fingerprint == mol.fingerprint() and "tiny" in model.metadata["description"]
    pos = torch.as_tensor(mol.positions)[None]
    e, f = model.energy_forces(pos, torch.as_tensor(mol.bead_types))
    assert e.shape == (1,) and f.shape == (1, mol.n_beads, 3) and bool(torch.isfinite(f).all())
    same = load_model(tiny_model(pdb, tmp_path / "b.pt", seed=5)).network.state_dict()
    other = load_model(tiny_model(pdb, tmp_path / "c.pt", seed=6)).network.state_dict()
    first = load_model(path).network.state_dict()
    assert all(torch.equal(first[k], same[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)
