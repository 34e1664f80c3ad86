"""flashschnet.fused.node_ops: which implementation of the node pass's layers an engine runs (the C kernels for
float32 on a CPU, PyTorch's ops for float64 and with fused_loops=False), and a whole step through the C layers
against the same step through PyTorch's: 1, 2 and 3 beads, a real protein and several replicas, float32 within
twice PyTorch's own error against float64. The kernels themselves: tests/model/kernels/test_cpu_nodes.py."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import rel_error
from flashschnet import compress
from flashschnet.fused.node_ops import TORCH_NODE_OPS, CNodeOps
from flashschnet.fused.nodes import energy_forces_fused
from flashschnet.fused.torch_engine import TorchPairEngine
from flashschnet.nn.layout import unpack


def _step(model, pos, types, fused):
    nw, basis, filters = unpack(model)
    eng = TorchPairEngine(basis, filters, skin=1.0, fused_loops=fused)
    e, f = energy_forces_fused(nw, pos.contiguous(), types, eng)
    return e, f, eng.node_ops


def test_the_engine_picks_the_c_layers_for_float32_on_a_cpu_only(model64):
    pos = torch.randn(1, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 3.0
    types = torch.arange(4) % 20 + 1
    assert _step(model64, pos, types, None)[2] is TORCH_NODE_OPS                     # float64: PyTorch's
    try:
        model64.float()
        assert isinstance(_step(model64, pos.float(), types, None)[2], CNodeOps)
        assert _step(model64, pos.float(), types, False)[2] is TORCH_NODE_OPS        # the reference, on request
    finally:
        model64.double()


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (1, 3), (3, 3), ("protein", 1), ("protein", 3)])
def test_a_step_through_the_c_layers_matches_pytorchs_ops(model64, fixture_a, shape):
    R, N = shape
    if R == "protein":
        R, (pos1, types) = N, (fixture_a["positions_A"][:1], fixture_a["bead_types"])
        pos = pos1.expand(R, -1, -1) + 0.05 * torch.randn(R, *pos1.shape[1:], dtype=pos1.dtype,
                                                          generator=torch.Generator().manual_seed(R))
    else:
        g = torch.Generator().manual_seed(10 * R + N)
        pos, types = torch.randn(R, N, 3, dtype=torch.float64, generator=g) * 2.5, torch.arange(N) % 20 + 1
    model = compress(model64, knots=64, tolerance=1.0)
    e64, f64, _ = _step(model, pos, types, False)
    model = model.float()
    e_c, f_c, ops = _step(model, pos.float(), types, True)
    e_t, f_t, _ = _step(model, pos.float(), types, False)
    assert isinstance(ops, CNodeOps)
    assert bool(torch.isfinite(e_c).all()) and bool(torch.isfinite(f_c).all())
    for c, t, ref in ((e_c, e_t, e64), (f_c, f_t, f64)):
        err, err_torch = rel_error(c, ref), rel_error(t, ref)
        assert err < 1e-5 and err <= 2 * err_torch + 1e-6, (err, err_torch)
