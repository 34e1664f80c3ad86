"""The fused C node kernels (flashschnet.kernels.cpu_nodes) through their launcher (flashschnet.fused.node_ops
.CNodeOps): every layer op against float64 and against the plain-PyTorch ops (TorchNodeOps) at 1, 2, 3, 7 and 97
rows and widths below, at and across a panel; the same bits on any thread count and any row blocking; poison
stays in its row; the vector tanh (through a layer of one input)."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import rel_error
from flashschnet.fused.node_ops import TORCH_NODE_OPS, CNodeOps
from flashschnet.kernels import cpu_nodes

OPS = ("dense", "dense_tanh", "dense_add", "back", "back_dtanh", "back_add")


@pytest.fixture(scope="module")
def cops():
    lib = cpu_nodes.library()
    assert lib is not None, "the C node kernels must build on this machine (a compiler is part of the setup)"
    return CNodeOps(lib)


def _operands(op, M, K, N, seed, dtype=torch.float32):
    """``(x, W, extra)`` of ``op``: forward layers take ``W [N, K]`` (and a bias), the backward's ``W [K, N]``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g, dtype=torch.float64)
    W = torch.randn(*((N, K) if op.startswith("dense") else (K, N)), generator=g, dtype=torch.float64) / K ** 0.5
    b = torch.randn(N, generator=g, dtype=torch.float64)
    S = torch.tanh(torch.randn(M, N, generator=g, dtype=torch.float64))
    extra = {"dense": (b,), "dense_tanh": (b,), "dense_add": (b, S), "back": (), "back_dtanh": (S,),
             "back_add": (S,)}[op]
    return x.to(dtype), W.to(dtype), tuple(t.to(dtype) for t in extra)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (2, 5, 19), (3, 16, 16), (7, 64, 32), (97, 64, 64), (13, 128, 1)])
def test_each_layer_op_matches_float64_and_the_pytorch_ops(cops, op, M, K, N):
    x, W, extra = _operands(op, M, K, N, seed=M * 1000 + K * 10 + N)
    out = getattr(cops, op)(x, W, *extra)
    assert out.shape == (M, N) and out.dtype == torch.float32
    ref64 = getattr(TORCH_NODE_OPS, op)(x.double(), W.double(), *(t.double() for t in extra))
    ref32 = getattr(TORCH_NODE_OPS, op)(x, W, *extra)
    err, err_torch = rel_error(out, ref64), rel_error(ref32, ref64)
    assert err < 2e-6 and err <= 2 * err_torch + 5e-7, (err, err_torch)     # 4e-7: the vector tanh
    assert getattr(cops, "_packs"), "weights are packed once and kept"


def test_any_thread_count_and_any_row_blocking_give_the_same_bits(cops):
    x, W, (b, S) = _operands("dense_add", 301, 128, 128, seed=3)        # 301 x 128 x 128: threaded
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = cops.dense_add(x, W, b, S)
        torch.set_num_threads(max(2, threads))
        two = cops.dense_add(x, W, b, S)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)
    rows = torch.cat([cops.dense_add(x[i:i + 1], W, b, S[i:i + 1]) for i in range(0, 301, 37)])
    assert torch.equal(rows, one[0:301:37])                             # a row alone: its row of the batch
    assert 301 * 128 * 128 >= cpu_nodes.THREADED_MACS


def test_poison_stays_in_its_row(cops):
    x, W, (S,) = _operands("back_dtanh", 9, 64, 64, seed=5)
    x[4, 10] = float("nan")
    out = cops.back_dtanh(x, W, S)
    assert bool(out[4].isnan().all())
    assert bool(torch.isfinite(torch.cat([out[:4], out[5:]])).all())


def test_wrong_operands_are_refused_in_one_line(cops):
    x, W, (b,) = _operands("dense", 4, 8, 8, seed=1)
    with pytest.raises(ValueError, match="float32 CPU"):
        cops.dense(x.double(), W, b)
    with pytest.raises(ValueError, match="second operand"):
        cops.dense_add(x, W, b, torch.zeros(3, 8))


def _tanh(cops, x):
    """The kernels' vector tanh of each element of ``x``: ``dense_tanh`` of one input with weight 1 and bias 0
    (``fma(x, 1, 0) + 0`` is ``x`` exactly)."""
    one, zero = torch.ones(1, 1), torch.zeros(1)
    return cops.dense_tanh(x.reshape(-1, 1), one, zero).reshape(-1)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 70001])
def test_tanh_kernel_within_4e7_of_float64_and_poison_stays_poison(cops, n):
    g = torch.Generator().manual_seed(n)
    x = torch.cat([torch.randn(n, generator=g) * 4.0, torch.tensor([0.0, -0.0, 1e-30, -1e-30, 7.9, -8.0, 30.0])])
    y = _tanh(cops, x)
    ref = torch.tanh(x.double())
    assert float(((y.double() - ref).abs() / ref.abs().clamp_min(1e-300)).max()) < 4e-7
    odd = _tanh(cops, torch.tensor([float("nan"), float("inf"), -float("inf")] * 3))
    assert bool(odd[0::3].isnan().all())
    assert float((odd[1::3] - 1.0).abs().max()) < 4e-7 and float((odd[2::3] + 1.0).abs().max()) < 4e-7
