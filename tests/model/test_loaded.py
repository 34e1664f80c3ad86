"""What load_model returns: a LoadedModel (network, priors, prior tables, metadata, source path) that the rest of
the package takes, and the transforms and checkpoints that carry its fields along."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import EXAMPLES, oracle_path
from flashschnet import CGSchNet, LoadedModel, load_model, map_pdb, quantize, save_checkpoint
from flashschnet.loaded import as_loaded


def test_load_model_returns_the_network_and_what_its_file_carries():
    m = load_model(EXAMPLES / "trpcage_placeholder.pt", dtype=torch.float64)
    assert isinstance(m, LoadedModel) and isinstance(m.network, CGSchNet)
    assert m.priors is not None and m.prior_tables is None
    assert m.metadata.get("placeholder") is True and m.source_path.endswith("trpcage_placeholder.pt")
    assert m.config == m.network.config and m.units == m.network.units and m.backend == m.network.backend
    assert not any(hasattr(m.network, a) for a in ("priors", "prior_tables", "metadata", "source_path"))
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    assert m.priors_for(mol) is m.priors
    pos = torch.as_tensor(mol.positions)[None]
    types = torch.as_tensor(mol.bead_types)
    e1, f1 = m.energy_forces(pos, types)
    e2, f2 = m.network.energy_forces(pos, types)
    assert torch.equal(e1, e2) and torch.equal(f1, f2)
    assert m.to(torch.float32) is m and m.network.embedding_layer.weight.dtype == torch.float32


def test_an_mlcg_export_brings_no_priors():
    m = load_model(oracle_path("mlcg_schnet_A.pt"))
    assert m.priors is None and m.prior_tables is None and m.priors_for(None) is None


def test_quantize_and_checkpoints_keep_the_fields(tmp_path):
    m = load_model(EXAMPLES / "trpcage_placeholder.pt")
    q = quantize(m, torch.float16)
    assert isinstance(q, LoadedModel) and q.metadata == m.metadata and q.metadata is not m.metadata
    assert q.priors is not m.priors and q.priors.to_dict().keys() == m.priors.to_dict().keys()
    assert q.network.config["quantization"]["dtype"] == "float16" and m.network.config["quantization"] is None
    path = tmp_path / "q.pt"
    save_checkpoint(path, q)                       # priors and metadata: the LoadedModel's own
    back = load_model(path)
    assert back.priors.to_dict().keys() == m.priors.to_dict().keys() and back.metadata == m.metadata
    save_checkpoint(path, q, priors=None, metadata={"description": "bare"})
    back = load_model(path)
    assert back.priors is None and back.metadata == {"description": "bare"}
    save_checkpoint(path, q.network)               # a bare network: no priors, no metadata
    back = load_model(path)
    assert back.priors is None and back.metadata == {}


def test_as_loaded():
    m = load_model(oracle_path("mlcg_schnet_A.pt"))
    assert as_loaded(m) is m and as_loaded(m.network).network is m.network
    with pytest.raises(TypeError, match="LoadedModel"):
        as_loaded(torch.nn.Linear(2, 2))


def test_the_skin_is_a_parameter_that_changes_speed_never_results(fixture_a):
    path = oracle_path("mlcg_schnet_A.pt")
    default = load_model(path, dtype=torch.float64, backend="torch")
    assert default.network.skin == pytest.approx(0.15 * 15.0) and default.network.fused_floats[5] == default.network.skin
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    e0, f0 = default.energy_forces(pos, types)
    for skin in (0.0, 0.5, 6.0):
        m = load_model(path, dtype=torch.float64, backend="torch", skin=skin)
        assert m.network.skin == skin and m.network.fused_floats[5] == skin
        e, f = m.energy_forces(pos, types)
        assert torch.equal(e, e0) and torch.equal(f, f0), skin     # only pairs inside the cutoff are summed
    with pytest.raises(Exception, match="skin"):
        load_model(path, skin=-1.0)
    with pytest.raises(Exception, match="skin"):
        load_model(path, skin=float("nan"))
