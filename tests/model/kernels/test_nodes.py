"""flashschnet.kernels.nodes: the fused node-layer kernels (each block's reduction with ``lin2 -> tanh -> lin ->
residual -> next lin1``; after the last block the output MLP, the energies and the backward's start; backward: the
reductions, ``gh L1``, the previous block's ``gm``, forces and energies) against their plain-PyTorch reference --
the node-level pass of :mod:`flashschnet.fused.nodes` around the same CFConv kernels -- and the reference backend,
in float64 (~1e-11 relative) under TRITON_INTERPRET=1: output MLPs of 0 to 3 hidden layers (deeper ones run the PyTorch pass),
1, 2, 3 beads and several replicas, widths that pad, the GPU's 32-wide blocks, poisoned buffers."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused import launches  # noqa: E402
from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.fused.nodes import energy_forces_fused  # noqa: E402
from flashschnet.fused.triton_engine import TritonTileEngine  # noqa: E402
from flashschnet.nn.layout import unpack  # noqa: E402
from tests.helpers.kernel_cases import chain  # noqa: E402
from tests.helpers.small_networks import network, reference_of, types_of  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")



@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output, partial and scratch buffer starts as NaN: a missed element fails the comparison."""


def fused_and_pytorch(net, pos, types):
    """``(fused (e, f, total), node-level PyTorch pass (e, f))`` of one engine (the same CFConv kernels)."""
    weights, basis, filters = unpack(net)
    eng = TritonTileEngine(basis, filters, skin=1.0)
    with torch.no_grad():
        fused = eng.energy_forces(weights, pos, types)
        return eng, fused, energy_forces_fused(weights, pos, types, eng)


def check(net, pos, types, tol=1e-11):
    eng, (e, f, tot), (e2, f2) = fused_and_pytorch(net, pos, types)
    assert eng.node_plan is not None                               # the fused node kernels ran
    assert not torch.isnan(f).any() and not torch.isnan(e).any()
    scale = max(1.0, float(e2.abs().max()))
    assert float((e - e2).abs().max()) <= tol * scale
    assert float((f - f2).abs().max()) <= tol * max(1.0, float(f2.abs().max()))
    assert float(abs(tot - e2.sum())) <= tol * scale * e.numel()
    ref = reference_of(net)
    er, fr = ref.energy_forces(pos, types)
    assert float((e - er).abs().max()) <= 1e-10 * max(1.0, float(er.abs().max()))
    assert float((f - fr).abs().max()) <= 1e-10 * max(1.0, float(fr.abs().max()))


@pytest.mark.parametrize("widths", [[], [16], [16, 8], [24, 16, 8]], ids=["0", "1", "2", "3"])
def test_every_fused_output_mlp_depth(widths):
    """0 to 3 hidden layers (their widths padded to 32), 2 blocks, 2 replicas of 20 beads (2 tiles)."""
    check(network(widths), chain(2, 20, torch.float64, seed=1), types_of(20))


@pytest.mark.parametrize("N", [1, 2, 3])
def test_one_two_three_beads(N):
    """One tile with 1, 2, 3 real beads (the rest padding), 3 replicas; one bead has no pair at all."""
    check(network([16, 8], blocks=1), chain(3, N, torch.float64, seed=N) * 0.5, types_of(N))


def test_wide_layers_in_the_gpus_32_wide_blocks(monkeypatch):
    """Widths of 40 (padded to 64: two 32-wide blocks per product, the GPU's configuration) and three blocks."""
    monkeypatch.setattr(launches, "GPU_CONFIGS_IN_INTERPRETER", True)
    check(network([40, 24], H=40, F=40, blocks=3), chain(1, 20, torch.float64, seed=4), types_of(20))


def test_a_deeper_output_mlp_runs_the_pytorch_pass():
    """Four hidden layers are more than the kernels fuse: the engine runs the node-level PyTorch pass (same
    CFConv kernels) and says so by having no node plan."""
    net = network([16, 16, 8, 8], blocks=1)
    weights, basis, filters = unpack(net)
    eng = TritonTileEngine(basis, filters, skin=1.0)
    pos, types = chain(1, 12, torch.float64, seed=2), types_of(12)
    with torch.no_grad():
        e, f, tot = eng.energy_forces(weights, pos, types)
    assert eng.node_plan is None
    er, fr = reference_of(net).energy_forces(pos, types)
    assert float((e - er).abs().max()) <= 1e-10 * max(1.0, float(er.abs().max()))
    assert float((f - fr).abs().max()) <= 1e-10 * max(1.0, float(fr.abs().max()))
