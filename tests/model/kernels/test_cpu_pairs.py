"""The fused C pair loops of the torch backend (flashschnet.kernels.cpu_pairs) against the same arithmetic as
PyTorch ops (the engine with fused_loops=False): message kernels with given filters, table kernels, whole
models (exact and compressed, float64/float32, 1/2/3 beads and replicas), bitwise repeatability, and the
fallback when no C compiler works."""
from __future__ import annotations

import logging

import pytest
import torch

from tests.conftest import rel_error
from flashschnet import compress
from flashschnet.fused.nodes import energy_forces_fused
from flashschnet.nn.layout import unpack
from flashschnet.fused.torch_engine import TorchPairEngine
from flashschnet.kernels import cpu_pairs


def _run(model, pos, types, fused):
    nw, basis, filters = unpack(model)
    eng = TorchPairEngine(basis, filters, skin=1.0, chunk=64, fused_loops=fused)
    return energy_forces_fused(nw, pos.contiguous(), types, eng)


@pytest.fixture(scope="module")
def compressed64(model64):
    return compress(model64, knots=64, tolerance=1.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("which", ["exact", "table-quintic", "table-cubic"])
def test_fused_loops_equal_pytorch_ops_on_the_oracle_frames(fixture_a, model64, which, dtype):
    model = model64 if which == "exact" else compress(model64, knots=64, kind=which.split("-")[1], tolerance=1.0)
    model = model.to(dtype)
    try:
        pos, types = fixture_a["positions_A"].to(dtype), fixture_a["bead_types"]
        e0, f0 = _run(model, pos, types, False)
        e1, f1 = _run(model, pos, types, True)
        e2, f2 = _run(model, pos, types, True)
    finally:
        model.double()
    tol = 1e-13 if dtype == torch.float64 else 2e-6
    assert rel_error(e1, e0) < tol and rel_error(f1, f0) < tol * 10
    assert torch.equal(e1, e2) and torch.equal(f1, f2)            # repeatable bitwise


@pytest.mark.parametrize("n", [1, 2, 3, 17])
def test_sizes_and_replicas(compressed64, model64, n):
    g = torch.Generator().manual_seed(n)
    pos = torch.randn(3, n, 3, generator=g, dtype=torch.float64) * 3.0
    types = torch.arange(n) % 20 + 1
    for model in (model64, compressed64):
        e0, f0 = _run(model, pos, types, False)
        e1, f1 = _run(model, pos, types, True)
        assert torch.allclose(e1, e0, rtol=1e-13, atol=1e-13) and torch.allclose(f1, f0, rtol=1e-12, atol=1e-13)
        # replica 1 alone equals replica 1 of the batch
        e_one, f_one = _run(model, pos[1:2], types, True)
        assert torch.allclose(e_one, e1[1:2], rtol=1e-13, atol=1e-13)


def test_message_kernels_with_given_filters():
    lib = cpu_pairs.library()
    assert lib is not None, "a C compiler is part of the test machine"
    from flashschnet.fused.pair_loops import PairLoops

    g = torch.Generator().manual_seed(0)
    M, F, P = 11, 7, 30
    i = torch.randint(0, M, (P,), generator=g)
    j = (i + torch.randint(1, M, (P,), generator=g)) % M
    W, dW = torch.randn(P, F, generator=g, dtype=torch.float64), torch.randn(P, F, generator=g, dtype=torch.float64)
    h, gm = torch.randn(M, F, generator=g, dtype=torch.float64), torch.randn(M, F, generator=g, dtype=torch.float64)
    pos = torch.randn(M, 3, generator=g, dtype=torch.float64)
    d = torch.linalg.vector_norm(pos[i] - pos[j], dim=-1)
    loops = PairLoops(lib, torch.float64)
    m = torch.full((M, F), 0.0, dtype=torch.float64)
    loops.msg_fwd(i, j, W, h, m)
    ref = torch.zeros(M, F, dtype=torch.float64).index_add_(0, i, W * h[j]).index_add_(0, j, W * h[i])
    assert torch.allclose(m, ref, rtol=1e-14, atol=1e-14)
    gh, gpos = torch.zeros(M, F, dtype=torch.float64), torch.zeros(M, 3, dtype=torch.float64)
    loops.msg_bwd(i, j, W, dW, h, gm, pos, d, gh, gpos)
    gh_ref = torch.zeros(M, F, dtype=torch.float64).index_add_(0, j, W * gm[i]).index_add_(0, i, W * gm[j])
    dd = ((gm[i] * h[j] + gm[j] * h[i]) * dW).sum(-1)
    v = (pos[i] - pos[j]) * (dd / d).unsqueeze(-1)
    gpos_ref = torch.zeros(M, 3, dtype=torch.float64).index_add_(0, i, v).index_add_(0, j, -v)
    assert torch.allclose(gh, gh_ref, rtol=1e-14, atol=1e-14) and torch.allclose(gpos, gpos_ref, rtol=1e-13, atol=1e-13)


def test_no_compiler_falls_back_to_pytorch_ops_with_a_note(monkeypatch, tmp_path, caplog, fixture_a, compressed64):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("FLASHSCHNET_KERNEL_CACHE", str(tmp_path / "cache"))
    cpu_pairs.library.forget()
    try:
        with caplog.at_level(logging.WARNING, logger="flashschnet"):
            assert cpu_pairs.library() is None
    finally:
        cpu_pairs.library.forget()        # later tests build (or find) the real library again
    monkeypatch.setattr(cpu_pairs, "library", lambda: None)
    notes = [r.getMessage() for r in caplog.records if "pair kernels could not be built" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0]
    pos, types = fixture_a["positions_A"][:2], fixture_a["bead_types"]
    e_auto, f_auto = _run(compressed64, pos, types, None)          # auto: PyTorch ops
    e_ops, f_ops = _run(compressed64, pos, types, False)
    assert torch.equal(e_auto, e_ops) and torch.equal(f_auto, f_ops)
    with pytest.raises(RuntimeError, match="fused_loops=True"):
        _run(compressed64, pos, types, True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_the_same_bits_on_any_thread_count(model64, compressed64, dtype):
    """Two replicas of 80 beads: 3 segments each (6 work items), on 1, 2 and 3 threads, exact and tables."""
    from flashschnet.fused.pair_loops import segments

    assert segments(2, 80).NS == 3
    g = torch.Generator().manual_seed(5)
    pos = (torch.randn(2, 80, 3, generator=g, dtype=torch.float64) * 6.0).to(dtype)
    types = torch.arange(80) % 20 + 1
    threads = torch.get_num_threads()
    try:
        for model in (model64, compressed64):
            model = model.to(dtype)
            runs = []
            for n in (1, 2, 3):
                torch.set_num_threads(n)
                runs.append(_run(model, pos, types, True))
            for e, f in runs[1:]:
                assert torch.equal(e, runs[0][0]) and torch.equal(f, runs[0][1])
            e0, f0 = _run(model, pos, types, False)
            tol = 1e-13 if dtype == torch.float64 else 2e-6
            assert rel_error(runs[0][0], e0) < tol and rel_error(runs[0][1], f0) < tol * 10
    finally:
        torch.set_num_threads(threads)
        model64.double(), compressed64.double()


@pytest.mark.parametrize("F,Q", [(7, 3), (7, 2), (64, 3), (64, 2)],
                         ids=["generic-quintic", "generic-cubic", "F64-quintic", "F64-cubic"])
def test_table_kernels_equal_the_pytorch_lookup(F, Q):
    """The table loops, compiled for F = 64 (Q = 2, 3) and generic otherwise, against TableFilter's PyTorch lookup
    and index_add (float64), with the intervals computed once and shared by both passes; the pairs in the step's
    order (3 segments of a 70-bead system). TableFilter's polynomial rows give the reference lookup's W and dW/dd
    (the Hermite form of flashschnet.nn.table)."""
    from flashschnet.nn.layout import TableWeights
    from flashschnet.nn.table import table_lookup
    from flashschnet.fused.pair_loops import PairLoops, segments
    from flashschnet.fused.torch_engine import TableFilter

    g = torch.Generator().manual_seed(F + Q)
    M, P, n, r_end = 70, 300, 33, 8.0
    a = torch.randint(0, M, (P,), generator=g)
    b = (a + torch.randint(1, M, (P,), generator=g)) % M
    i, j = torch.minimum(a, b), torch.maximum(a, b)                # a half list: i < j
    pos = torch.randn(M, 3, generator=g, dtype=torch.float64) * 3.0
    d = torch.linalg.vector_norm(pos[i] - pos[j], dim=-1)          # some beyond r_end: those pairs are skipped
    tw = TableWeights(torch.randn(n, Q, F, generator=g), torch.rand(Q, F, generator=g) + 0.5, r_end)
    src = TableFilter(tw, torch.float64, "cpu")
    h, gm = torch.randn(M, F, generator=g, dtype=torch.float64), torch.randn(M, F, generator=g, dtype=torch.float64)
    loops = PairLoops(cpu_pairs.library(), torch.float64)
    i, j, d, seg = loops.order_pairs(i, j, d, segments(1, M), 25.6 / r_end)
    assert seg.NS == 3 and seg.start.tolist()[::3] == [0, P] and bool((torch.diff(seg.start) > 0).all())
    ks, ts = loops.table_intervals(src, d)
    assert torch.equal(ks < 0, d >= r_end) and bool((d >= r_end).any())
    m = torch.zeros(M, F, dtype=torch.float64)
    loops.table_fwd(src, seg, ks, ts, i, j, h, m)
    W, dW = src.values_and_derivative(d)
    W_ref, dW_ref = table_lookup(d, tw.table, tw.scale, r_end)
    assert torch.allclose(W, W_ref, rtol=1e-12, atol=1e-12) and torch.allclose(dW, dW_ref, rtol=1e-11, atol=1e-11)
    ref = torch.zeros(M, F, dtype=torch.float64).index_add_(0, i, W * h[j]).index_add_(0, j, W * h[i])
    assert torch.allclose(m, ref, rtol=1e-13, atol=1e-13)
    gh, gpos = torch.zeros(M, F, dtype=torch.float64), torch.zeros(M, 3, dtype=torch.float64)
    loops.table_bwd(src, seg, ks, ts, i, j, d, h, gm, pos, gh, gpos)
    gh_ref = torch.zeros(M, F, dtype=torch.float64).index_add_(0, j, W * gm[i]).index_add_(0, i, W * gm[j])
    dd = ((gm[i] * h[j] + gm[j] * h[i]) * dW).sum(-1)
    v = (pos[i] - pos[j]) * (dd / d).unsqueeze(-1)
    gpos_ref = torch.zeros(M, 3, dtype=torch.float64).index_add_(0, i, v).index_add_(0, j, -v)
    assert torch.allclose(gh, gh_ref, rtol=1e-13, atol=1e-13) and torch.allclose(gpos, gpos_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_kept_pairs_and_distances_are_bitwise_those_of_the_pytorch_ops(fixture_a, model64, dtype):
    """The C pass that keeps a step's pairs within the cutoff gives the PyTorch path's pairs and distances bit for
    bit, so turning the fused loops on or off moves nothing a run resumes from."""
    nw, basis, filters = unpack(model64.to(dtype))
    try:
        pos = fixture_a["positions_A"].to(dtype).contiguous()
        engines = [TorchPairEngine(basis, filters, skin=1.0, chunk=64, fused_loops=f) for f in (False, True)]
        for e in engines:
            e.prepare(pos)
        assert engines[1].loops is not None and engines[0].loops is None
        assert engines[0].i.shape[0] > 0
        for name in ("i", "j", "d"):
            assert torch.equal(getattr(engines[0], name), getattr(engines[1], name)), name
    finally:
        model64.double()
