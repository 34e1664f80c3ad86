"""Fused Triton CFConv kernels vs plain-PyTorch references (run on CPU under TRITON_INTERPRET=1)."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / flashschnet.fused.triton_ops are imported

import math

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused import triton_ops as flash  # noqa: E402
from flashschnet.neighbors import tile_pairs  # noqa: E402
from helpers import cfconv_reference as ref  # noqa: E402
from helpers.rbf_probe import flash_rbf  # noqa: E402

assert flash.triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def close(out, expected, dtype):
    assert not torch.isnan(out).any(), "an output element was never written"
    tol = TOL[dtype]
    scale = max(float(expected.abs().max()), 1e-30)
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol * scale)


def chain(R, N, dtype, step=3.8, seed=0):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(R, N, 3, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=-1, keepdim=True) * step
    v[:, 0] = 0.0
    return v.cumsum(1).to(dtype)


def blob(R, N, dtype, sigma=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(R, N, 3, generator=g, dtype=torch.float64) * sigma).to(dtype)


def basis_params(basis, K, rc, dtype):
    if basis == "gaussian":
        offsets = torch.linspace(0.0, rc, K, dtype=torch.float64)
        coeffs = torch.full((K,), -0.5 / float(offsets[1] - offsets[0]) ** 2, dtype=torch.float64)
        alpha = 0.0
    else:
        start = math.exp(-rc)
        offsets = torch.linspace(start, 1.0, K, dtype=torch.float64)
        coeffs = -torch.full((K,), (2.0 / K * (1.0 - start)) ** -2, dtype=torch.float64)
        alpha = 5.0 / rc
    return offsets.to(dtype), coeffs.to(dtype), alpha


def weights(K, F, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    A1 = torch.randn(F, K, generator=g, dtype=torch.float64) / math.sqrt(K)
    a1 = torch.randn(F, generator=g, dtype=torch.float64) * 0.3
    A2 = torch.randn(F, F, generator=g, dtype=torch.float64) / math.sqrt(F)
    return A1.to(dtype), a1.to(dtype), A2.to(dtype)


# name: (R, N, B, K, F, geometry, basis, rbf_env, filt_env, rc_graph, rc_f)
CASES = {
    "n1": (2, 1, 4, 5, 6, "chain", "gaussian", True, True, 6.0, 5.5),
    "n2": (1, 2, 4, 5, 6, "chain", "expnormal", True, True, 6.0, 5.5),
    "n3": (2, 3, 4, 5, 6, "chain", "gaussian", True, False, 6.0, 5.5),
    "chain30_b4": (3, 30, 4, 16, 16, "chain", "gaussian", True, True, 7.0, 6.5),
    "chain30_b8_expnormal": (2, 30, 8, 5, 6, "chain", "expnormal", False, True, 7.0, 6.0),
    "blob28_b8_nofilt": (2, 28, 8, 5, 6, "blob", "gaussian", True, False, 5.0, 5.0),
    "chain13_b4_noenv": (2, 13, 4, 5, 6, "chain", "expnormal", False, False, 6.0, 6.0),
}


def setup(name, dtype):
    R, N, B, K, F, geom, basis, rbf_env, filt_env, rc, rc_f = CASES[name]
    pos = (chain if geom == "chain" else blob)(R, N, dtype)
    tiles = tile_pairs(pos, B, rc)
    offsets, coeffs, alpha = basis_params(basis, K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    gm = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    args = flash.tile_args(tiles) + (A1, a1, A2, offsets, coeffs, rc, rc, rc_f, basis, alpha, rbf_env, filt_env)
    if name == "chain30_b8_expnormal":
        args = args + (0.5,)     # basis_lower: z = exp(alpha (lower - d))
    return pos, h, gm, tiles, args


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_cfconv_fwd(name, dtype):
    pos, h, gm, tiles, args = setup(name, dtype)
    close(flash.cfconv_fwd(pos, h, *args), ref.cfconv_fwd_ref(pos, h, *args), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_cfconv_bwd_pos(name, dtype):
    pos, h, gm, tiles, args = setup(name, dtype)
    close(flash.cfconv_bwd_pos(pos, h, gm, *args), ref.cfconv_bwd_pos_ref(pos, h, gm, *args), dtype)


def test_tiles_are_culled():
    """The large cases exercise the culling: fewer tile pairs than the full upper triangle."""
    for name in ("chain30_b4", "chain30_b8_expnormal"):
        R, N, B = CASES[name][:3]
        _, _, _, tiles, _ = setup(name, torch.float64)
        T = tiles.n_tiles
        assert tiles.n_entries < R * T * (T + 1) // 2, name
        assert tiles.col_perm.shape[0] > 0, name


def test_feature_gradient_is_forward_of_gm():
    """gh = dE/dh of sum(gm * m) is the same aggregation applied to gm (W symmetric)."""
    dtype = torch.float64
    pos, h, gm, tiles, args = setup("chain30_b4", dtype)
    hh = h.clone().requires_grad_(True)
    R, N, B, K, F, geom, basis, rbf_env, filt_env, rc, rc_f = CASES["chain30_b4"]
    A1, a1, A2, offsets, coeffs = args[6:11]
    m = ref._aggregate(pos, hh, A1, a1, A2, offsets, coeffs, rc, rc, rc_f, basis, args[-3], rbf_env, filt_env)
    (gh,) = torch.autograd.grad((gm * m).sum(), hh)
    close(flash.cfconv_fwd(pos, gm, *args), gh, dtype)


def test_large_real_widths_k50_f128():
    """The real model widths (K=50, F=128: K padded to 64 inside)."""
    dtype = torch.float32
    R, N, B, K, F, rc = 1, 10, 4, 50, 128, 6.0
    pos = chain(R, N, dtype, seed=5)
    tiles = tile_pairs(pos, B, rc)
    offsets, coeffs, alpha = basis_params("gaussian", K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    h = torch.randn(R, N, F, dtype=dtype)
    gm = torch.randn(R, N, F, dtype=dtype)
    args = flash.tile_args(tiles) + (A1, a1, A2, offsets, coeffs, rc, rc, rc, "gaussian", alpha, True, True)
    close(flash.cfconv_fwd(pos, h, *args), ref.cfconv_fwd_ref(pos, h, *args), dtype)
    close(flash.cfconv_bwd_pos(pos, h, gm, *args), ref.cfconv_bwd_pos_ref(pos, h, gm, *args), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_bitwise_deterministic(dtype):
    pos, h, gm, tiles, args = setup("chain30_b8_expnormal", dtype)
    m1, m2 = flash.cfconv_fwd(pos, h, *args), flash.cfconv_fwd(pos, h, *args)
    g1, g2 = flash.cfconv_bwd_pos(pos, h, gm, *args), flash.cfconv_bwd_pos(pos, h, gm, *args)
    assert torch.equal(m1, m2)
    assert torch.equal(g1, g2)


def test_bwd_pos_vs_finite_differences():
    """The hand-derived backward vs central differences of sum(gm * cfconv_fwd(pos)), float64."""
    dtype = torch.float64
    R, N, B, K, F, rc, rc_f = 1, 6, 4, 5, 6, 5.0, 4.5
    pos = chain(R, N, dtype, step=2.5, seed=3)
    tiles = tile_pairs(pos, B, rc, skin=1.0)
    offsets, coeffs, alpha = basis_params("gaussian", K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    h = torch.randn(R, N, F, dtype=dtype)
    gm = torch.randn(R, N, F, dtype=dtype)
    args = flash.tile_args(tiles) + (A1, a1, A2, offsets, coeffs, rc, rc, rc_f, "gaussian", alpha, True, True)
    grad = flash.cfconv_bwd_pos(pos, h, gm, *args)
    eps = 1e-5
    fd = torch.zeros_like(pos)
    for n in range(N):
        for c in range(3):
            p1, p2 = pos.clone(), pos.clone()
            p1[0, n, c] += eps
            p2[0, n, c] -= eps
            e1 = (gm * flash.cfconv_fwd(p1, h, *args)).sum()
            e2 = (gm * flash.cfconv_fwd(p2, h, *args)).sum()
            fd[0, n, c] = (e1 - e2) / (2 * eps)
    assert float(grad.abs().max()) > 1e-3
    torch.testing.assert_close(grad, fd, rtol=1e-6, atol=1e-7 * float(fd.abs().max()))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("basis", ["gaussian", "expnormal"])
@pytest.mark.parametrize("rbf_env", [True, False], ids=["env", "noenv"])
@pytest.mark.parametrize("K", [5, 16])
def test_flash_rbf(dtype, basis, rbf_env, K):
    rc = 6.0
    pos = chain(2, 20, dtype).reshape(-1, 3)
    g = torch.Generator().manual_seed(4)
    src = torch.randint(0, 40, (45,), generator=g)
    dst = torch.randint(0, 40, (45,), generator=g)
    offsets, coeffs, alpha = basis_params(basis, K, rc, dtype)
    d, e = flash_rbf(pos, src, dst, offsets, coeffs, rc, basis, alpha, rbf_env)
    dr, er = ref.flash_rbf_ref(pos, src, dst, offsets, coeffs, rc, basis, alpha, rbf_env)
    assert d.shape == (45,) and e.shape == (45, K) and d.dtype == dtype and e.dtype == dtype
    close(d, dr, dtype)
    close(e, er, dtype)


def test_custom_ops_registered_with_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    pos, h, gm, tiles, args = setup("n3", torch.float32)
    for name in ("cfconv_fwd", "cfconv_bwd_pos"):
        assert hasattr(torch.ops.flashschnet, name)
    with FakeTensorMode() as mode:
        fpos, fh, fgm = (mode.from_tensor(t) for t in (pos, h, gm))
        fargs = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        m = torch.ops.flashschnet.cfconv_fwd(fpos, fh, *fargs)
        g = torch.ops.flashschnet.cfconv_bwd_pos(fpos, fh, fgm, *fargs)
    assert m.shape == h.shape and g.shape == pos.shape


def test_bad_inputs_are_rejected():
    pos, h, gm, tiles, args = setup("n3", torch.float32)
    with pytest.raises(ValueError):
        flash.cfconv_fwd(pos, h[..., :4], *args)
    bad = list(args)
    bad[4] = args[4] + 1       # wrong n_tiles
    with pytest.raises(ValueError):
        flash.cfconv_fwd(pos, h, *bad)


def test_poison_fills_nan():
    """The poison_buffers fixture (autouse here) really fills the launchers' buffers with NaN."""
    out = flash._empty((3, 2), torch.zeros(1, dtype=torch.float64))
    assert torch.isnan(out).all()


@pytest.mark.parametrize("kind", ["gaussian", "expnormal"])
@pytest.mark.parametrize("lower", [0.0, 0.5])
def test_flash_rbf_matches_model_basis_modules(kind, lower):
    """The launcher convention (basis_coeffs) reproduces the model's own basis modules, float64."""
    from flashschnet.nn import basis

    rc = 6.0
    spec = {"cutoff_lower": lower, "cutoff_upper": rc, "kind": "identity"}
    mod = basis.GaussianBasis(7, spec) if kind == "gaussian" else basis.ExpNormalBasis(7, spec)
    if kind == "gaussian":
        centers, widths, alpha = mod.offset, mod.coeff, 0.0
    else:
        centers, widths, alpha = mod.means, mod.betas, mod.alpha
    offsets, coeffs = flash.basis_coeffs(kind, centers, widths)
    pos = chain(1, 12, torch.float64).reshape(-1, 3)
    src, dst = torch.arange(0, 11), torch.arange(1, 12)
    d, e = flash_rbf(pos, src, dst, offsets, coeffs, rc, kind, alpha, False, lower)
    close(e, mod(d), torch.float64)
