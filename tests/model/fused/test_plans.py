"""flashschnet.fused.plans: the matrix-product precision a step uses (resolve_dot: "auto" by the compute dtype and
the storage of quantized weights; the combinations refused; which ones are exact), and the kernels' views of a
basis, a filter network and a filter table -- zero-padded to powers of two, transposed, in the operand or storage
type, with their scales and float scalars -- and the inputs they refuse. The launchers' basis convention
(basis_coeffs) against the model's basis modules: tests/model/kernels/test_filter_mlp.py; the tables' other
refusals: tests/model/kernels/test_filter_table.py."""
from __future__ import annotations

import pytest
import torch

from flashschnet.fused.plans import (DOTS, exact_on_cuda, plan_basis, plan_filter, plan_table, pow2,
                                     resolve_dot)


def test_resolve_dot_chooses_and_refuses():
    assert resolve_dot("auto", torch.float64) == "ieee"
    assert resolve_dot(None, torch.float32) == "tf32"
    assert resolve_dot("auto", torch.float32, torch.bfloat16) == "bf16"
    assert resolve_dot("auto", torch.float32, torch.float16) == "fp16"
    assert resolve_dot("fp16", torch.float32, torch.float16) == "fp16"
    assert resolve_dot("tf32", torch.float32, torch.bfloat16) == "tf32"
    assert resolve_dot("ieee", torch.float64) == "ieee"
    with pytest.raises(ValueError, match="unknown matmul precision 'int8'"):
        resolve_dot("int8", torch.float32)
    with pytest.raises(ValueError, match="float64 computes its matrix products exactly"):
        resolve_dot("tf32", torch.float64)
    with pytest.raises(ValueError, match="cannot feed fp16 products"):
        resolve_dot("fp16", torch.float32, torch.bfloat16)
    assert [exact_on_cuda(d) for d in ("ieee", "tf32", "bf16", "fp16")] == [True, False, False, False]
    assert [pow2(n) for n in (1, 16, 17, 50, 128)] == [16, 16, 32, 64, 128] and pow2(6, 32) == 32


def test_plan_basis_pads_and_carries_the_scalars():
    offsets = torch.linspace(0.0, 5.0, 5, dtype=torch.float64)
    coeffs = torch.full((5,), -2.0, dtype=torch.float64)
    bp = plan_basis(offsets, coeffs, "expnormal", 0.8, 0.5, 6.0, 5.5, 5.0, True, False, torch.float32,
                    torch.device("cpu"))
    assert (bp.K, bp.KP, bp.basis, bp.rbf_env, bp.filt_env) == (5, 16, 1, True, False)
    assert bp.mu.dtype == bp.cf.dtype == bp.scal.dtype == torch.float32 and bp.mu.shape == (16,)
    assert torch.equal(bp.mu[:5], offsets.float()) and torch.equal(bp.cf[:5], coeffs.float())
    assert not bp.mu[5:].any() and not bp.cf[5:].any()          # padded centres add exactly nothing
    assert bp.scal.tolist() == pytest.approx([6.0, 5.5, 5.0, 0.8, 0.5])   # rc_graph, rc_rbf, rc_f, alpha, lower
    assert plan_basis(offsets, coeffs, "gaussian", 0.0, 0.0, 6.0, 6.0, 6.0, True, True, torch.float64,
                      torch.device("cpu")).basis == 0
    with pytest.raises(ValueError, match="unknown basis 'bessel'"):
        plan_basis(offsets, coeffs, "bessel", 0.0, 0.0, 6.0, 6.0, 6.0, True, True, torch.float64, "cpu")
    with pytest.raises(ValueError, match="coeffs must have shape"):
        plan_basis(offsets, coeffs[:4], "gaussian", 0.0, 0.0, 6.0, 6.0, 6.0, True, True, torch.float64, "cpu")


def test_plan_filter_pads_and_keeps_or_dequantizes_16bit_weights():
    """The exact filter's weights as stored ([out, in]: the kernels' products take the weights on the left),
    zero-padded to FP >= 32 and KP, in the operand type of the product precision."""
    g = torch.Generator().manual_seed(0)
    F, K = 6, 5
    A1 = torch.randn(F, K, generator=g, dtype=torch.float64)
    a1 = torch.randn(F, generator=g, dtype=torch.float64)
    A2 = torch.randn(F, F, generator=g, dtype=torch.float64)
    p = plan_filter(A1, a1, A2, 16, torch.float64, "ieee")
    assert (p.F, p.FP, p.quant, p.dot) == (6, 32, False, DOTS["ieee"])          # FP >= 32
    assert p.A1.shape == (32, 16) and p.A2.shape == (32, 32) and p.A1.dtype == torch.float64
    assert torch.equal(p.A1[:F, :K], A1) and torch.equal(p.A2[:F, :F], A2) and torch.equal(p.a1[:F], a1)
    assert not p.A1[F:].any() and not p.A1[:, K:].any() and not p.A2[F:].any() and not p.A2[:, F:].any()
    assert not p.a1[F:].any() and p.s1.tolist() == [1.0] * 32 and p.s2.tolist() == [1.0] * 32
    b = plan_filter(A1.float(), a1.float(), A2.float(), 16, torch.float32, "bf16")
    assert b.A1.dtype == b.A2.dtype == torch.bfloat16 and b.a1.dtype == torch.float32 and b.dot == DOTS["bf16"]
    assert torch.equal(b.A1[:F, :K], A1.float().to(torch.bfloat16))
    q1, q2 = A1.to(torch.bfloat16), A2.to(torch.bfloat16)
    s1, s2 = torch.rand(F, generator=g) + 0.5, torch.rand(F, generator=g) + 0.5
    kept = plan_filter(q1, a1.float(), q2, 16, torch.float32, "bf16", s1, s2)      # own 16-bit type: as stored
    assert kept.quant and torch.equal(kept.A1[:F, :K], q1) and torch.equal(kept.A2[:F, :F], q2)
    assert torch.equal(kept.s1[:F], s1) and torch.equal(kept.s2[:F], s2) and kept.s1[F:].tolist() == [1.0] * 26
    deq = plan_filter(q1, a1.float(), q2, 16, torch.float32, "tf32", s1, s2)       # tf32: dequantized here
    assert not deq.quant and deq.A1.dtype == torch.float32 and deq.s1.tolist() == [1.0] * 32
    assert torch.equal(deq.A1[:F, :K], q1.float() * s1[:, None])
    assert torch.equal(deq.A2[:F, :F], q2.float() * s2[:, None])
    with pytest.raises(ValueError, match="filter weights must be"):
        plan_filter(torch.zeros(F, 17), a1, A2, 16, torch.float64, "ieee")
    with pytest.raises(ValueError, match="both A1_scale and A2_scale"):
        plan_filter(q1, a1, q2, 16, torch.float32, "bf16", s1, None)
    with pytest.raises(ValueError, match="must both be float16 or bfloat16"):
        plan_filter(A1.float(), a1, A2.float(), 16, torch.float32, "bf16", s1, s2)


def test_plan_table_pads_keeps_16bit_storage_and_takes_the_pair_cutoff():
    g = torch.Generator().manual_seed(1)
    n, Q, F = 9, 3, 5
    table = torch.randn(n, Q, F, generator=g, dtype=torch.float64)
    ones = torch.ones(Q, F)
    tp = plan_table(table, ones, 4.0, F, torch.float32, torch.device("cpu"), rc_graph=6.0)
    assert (tp.n, tp.Q, tp.F, tp.FP, tp.FC, tp.NCG, tp.scaled, tp.cutoff) == (9, 3, 5, 32, 32, 1, False, 4.0)
    assert tp.tab.shape == (1, 9, 3, 32) and tp.tab.dtype == torch.float32     # float64 values: the compute dtype
    assert torch.equal(tp.tab[0, ..., :F], table.float()) and not tp.tab[..., F:].any()
    # 70 channels: padded to 128, four groups of 32, each group's slice [n, Q, 32] contiguous
    wide = torch.randn(n, Q, 70, generator=g, dtype=torch.float64)
    wp = plan_table(wide, torch.ones(Q, 70), 4.0, 70, torch.float64, torch.device("cpu"))
    assert (wp.FP, wp.FC, wp.NCG) == (128, 32, 4) and wp.tab.shape == (4, 9, 3, 32) and wp.tab.is_contiguous()
    assert torch.equal(wp.tab[2, :, :, :6], wide[:, :, 64:70]) and not wp.tab[2, :, :, 6:].any()
    assert torch.equal(wp.tab[1], wide[:, :, 32:64]) and not wp.tab[3].any()
    assert tp.scal.tolist() == [6.0, 4.0, 2.0, 7.0]                          # rc_graph, r_end, 1/h, n - 2
    half = plan_table(table.to(torch.bfloat16), ones, 4.0, F, torch.float64, torch.device("cpu"))
    assert half.tab.dtype == torch.bfloat16 and half.scale.dtype == torch.float64 and half.scaled
    assert half.cutoff == 4.0 and half.scal.tolist() == [4.0, 4.0, 2.0, 7.0]  # rc_graph defaults to r_end
    scale = torch.rand(Q, F, generator=g) + 0.5
    scaled = plan_table(table.float(), scale, 4.0, F, torch.float64, torch.device("cpu"), rc_graph=3.0)
    assert scaled.scaled and scaled.cutoff == 3.0 and scaled.tab.dtype == torch.float32
    assert torch.equal(scaled.scale[:, :F], scale.double()) and scaled.scale[:, F:].tolist() == [[1.0] * 27] * 3
    with pytest.raises(ValueError, match="positive lengths"):
        plan_table(table, ones, 0.0, F, torch.float64, torch.device("cpu"))
    with pytest.raises(ValueError, match="F = 4"):
        plan_table(table, ones, 4.0, 4, torch.float64, torch.device("cpu"))
