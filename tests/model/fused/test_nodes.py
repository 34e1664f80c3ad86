"""flashschnet.fused.nodes: energy_forces_fused, the node-level pass with its hand-written backward (the torch
engine doing the edges), gives the energies and forces of autograd through the whole reference network, float64,
for several replicas at once and for one alone. The engines: test_torch_engine.py, test_triton_engine.py."""
from __future__ import annotations

import torch

from flashschnet.fused.nodes import energy_forces_fused
from flashschnet.fused.torch_engine import TorchPairEngine
from flashschnet.nn.layout import unpack


def test_hand_written_backward_equals_autograd_through_the_reference_network(model64):
    weights, basis, filters = unpack(model64)
    g = torch.Generator().manual_seed(7)
    pos = torch.randn(2, 6, 3, generator=g, dtype=torch.float64) * 2.5
    types = torch.arange(6) % 20 + 1
    e, f = energy_forces_fused(weights, pos, types, TorchPairEngine(basis, filters))
    e_ref, f_ref = model64.energy_forces(pos, types)                 # reference backend: autograd
    assert e.shape == (2,) and f.shape == (2, 6, 3) and e.dtype == f.dtype == torch.float64
    scale = float(f_ref.abs().max())
    assert scale > 1e-3 and not torch.equal(e[0], e[1])               # real forces, two different replicas
    torch.testing.assert_close(e, e_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f, f_ref, rtol=1e-11, atol=1e-11 * scale)
    e1, f1 = energy_forces_fused(weights, pos[1:].contiguous(), types, TorchPairEngine(basis, filters))
    torch.testing.assert_close(e1, e[1:], rtol=1e-13, atol=1e-13)     # a replica alone: its row of the batch
    torch.testing.assert_close(f1, f[1:], rtol=1e-12, atol=1e-12 * scale)
