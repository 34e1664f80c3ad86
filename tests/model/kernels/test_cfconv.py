"""Fused Triton CFConv kernels vs plain-PyTorch references (run on CPU under TRITON_INTERPRET=1): the forward
aggregation, the backward (feature and position gradients in one kernel), every matrix-product precision, finite
differences, determinism, independence of the skin and of the number of persistent programs, the GPU's chunked
items, poisoned buffers. The kernels' radial basis: test_filter_mlp.py; the tile-pair flag kernel and the work
list: test_tiles.py."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import math

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused import launches  # noqa: E402
from flashschnet.fused.launches import triton_available  # noqa: E402
from tests.helpers import standalone_ops as ops  # noqa: E402
from tests.helpers import cfconv_reference as ref  # noqa: E402
from tests.helpers.kernel_cases import DTYPES, basis_params, blob, chain, close  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")



@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def weights(K, F, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    A1 = torch.randn(F, K, generator=g, dtype=torch.float64) / math.sqrt(K)
    a1 = torch.randn(F, generator=g, dtype=torch.float64) * 0.3
    A2 = torch.randn(F, F, generator=g, dtype=torch.float64) / math.sqrt(F)
    return A1.to(dtype), a1.to(dtype), A2.to(dtype)


# name: (R, N, K, F, geometry, basis, rbf_env, filt_env, rc_graph, rc_f)   (tiles of 16 beads)
CASES = {
    "n1": (2, 1, 5, 6, "chain", "gaussian", True, True, 6.0, 5.5),
    "n2": (1, 2, 5, 6, "chain", "expnormal", True, True, 6.0, 5.5),
    "n3": (2, 3, 5, 6, "chain", "gaussian", True, False, 6.0, 5.5),
    "chain40": (2, 40, 16, 16, "chain", "gaussian", True, True, 7.0, 6.5),
    "chain50_expnormal": (1, 50, 5, 6, "chain", "expnormal", False, True, 7.0, 6.0),
    "blob34_nofilt": (2, 34, 5, 6, "blob", "gaussian", True, False, 5.0, 5.0),
    "chain21_noenv": (1, 21, 5, 6, "chain", "expnormal", False, False, 6.0, 6.0),
}
#: cases of single tests (not swept by test_cfconv_fwd / _bwd)
OTHER_CASES = {"chain20": (1, 20, 16, 16, "chain", "gaussian", True, True, 7.0, 6.5)}


def setup(name, dtype, dot="auto"):
    R, N, K, F, geom, basis, rbf_env, filt_env, rc, rc_f = {**CASES, **OTHER_CASES}[name]
    pos = (chain if geom == "chain" else blob)(R, N, dtype)
    offsets, coeffs, alpha = basis_params(basis, K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    gm = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    lower = 0.5 if name == "chain50_expnormal" else 0.0       # z = exp(alpha (lower - d))
    args = (A1, a1, A2, offsets, coeffs, rc, rc, rc_f, basis, alpha, rbf_env, filt_env, lower, dot)
    return pos, h, gm, args


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_cfconv_fwd(name, dtype):
    pos, h, gm, args = setup(name, dtype, "ieee")
    close(ops.cfconv_fwd(pos, h, *args), ref.cfconv_fwd_ref(pos, h, *args), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_cfconv_bwd(name, dtype):
    pos, h, gm, args = setup(name, dtype, "ieee")
    gh, gp = ops.cfconv_bwd(pos, h, gm, *args)
    rgh, rgp = ref.cfconv_bwd_ref(pos, h, gm, *args)
    close(gh, rgh, dtype)
    close(gp, rgp, dtype)


@pytest.mark.parametrize("dot", ["bf16", "fp16"])
def test_16bit_products_match_pytorch_at_that_precision(dot):
    """bf16/fp16 operands, float32 accumulation: equal to plain PyTorch doing the same products (operands
    rounded to the 16-bit type, float32 sums) up to float32 rounding and the rare operand that rounds the
    other way; much closer to it than to the exact products."""
    pos, h, gm, args = setup("chain40", torch.float32, dot)
    exact = ref.cfconv_fwd_ref(pos, h, *args[:-1], "ieee")
    emul = ref.cfconv_fwd_ref(pos, h, *args)
    out = ops.cfconv_fwd(pos, h, *args)
    scale = float(exact.abs().max())
    err_kernel = float((out - exact).abs().max()) / scale
    err_emul = float((emul - exact).abs().max()) / scale
    assert 0 < err_kernel <= 2 * err_emul, (err_kernel, err_emul)
    assert float((out - emul).abs().max()) / scale < 0.1 * err_emul
    gh, gp = ops.cfconv_bwd(pos, h, gm, *args)
    egh, egp = ref.cfconv_bwd_ref(pos, h, gm, *args[:-1], "ieee")
    mgh, mgp = ref.cfconv_bwd_ref(pos, h, gm, *args)
    for got, ex, em in ((gh, egh, mgh), (gp, egp, mgp)):
        s = float(ex.abs().max())
        assert float((got - ex).abs().max()) / s <= 2 * float((em - ex).abs().max()) / s


def test_results_do_not_depend_on_the_skin():
    """The flags only skip tile pairs with no bead pair inside the cutoff: any skin gives bitwise the same."""
    pos, h, gm, args = setup("chain50_expnormal", torch.float64, "ieee")
    a = ops.cfconv_fwd(pos, h, *args, skin=0.0)
    b = ops.cfconv_fwd(pos, h, *args, skin=5.0)
    assert torch.equal(a, b)


def test_large_real_widths_k50_f128():
    """The real model widths (K=50, F=128: K padded to 64 inside)."""
    dtype = torch.float32
    R, N, K, F, rc = 1, 18, 50, 128, 6.0
    pos = chain(R, N, dtype, seed=5)
    offsets, coeffs, alpha = basis_params("gaussian", K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    h = torch.randn(R, N, F, dtype=dtype)
    gm = torch.randn(R, N, F, dtype=dtype)
    args = (A1, a1, A2, offsets, coeffs, rc, rc, rc, "gaussian", alpha, True, True, 0.0, "ieee")
    close(ops.cfconv_fwd(pos, h, *args), ref.cfconv_fwd_ref(pos, h, *args), dtype)
    gh, gp = ops.cfconv_bwd(pos, h, gm, *args)
    rgh, rgp = ref.cfconv_bwd_ref(pos, h, gm, *args)
    close(gh, rgh, dtype)
    close(gp, rgp, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_bitwise_deterministic(dtype):
    pos, h, gm, args = setup("chain21_noenv", dtype)
    m1, m2 = ops.cfconv_fwd(pos, h, *args), ops.cfconv_fwd(pos, h, *args)
    g1, g2 = ops.cfconv_bwd(pos, h, gm, *args), ops.cfconv_bwd(pos, h, gm, *args)
    assert torch.equal(m1, m2)
    assert torch.equal(g1[0], g2[0]) and torch.equal(g1[1], g2[1])


@pytest.mark.parametrize("programs", [1, 3, 5])
def test_bitwise_independent_of_the_number_of_programs(programs, monkeypatch):
    """An item's arithmetic does not depend on the program that runs it, and a tile's partials are added in a
    fixed order: the persistent grid's size (rounded up to whole channel groups) changes no bit."""
    pos, h, gm, args = setup("chain40", torch.float64)
    m0, (gh0, gp0) = ops.cfconv_fwd(pos, h, *args), ops.cfconv_bwd(pos, h, gm, *args)
    monkeypatch.setattr(ops, "programs", programs)
    m, (gh, gp) = ops.cfconv_fwd(pos, h, *args), ops.cfconv_bwd(pos, h, gm, *args)
    assert torch.equal(m, m0) and torch.equal(gh, gh0) and torch.equal(gp, gp0)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_the_gpus_chunked_items(dtype, monkeypatch):
    """The GPU's configurations (32 pairs per forward product, 16 per backward one: several chunks per item,
    their column partials stored chunk by chunk) against the reference; the interpreter's whole-tile-pair items
    agree with them to rounding."""
    pos, h, gm, args = setup("chain20", dtype)
    m_whole, (gh_whole, gp_whole) = ops.cfconv_fwd(pos, h, *args), ops.cfconv_bwd(pos, h, gm, *args)
    monkeypatch.setattr(launches, "GPU_CONFIGS_IN_INTERPRETER", True)
    m = ops.cfconv_fwd(pos, h, *args)
    gh, gp = ops.cfconv_bwd(pos, h, gm, *args)
    close(m, ref.cfconv_fwd_ref(pos, h, *args), dtype)
    rgh, rgp = ref.cfconv_bwd_ref(pos, h, gm, *args)
    close(gh, rgh, dtype)
    close(gp, rgp, dtype)
    close(m, m_whole, dtype)
    close(gp, gp_whole, dtype)


def test_bwd_vs_finite_differences():
    """The hand-derived backward (forward-mode filter derivative) vs central differences of
    sum(gm * cfconv_fwd(pos)), float64."""
    dtype = torch.float64
    R, N, K, F, rc, rc_f = 1, 18, 5, 6, 5.0, 4.5
    pos = chain(R, N, dtype, step=2.5, seed=3)
    offsets, coeffs, alpha = basis_params("gaussian", K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    h = torch.randn(R, N, F, dtype=dtype)
    gm = torch.randn(R, N, F, dtype=dtype)
    args = (A1, a1, A2, offsets, coeffs, rc, rc, rc_f, "gaussian", alpha, True, True, 0.0, "ieee")
    _, grad = ops.cfconv_bwd(pos, h, gm, *args)
    eps = 1e-5
    fd = torch.zeros_like(pos)
    for n in (0, 7, 16, 17):
        for c in range(3):
            p1, p2 = pos.clone(), pos.clone()
            p1[0, n, c] += eps
            p2[0, n, c] -= eps
            e1 = (gm * ops.cfconv_fwd(p1, h, *args)).sum()
            e2 = (gm * ops.cfconv_fwd(p2, h, *args)).sum()
            fd[0, n, c] = (e1 - e2) / (2 * eps)
    idx = [0, 7, 16, 17]
    assert float(grad[0, idx].abs().max()) > 1e-3
    torch.testing.assert_close(grad[0, idx], fd[0, idx], rtol=1e-6, atol=1e-7 * float(fd.abs().max()))


def test_custom_ops_registered_with_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    pos, h, gm, args = setup("n3", torch.float32)
    for name in ("cfconv_fwd", "cfconv_bwd"):
        assert hasattr(torch.ops.flashschnet, name)
    with FakeTensorMode() as mode:
        fpos, fh, fgm = (mode.from_tensor(t) for t in (pos, h, gm))
        fargs = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        m = torch.ops.flashschnet.cfconv_fwd(fpos, fh, *fargs)
        gh, gp = torch.ops.flashschnet.cfconv_bwd(fpos, fh, fgm, *fargs)
    assert m.shape == h.shape and gh.shape == h.shape and gp.shape == pos.shape


def test_bad_inputs_are_rejected():
    pos, h, gm, args = setup("n3", torch.float32)
    with pytest.raises(ValueError):
        ops.cfconv_fwd(pos, h[..., :4], *args)
    with pytest.raises(ValueError, match="matmul"):
        ops.cfconv_fwd(pos, h, *args[:-1], "int8")
    with pytest.raises(ValueError, match="float64"):
        ops.cfconv_fwd(pos.double(), h.double(), *args[:-1], "tf32")
