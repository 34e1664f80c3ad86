"""flashschnet.kernels.filter_table: the tabulated filter (filter compression) of the CFConv kernels -- the only
part in which their table variants differ from the exact ones -- vs the plain-PyTorch reference on
:func:`flashschnet.nn.table.table_lookup` (run on CPU under TRITON_INTERPRET=1): forward aggregation and backward
(feature and position gradients in one kernel) for cubic and quintic tables stored as float32 / float16 /
bfloat16 / float64, with and without scales, distances exactly at knots and beyond the table's end, the
interpolant's derivative against finite differences, determinism, the table ops' fake kernels and refused
inputs, poisoned buffers."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused import launches  # noqa: E402
from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.nn.table import encode  # noqa: E402
from tests.helpers import cfconv_reference as ref  # noqa: E402
from tests.helpers import standalone_ops as ops  # noqa: E402
from tests.helpers.kernel_cases import blob, chain, close  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

TDTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def make_table(n, Q, F, r_end, tdtype="f32", seed=1, random_scale=False):
    """A table in the storage format (:func:`flashschnet.nn.table.encode`) of random smooth-ish knot data."""
    g = torch.Generator().manual_seed(seed)
    h = r_end / (n - 1)
    data = torch.randn(n, Q, F, generator=g, dtype=torch.float64)
    data[:, 1:] /= h                                  # derivatives on the scale of the knot spacing
    if Q == 3:
        data[:, 2] /= h
    table, scale = encode(data, h, TDTYPES[tdtype])
    if random_scale:                                  # a float32 table with scales other than 1 (SCALE on)
        scale = torch.rand(Q, F, generator=g, dtype=torch.float64).float() + 0.5
    return table, scale


# name: (R, N, F, knots, geometry, r_end, rc_graph)   (tiles of 16 beads; pairs in [r_end, rc_graph) give W = 0)
CASES = {
    "n1": (2, 1, 6, 12, "chain", 5.5, 6.0),
    "n2": (1, 2, 6, 12, "chain", 5.5, 6.0),
    "n3": (2, 3, 5, 9, "chain", 6.0, 6.0),
    "chain40": (2, 40, 16, 33, "chain", 6.5, 7.0),
    "blob37": (3, 37, 6, 20, "blob", 5.0, 6.0),
    "wide40": (2, 40, 70, 17, "chain", 6.5, 7.0),            # 70 channels: padded to 128, four channel groups
    "wide20": (1, 20, 70, 17, "chain", 6.5, 7.0),
}


def setup(name, Q, tdtype, dtype=torch.float64, random_scale=False):
    R, N, F, n, geom, r_end, rc = CASES[name]
    pos = (chain if geom == "chain" else blob)(R, N, dtype)
    table, scale = make_table(n, Q, F, r_end, tdtype, random_scale=random_scale)
    g = torch.Generator().manual_seed(2)
    h = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    gm = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    return pos, h, gm, (table, scale, r_end, rc)


def check_fwd_bwd(pos, h, gm, args, dtype=torch.float64):
    close(ops.cfconv_table_fwd(pos, h, *args), ref.cfconv_table_fwd_ref(pos, h, *args), dtype)
    gh, gp = ops.cfconv_table_bwd(pos, h, gm, *args)
    rgh, rgp = ref.cfconv_table_bwd_ref(pos, h, gm, *args)
    close(gh, rgh, dtype)
    close(gp, rgp, dtype)


@pytest.mark.parametrize("tdtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("Q", [2, 3], ids=["cubic", "quintic"])
def test_every_order_and_storage_float64(Q, tdtype):
    """40 beads (3 tiles, the last partial), 2 replicas, some pairs beyond r_end: float64 compute ~1e-10."""
    check_fwd_bwd(*setup("chain40", Q, tdtype))


@pytest.mark.parametrize("name, Q, tdtype", [("n1", 3, "f32"), ("n2", 2, "bf16"), ("n3", 3, "f16"),
                                             ("n3", 2, "f64"), ("blob37", 3, "bf16")])
def test_small_and_dense_systems(name, Q, tdtype):
    """1, 2, 3 beads and a dense blob of 37 beads in 3 replicas (every tile pair active)."""
    check_fwd_bwd(*setup(name, Q, tdtype))


def test_float32_table_with_scales_and_float32_compute():
    """A float32 table whose scales are not 1 (the kernels' SCALE path with float32 storage), float64 compute;
    and the float32 step (the GPU's) at float32 accuracy."""
    check_fwd_bwd(*setup("blob37", 2, "f32", random_scale=True))
    pos, h, gm, args = setup("chain40", 3, "bf16", dtype=torch.float32)
    check_fwd_bwd(pos, h, gm, args, torch.float32)


def test_knots_exactly_and_the_table_end():
    """Distances exactly at knots (h = 0.5: exact in binary) give the knot's own value ``scale[0] table[k, 0]``,
    bitwise; a pair at exactly ``r_end`` and pairs beyond it (inside the graph cutoff) give W = 0 exactly."""
    n, Q, F, r_end, rc = 11, 3, 5, 5.0, 7.0                      # h = 0.5
    table, scale = make_table(n, Q, F, r_end, "bf16", seed=4)
    exact = table.double() * scale.double()
    xs = [0.0, 0.5, 1.5, 3.0, 5.0]                                # all pair distances are knots, 5.0 = r_end
    pos = torch.zeros(1, len(xs), 3, dtype=torch.float64)
    pos[0, :, 0] = torch.tensor(xs, dtype=torch.float64)
    h = torch.zeros(1, len(xs), F, dtype=torch.float64)
    h[0, 0] = 1.0                                                  # m_i = W(|x_i|) for i > 0
    m = ops.cfconv_table_fwd(pos, h, table, scale, r_end, rc)
    for i, x in enumerate(xs[1:], 1):
        k = int(round(x / 0.5))
        want = torch.zeros(F, dtype=torch.float64) if x >= r_end else exact[k, 0]
        assert torch.equal(m[0, i], want), (x, m[0, i], want)
    gm = torch.randn(1, len(xs), F, dtype=torch.float64)
    hr = torch.randn(1, len(xs), F, dtype=torch.float64)
    check_fwd_bwd(pos, hr, gm, (table, scale, r_end, rc))
    # beyond the table's end (5.0 < d < rc = 7): nothing at all, not even through the gradient
    far = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 5.25, 0.0], [0.0, 0.0, 6.9]]], dtype=torch.float64)
    hf = torch.randn(1, 3, F, dtype=torch.float64)
    assert torch.equal(ops.cfconv_table_fwd(far, hf, table, scale, r_end, rc), torch.zeros_like(hf))
    gh, gp = ops.cfconv_table_bwd(far, hf, hf, table, scale, r_end, rc)
    assert torch.equal(gh, torch.zeros_like(hf)) and torch.equal(gp, torch.zeros_like(far))


def test_bwd_vs_finite_differences():
    """The hand-written backward (the interpolant's exact derivative) vs central differences of
    sum(gm * cfconv_table_fwd(pos)), float64, quintic float32 table."""
    dtype = torch.float64
    R, N, F, n, r_end, rc = 1, 18, 6, 24, 4.5, 5.0
    pos = chain(R, N, dtype, step=2.5, seed=3)
    table, scale = make_table(n, 3, F, r_end, "f32", seed=5)
    h = torch.randn(R, N, F, dtype=dtype)
    gm = torch.randn(R, N, F, dtype=dtype)
    args = (table, scale, r_end, rc)
    _, grad = ops.cfconv_table_bwd(pos, h, gm, *args)
    eps = 1e-6
    idx = [0, 7, 16, 17]
    fd = torch.zeros(len(idx), 3, dtype=dtype)
    for a, bead in enumerate(idx):
        for c in range(3):
            p1, p2 = pos.clone(), pos.clone()
            p1[0, bead, c] += eps
            p2[0, bead, c] -= eps
            e1 = (gm * ops.cfconv_table_fwd(p1, h, *args)).sum()
            e2 = (gm * ops.cfconv_table_fwd(p2, h, *args)).sum()
            fd[a, c] = (e1 - e2) / (2 * eps)
    assert float(grad[0, idx].abs().max()) > 1e-2
    torch.testing.assert_close(grad[0, idx], fd, rtol=1e-6, atol=1e-7 * float(fd.abs().max()))


@pytest.mark.parametrize("programs", [1, 2, 5])
def test_channel_groups_and_any_number_of_programs(programs, monkeypatch):
    """70 channels are four groups of 32 (padded): each group's items against the reference, and bitwise the same
    for any persistent grid (1, 2 and 5 programs round up to 4, 4 and 8: a program keeps one group)."""
    pos, h, gm, args = setup("wide40" if programs == 1 else "wide20", 3, "f32")
    m0, (gh0, gp0) = ops.cfconv_table_fwd(pos, h, *args), ops.cfconv_table_bwd(pos, h, gm, *args)
    if programs == 1:
        check_fwd_bwd(pos, h, gm, args)
    monkeypatch.setattr(ops, "programs", programs)
    m, (gh, gp) = ops.cfconv_table_fwd(pos, h, *args), ops.cfconv_table_bwd(pos, h, gm, *args)
    assert torch.equal(m, m0) and torch.equal(gh, gh0) and torch.equal(gp, gp0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_the_gpus_chunked_items(dtype, monkeypatch):
    """The GPU's configurations (chunks of 4 source beads forward, 2 backward, float64 8 forward) against the
    reference, four channel groups; the interpreter's whole-tile-pair items agree with them to rounding."""
    pos, h, gm, args = setup("wide20", 2, "bf16", dtype=dtype)
    whole = ops.cfconv_table_bwd(pos, h, gm, *args)
    monkeypatch.setattr(launches, "GPU_CONFIGS_IN_INTERPRETER", True)
    check_fwd_bwd(pos, h, gm, args, dtype)
    gh, gp = ops.cfconv_table_bwd(pos, h, gm, *args)
    close(gh, whole[0], dtype)
    close(gp, whole[1], dtype)


def test_bitwise_deterministic_and_skin_independent():
    pos, h, gm, args = setup("chain40", 3, "f16")
    m1, m2 = ops.cfconv_table_fwd(pos, h, *args), ops.cfconv_table_fwd(pos, h, *args, skin=5.0)
    g1, g2 = ops.cfconv_table_bwd(pos, h, gm, *args), ops.cfconv_table_bwd(pos, h, gm, *args)
    assert torch.equal(m1, m2)
    assert torch.equal(g1[0], g2[0]) and torch.equal(g1[1], g2[1])


def test_custom_ops_registered_with_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    pos, h, gm, (table, scale, r_end, rc) = setup("n3", 2, "bf16")
    for name in ("cfconv_table_fwd", "cfconv_table_bwd"):
        assert hasattr(torch.ops.flashschnet, name)
    with FakeTensorMode() as mode:
        fpos, fh, fgm, ftab, fsc = (mode.from_tensor(t) for t in (pos, h, gm, table, scale))
        m = torch.ops.flashschnet.cfconv_table_fwd(fpos, fh, ftab, fsc, r_end, rc)
        gh, gp = torch.ops.flashschnet.cfconv_table_bwd(fpos, fh, fgm, ftab, fsc, r_end, rc)
    assert m.shape == h.shape and gh.shape == h.shape and gp.shape == pos.shape


def test_bad_inputs_are_rejected():
    pos, h, gm, (table, scale, r_end, rc) = setup("n3", 2, "f32")
    with pytest.raises(ValueError, match="h must be"):
        ops.cfconv_table_fwd(pos, h[..., :4], table, scale, r_end, rc)
    with pytest.raises(ValueError, match="scale"):
        ops.cfconv_table_fwd(pos, h, table, scale[:1], r_end, rc)
    with pytest.raises(ValueError, match="Q = 2 or 3"):
        ops.cfconv_table_fwd(pos, h, table[:, :1], scale[:1], r_end, rc)
    with pytest.raises(ValueError, match="float64, float32"):
        ops.cfconv_table_fwd(pos, h, table.to(torch.int32), scale, r_end, rc)
