"""flashschnet.fused.node_plans: the fused node kernels' weights -- each block's forward and backward operands
padded with zeros to powers of two >= 32, the output MLP's layers and last row, the widest widths -- built once
from the packed layout; the first block's per-bead-type rows (embedding rows and ``x_0 L1_0^T``, exact); an
output MLP deeper than the kernels fuse gives no plan."""
from __future__ import annotations

import torch

from flashschnet.fused.node_plans import MAX_HIDDEN, plan_nodes, type_rows
from flashschnet.nn.layout import unpack
from tests.helpers.small_networks import network


def test_padded_operands_of_every_block_and_the_output_mlp():
    net = network((24, 8), H=40, F=20, blocks=2)
    weights, _, _ = unpack(net)
    plan = plan_nodes(weights, 32, torch.float64, torch.device("cpu"))
    assert (plan.H, plan.HP, plan.F, plan.FP, plan.hidden) == (40, 64, 20, 32, 2)
    assert plan.widths == (32, 32, 32) and plan.widest_gradient == 64 and plan.widest == 64
    for blk, b in zip(plan.blocks, weights.blocks):
        for name, W, shape in (("L2T", b["L2"].t(), (32, 64)), ("LT", b["L"].t(), (64, 64)),
                               ("L1T", b["L1"].t(), (64, 32)), ("L1", b["L1"], (32, 64)), ("L", b["L"], (64, 64)),
                               ("L2", b["L2"], (64, 32))):
            P = getattr(blk, name)
            assert P.shape == shape and P.is_contiguous(), name
            assert torch.equal(P[:W.shape[0], :W.shape[1]], W), name
            assert not P[W.shape[0]:].any() and not P[:, W.shape[1]:].any(), name
        assert torch.equal(blk.b2[:40], b["b2"]) and not blk.b2[40:].any()
    (W0, c0), (W1, c1), (Wl, _) = weights.out
    assert torch.equal(plan.WT[0][:40, :24], W0.t()) and torch.equal(plan.W[1][:8, :24], W1)
    assert torch.equal(plan.c[1][:8], c1) and not plan.c[1][8:].any()
    assert plan.wl.shape == (32,) and torch.equal(plan.wl[:8], Wl.reshape(-1)) and not plan.wl[8:].any()


def test_type_rows_are_the_embedding_and_its_first_product():
    net = network((16,), H=16, F=16, blocks=1)
    weights, _, _ = unpack(net)
    plan = plan_nodes(weights, 32, torch.float64, torch.device("cpu"))
    types = torch.tensor([3, 1, 3, 7])
    x0, h0 = type_rows(plan, types)
    assert torch.equal(x0[:, :16], weights.embedding[types]) and not x0[:, 16:].any()
    assert torch.equal(h0, x0 @ plan.blocks[0].L1T)
    assert torch.allclose(h0[:, :16], weights.embedding[types] @ weights.blocks[0]["L1"].t(), rtol=1e-14, atol=0)


def test_deeper_output_mlps_are_not_planned():
    weights, _, _ = unpack(network((8,) * (MAX_HIDDEN + 1), blocks=1))
    assert plan_nodes(weights, 32, torch.float64, torch.device("cpu")) is None
    weights, _, _ = unpack(network((), blocks=1))
    plan = plan_nodes(weights, 32, torch.float64, torch.device("cpu"))
    assert plan.hidden == 0 and plan.wl.shape == (32,)
