"""Fused Triton CFConv kernels vs plain-PyTorch references (run on CPU under TRITON_INTERPRET=1): the forward
aggregation, the backward (feature and position gradients in one kernel), the tile-pair flags, every
matrix-product precision, finite differences, determinism, poisoned buffers."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import math

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused import workspace  # noqa: E402
from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.fused.plans import basis_coeffs  # noqa: E402
from flashschnet.fused.tile_flags import MAX_FLAG_KERNEL_TILES, update_tiles, update_tiles_torch  # noqa: E402
from flashschnet.fused.workspace import BLOCK, Workspace  # noqa: E402
from helpers import standalone_ops as ops  # noqa: E402
from helpers import cfconv_reference as ref  # noqa: E402
from helpers.rbf_probe import flash_rbf  # noqa: E402
from helpers.kernel_cases import blob, chain, close  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")



@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


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


def setup(name, dtype, dot="auto"):
    R, N, K, F, geom, basis, rbf_env, filt_env, rc, rc_f = CASES[name]
    pos = (chain if geom == "chain" else blob)(R, N, dtype)
    offsets, coeffs, alpha = basis_params(basis, K, rc, dtype)
    A1, a1, A2 = weights(K, F, dtype)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    gm = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    lower = 0.5 if name == "chain50_expnormal" else 0.0       # z = exp(alpha (lower - d))
    args = (A1, a1, A2, offsets, coeffs, rc, rc, rc_f, basis, alpha, rbf_env, filt_env, lower, dot)
    return pos, h, gm, args


DTYPES = [torch.float32, torch.float64]


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


def test_tile_flags_match_reference_and_cull():
    """The flag kernel (bounding spheres of 16-bead tiles) equals its plain reference, and far tiles of a
    long chain are culled."""
    pos = chain(2, 100, torch.float64, seed=7)
    for radius in (4.0, 9.0, 30.0):
        got = ops.tile_flags(pos, radius)
        assert torch.equal(got, ref.tile_flags_ref(pos, radius, BLOCK)), radius
    flags = ops.tile_flags(pos, 7.0)
    T = 7
    assert flags.shape == (2, T * (T + 1) // 2)
    assert 0 < int(flags.sum()) < flags.numel()          # some tile pairs culled, the diagonal kept
    assert all(int(flags[r, I * T - I * (I - 1) // 2]) == 1 for r in range(2) for I in range(T))


def test_tile_flags_rebuilt_per_replica_only_past_half_skin():
    """update_tiles rebuilds a replica's flags (counted on the device) only when one of its beads moved more
    than half the skin, or is NaN; the other replicas keep theirs."""
    pos = chain(2, 40, torch.float64)
    ws = Workspace(2, 40, 4, torch.float64, pos.device)
    update_tiles(ws, pos, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 1]
    moved = pos.clone()
    moved[0, :, 0] += 0.9                                # < skin/2: no rebuild
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 1]
    moved[1, 5, 0] += 1.2                                # replica 1 now moved > skin/2
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 2]
    moved[0, 3, 1] = float("nan")
    update_tiles(ws, moved, 6.0, 2.0)
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [3, 2]                   # NaN: rebuilt every call, never frozen


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


def test_poison_fills_nan():
    """The poison_buffers fixture (autouse here) really fills the launchers' buffers with NaN."""
    out = workspace._empty((3, 2), torch.zeros(1, dtype=torch.float64))
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
    offsets, coeffs = basis_coeffs(kind, centers, widths)
    pos = chain(1, 12, torch.float64).reshape(-1, 3)
    src, dst = torch.arange(0, 11), torch.arange(1, 12)
    d, e = flash_rbf(pos, src, dst, offsets, coeffs, rc, kind, alpha, False, lower)
    close(e, mod(d), torch.float64)


def test_flags_of_many_tiles_by_torch_ops_equal_the_kernel():
    """Above MAX_FLAG_KERNEL_TILES the flags are built by PyTorch ops with the same decisions: same flags as the
    kernel and the reference, the same per-replica staleness (NaN included), the same build counts."""
    pos = chain(2, 70, torch.float64, step=3.0, seed=9)
    ws_k = Workspace(2, 70, 4, torch.float64, pos.device)
    ws_t = Workspace(2, 70, 4, torch.float64, pos.device)
    moved = pos.clone()
    moved[1, 4, 2] += 1.3
    nan = moved.clone()
    nan[0, 9, 0] = float("nan")
    for p in (pos, pos + 0.2, moved, nan):
        update_tiles(ws_k, p, 6.0, 2.0)
        update_tiles_torch(ws_t, p, 6.0, 2.0)
        assert torch.equal(ws_k.flags, ws_t.flags)
        assert torch.equal(ws_k.builds, ws_t.builds)
    assert ws_t.builds.tolist() == [2, 2]
    big = chain(1, 16 * (MAX_FLAG_KERNEL_TILES + 2) - 5, torch.float64, seed=3)
    got = ops.tile_flags(big, 10.0)                     # takes the torch path (more tiles than the kernel's cap)
    T = MAX_FLAG_KERNEL_TILES + 2
    assert got.shape == (1, T * (T + 1) // 2) and 0 < int(got.sum()) < got.numel()
    assert torch.equal(got, ref.tile_flags_ref(big, 10.0, BLOCK))
