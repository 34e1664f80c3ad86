"""flashschnet.fused.cpu_step: the torch engine's whole step as one C call. Where it runs (float32 tables on a CPU,
by default) and where not; the same bits as the kernels called one at a time (fused_step=False, itself tested
against PyTorch's ops and float64 in test_node_ops.py) at 1, 2 and 3 beads, a real protein and several
replicas, in the model's units and in OpenMM's; on 1 and 2 threads; after its buffers grow; with every buffer
poisoned between steps (nothing read before it is written); a bead type outside the model refused in one line."""
from __future__ import annotations

import copy

import pytest
import torch

from tests.conftest import rel_error
from flashschnet import compress
from flashschnet.fused.cpu_step import CStep
from flashschnet.fused.torch_engine import TorchPairEngine
from flashschnet.nn.layout import unpack

OPENMM_SCALES = (10.0, 4.184, 41.84)       # nm -> Angstrom, kcal/mol -> kJ/mol, and their ratio


@pytest.fixture(scope="module")
def tabulated(model64):
    """The oracle network with float32 filter tables (and the same tables in float64)."""
    model = compress(model64, knots=64, tolerance=1.0)
    return model, copy.deepcopy(model).float()


def _positions(fixture_a, R, N):
    if N == "protein":
        pos1 = fixture_a["positions_A"][:1]
        g = torch.Generator().manual_seed(R)
        return (pos1.expand(R, -1, -1) + 0.05 * torch.randn(R, *pos1.shape[1:], dtype=pos1.dtype, generator=g),
                fixture_a["bead_types"])
    g = torch.Generator().manual_seed(10 * R + N)
    return torch.randn(R, N, 3, dtype=torch.float64, generator=g) * 2.5, torch.arange(N) % 20 + 1


def _engine(model, fused_step):
    nw, basis, filters = unpack(model)
    return nw, TorchPairEngine(basis, filters, skin=1.0, fused_step=fused_step)


def _run(model, pos, types, fused_step, scales=(1.0, 1.0, 1.0)):
    nw, eng = _engine(model, fused_step)
    return eng.energy_forces(nw, pos.contiguous(), types, scales), eng


def test_the_step_is_one_c_call_for_float32_tables_on_a_cpu_only(model64, tabulated, fixture_a):
    model, model32 = tabulated
    pos, types = _positions(fixture_a, 1, 4)
    assert isinstance(_run(model32, pos.float(), types, None)[1]._step, CStep)           # the default
    assert _run(model32, pos.float(), types, False)[1]._step is None                    # on request: one at a time
    assert _run(model, pos, types, None)[1]._step is None                               # float64
    with pytest.raises(RuntimeError, match="fused_step=True needs float32"):
        _run(model, pos, types, True)
    try:
        model64.float()                                                                 # exact filters
        assert _run(model64, pos.float(), types, None)[1]._step is None
    finally:
        model64.double()


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (1, 3), (3, 3), (1, "protein"), (3, "protein")])
def test_the_c_step_gives_the_bits_of_the_kernels_one_call_at_a_time(tabulated, fixture_a, shape):
    model, model32 = tabulated
    pos, types = _positions(fixture_a, *shape)
    for scales in ((1.0, 1.0, 1.0), OPENMM_SCALES):
        p = (pos / scales[0]).float()
        (e, f, total), eng = _run(model32, p, types, True, scales)
        assert isinstance(eng._step, CStep)
        e_k, f_k, total_k = _run(model32, p, types, False, scales)[0]
        assert torch.equal(e, e_k) and torch.equal(f, f_k) and torch.equal(total, total_k)
        assert bool(torch.isfinite(f).all())
    e64, f64, _ = _run(model, pos, types, False)[0]
    (e, f, _), _ = _run(model32, pos.float(), types, True)
    if shape[1] != 1:                                         # (one bead: no pairs, forces exactly zero)
        assert rel_error(f, f64) < 1e-5
    assert rel_error(e, e64) < 1e-5


def test_the_c_step_is_bitwise_the_same_on_one_and_two_threads(tabulated, fixture_a):
    _, model32 = tabulated
    pos, types = _positions(fixture_a, 3, "protein")
    threads = torch.get_num_threads()
    try:
        out = []
        for n in (1, 2):
            torch.set_num_threads(n)
            out.append(_run(model32, pos.float(), types, True, OPENMM_SCALES)[0])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(*out))


def test_the_c_step_grows_its_buffers_and_reads_nothing_it_did_not_write(tabulated, fixture_a):
    _, model32 = tabulated
    pos, types = _positions(fixture_a, 2, "protein")
    nw, eng = _engine(model32, True)
    nw_k, ref = _engine(model32, False)
    far = (pos * 3.0).float()                     # few pairs first, then the folded protein: more pairs
    lists = []
    for p in (far, pos.float(), (pos * 0.8).float()):
        if eng._step is not None:
            for buf in eng._step._bufs.values():  # poison every buffer between steps
                buf.fill_(float("nan") if buf.is_floating_point() else -(2 ** 40))
        got = eng.energy_forces(nw, p, types, OPENMM_SCALES)
        want = ref.energy_forces(nw_k, p, types, OPENMM_SCALES)
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        lists.append((eng.verlet.builds, int(eng.verlet.current.i.shape[0]), eng._step._pcap))
    builds, pairs, caps = zip(*lists)
    assert builds == (1, 2, 3) and pairs[0] < pairs[1] < pairs[2] and caps[0] < caps[1] <= caps[2]
    assert all(c >= p for c, p in zip(caps, pairs))


def test_a_bead_type_outside_the_model_is_one_line(tabulated, fixture_a):
    _, model32 = tabulated
    pos, types = _positions(fixture_a, 1, 3)
    bad = types.clone()
    bad[1] = 10 ** 6
    with pytest.raises(IndexError, match=r"^flashschnet: bead 1 has type 1000000, outside the model's \d+ bead "
                                         r"types$"):
        _run(model32, pos.float(), bad, True)
