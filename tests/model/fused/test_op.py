"""flashschnet.fused.op: the custom op ``flashschnet::energy_forces`` called by a TorchScript network and by an
OpenMM TorchForce (backend="triton", float64, against mlcg's oracle), and the op's CUDA-graph wrapper, made only
around the engine whose step never synchronises."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from tests.conftest import oracle_path, rel_error, torchforce_energy_forces
from flashschnet import load_model
from flashschnet.fused import op as fused_op
from flashschnet.fused.graph import GraphedStep
from flashschnet.nn.layout import unpack
from flashschnet.fused.triton_engine import TritonTileEngine

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def test_torchscript_and_torchforce_call_the_custom_op(fixture_a):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    types = fixture_a["bead_types"]
    pos = fixture_a["positions_A"][:2]
    scripted = torch.jit.script(model.network)
    e, f = scripted.energy_forces(pos, types)
    assert rel_error(f, fixture_a["forces_kcal_mol_A"][:2]) < 1e-10
    energy, forces = torchforce_energy_forces(model, pos, types)
    assert abs(energy - float(fixture_a["energies_kcal_mol"][:2].sum())) < 1e-9
    assert np.abs(forces - fixture_a["forces_kcal_mol_A"][:2].reshape(-1, 3).numpy()).max() < 1e-9


def test_cuda_graph_only_wraps_the_sync_free_engine(caplog):
    """A CUDA graph is made only around the triton engine (its step never synchronises); the torch backend's
    engine is left eager with a one-line note."""
    from flashschnet.fused.torch_engine import TorchPairEngine

    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="triton")
    _, basis, filters = unpack(model.network)
    fused_op._NOTED.clear()
    assert fused_op._graphed(TritonTileEngine(basis, filters), False) is None
    assert isinstance(fused_op._graphed(TritonTileEngine(basis, filters), True), GraphedStep)
    with caplog.at_level(logging.WARNING, logger="flashschnet"):
        assert fused_op._graphed(TorchPairEngine(basis, filters), True) is None
    assert len(caplog.records) == 1 and "cuda_graph is ignored" in caplog.records[0].getMessage()
