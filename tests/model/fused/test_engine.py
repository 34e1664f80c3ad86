"""flashschnet.fused.engine: the registry of edge engines (make_engine by name, unknown names refused), which
engine a step runs (engine_for / engine_of_filters: the triton backend's exact products on CUDA go to the torch
engine, with a one-line note once per case) and running_engine (the engine reported, with model.backend left as
asked, is the one the op caches)."""
from __future__ import annotations

import logging

import pytest
import torch

from tests.conftest import oracle_path
from flashschnet import load_model
from flashschnet.fused import engine as fused_engine
from flashschnet.fused import op as fused_op
from flashschnet.fused.engine import engine_names, engine_of_filters, make_engine, running_engine
from flashschnet.nn.layout import unpack
from flashschnet.fused.triton_engine import TritonTileEngine

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def test_exact_products_on_cuda_route_to_the_torch_engine(caplog):
    """float64 or matmul='ieee' on CUDA: the torch engine, with a one-line note (once per case); tensor-core
    precisions stay on the Triton kernels, and so does every case on a CPU (Triton's interpreter)."""
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="triton")
    _, _, filters = unpack(model.network)
    fused_engine._NOTED.clear()
    with caplog.at_level(logging.WARNING, logger="flashschnet"):
        for dtype, matmul_ in ((torch.float64, "auto"), (torch.float64, "auto"), (torch.float32, "ieee")):
            assert engine_of_filters("triton", "cuda", dtype, matmul_, filters, note=True) == "torch"
            assert engine_of_filters("triton", "cpu", dtype, matmul_, filters, note=True) == "triton"
        assert engine_of_filters("triton", "cuda", torch.float32, "auto", filters, note=True) == "triton"
        assert engine_of_filters("triton", "cuda", torch.float32, "bf16", filters, note=True) == "triton"
        assert engine_of_filters("torch", "cuda", torch.float32, "bf16", filters, note=True) == "torch"
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 2 and all("\n" not in n and "torch engine" in n for n in notes)


def test_the_engine_that_runs_is_reported_and_backend_stays_as_asked():
    """model.backend keeps the user's request; running_engine names the engine a step runs (the same decision
    the op makes), and the op's cached engine is that engine."""
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    assert model.backend == "triton" and model.engine == "triton"     # CPU: Triton's interpreter
    assert running_engine(model) == "triton"
    assert running_engine(model, "cuda") == "torch"                   # float64 on a GPU: exact products
    assert running_engine(model.network.float(), "cuda") == "triton"
    assert running_engine(load_model(oracle_path("mlcg_schnet_A.pt"), backend="reference"), "cuda") == "reference"
    fused_op.clear_engine_cache()
    pos = torch.randn(1, 3, 3, dtype=torch.float32, generator=torch.Generator().manual_seed(0)) * 3.0
    model.network.energy_forces(pos, torch.tensor([21, 22, 6]))
    (eng,) = fused_op._ENGINES.values()
    assert eng.engine_name == "triton" and isinstance(eng, TritonTileEngine)
    fused_op.clear_engine_cache()


def test_engines_come_from_the_registry():
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="triton")
    _, basis, filters = unpack(model.network)
    assert set(engine_names()) >= {"torch", "triton"}
    assert isinstance(make_engine("triton", basis, filters, 1.0, "bf16"), TritonTileEngine)
    with pytest.raises(ValueError, match="unknown edge engine 'cuda'"):
        make_engine("cuda", basis, filters, 1.0)
