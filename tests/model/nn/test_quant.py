"""Channel-wise 16-bit weights: round-trip bounds, quantized kernels vs the quantized reference, every backend
on the same quantized weights, checkpoints, accuracy bounds against float32/float64, clear errors."""
from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import (EXAMPLES, FUSED_BACKENDS, assert_forces_match_finite_differences, oracle_path, rel_error,
                      torchforce_energy_forces)
from flashschnet import InputError, load_model, map_pdb, quantize, save_checkpoint
from flashschnet.fused import clear_engine_cache
from flashschnet.nn.quant import QDTYPES, QuantLinear, dequantize_weight, quantize_weight
from flashschnet.transforms import apply_variant
from tests.helpers import cfconv_reference as ref
from tests.helpers import standalone_ops as flash

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

#: unit roundoff of the 16-bit formats (half an ulp, relative)
UNIT = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def _weights_with_awkward_channels(seed=0):
    """[6, 40]: ordinary, tiny (fp16 subnormal without scaling), large (beyond fp16 without scaling, only in
    the last test), mixed-magnitude, all-zero and single-nonzero channels."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 40, generator=g, dtype=torch.float64) * 0.3
    w[1] *= 1e-6
    w[2] *= 1e3
    w[3] *= torch.logspace(-4, 0, 40, dtype=torch.float64)
    w[4] = 0.0
    w[5] = 0.0
    w[5, 7] = -0.25
    return w


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_per_channel_round_trip_is_within_half_an_ulp(dtype):
    w = _weights_with_awkward_channels()
    q, s = quantize_weight(w, dtype, per_channel=True)
    assert q.dtype == dtype and s.dtype == torch.float32 and q.shape == w.shape and s.shape == (6,)
    back = dequantize_weight(q, s, torch.float64)
    err = (back - w).abs()
    # relative half-ulp of the 16-bit format, plus the float32 rounding of q * s (we check in float64 here)
    assert bool((err <= UNIT[dtype] * w.abs() * (1 + 1e-6)).all()), float((err / w.abs().clamp_min(1e-300)).max())
    assert torch.equal(s[4], torch.tensor(1.0)) and bool((q[4] == 0).all())     # an all-zero channel
    # every channel's largest weight sits at the target, far from overflow
    amax = (q.float().abs()).amax(1)
    assert float(amax[:4].max()) <= 2.0 ** 14 * (1 + UNIT[dtype]) and float(amax[:4].min()) >= 2.0 ** -1


def test_per_channel_beats_the_plain_fp16_cast_on_small_channels():
    w = _weights_with_awkward_channels()[[0, 1, 3]]
    qc, sc = quantize_weight(w, torch.float16, per_channel=False)
    qs, ss = quantize_weight(w, torch.float16, per_channel=True)
    assert torch.equal(sc, torch.ones(3))
    cast_err = ((dequantize_weight(qc, sc, torch.float64) - w).abs() / w.abs()).amax(1)
    chan_err = ((dequantize_weight(qs, ss, torch.float64) - w).abs() / w.abs()).amax(1)
    assert float(chan_err.max()) <= 2.0 ** -11 * 1.000001
    assert float(cast_err[1]) > 1e-2          # 1e-7-sized weights are fp16 subnormals when cast directly
    assert float(cast_err[0]) <= 2.0 ** -11 * 1.000001


def test_plain_cast_refuses_weights_beyond_fp16_range():
    w = torch.tensor([[1.0e5, 1.0]], dtype=torch.float64)
    with pytest.raises(InputError, match="per_channel=True"):
        quantize_weight(w, torch.float16, per_channel=False)
    q, s = quantize_weight(w, torch.float16, per_channel=True)
    assert rel_error(dequantize_weight(q, s, torch.float64), w) < 2.0 ** -11


def test_quantize_weight_rejects_bad_input():
    with pytest.raises(InputError, match="NaN"):
        quantize_weight(torch.tensor([[float("nan")]]), torch.float16)
    with pytest.raises(InputError, match="float16 or bfloat16"):
        quantize_weight(torch.ones(2, 2), torch.int8)
    with pytest.raises(ValueError, match=r"\[out, in\]"):
        quantize_weight(torch.ones(3), torch.float16)


@pytest.mark.parametrize("qdtype", ["float16", "bfloat16"])
def test_quant_linear_keeps_its_bits_through_dtype_moves(qdtype):
    lin = torch.nn.Linear(5, 4).double()
    ql = QuantLinear(5, 4, True, qdtype).set_from(lin, per_channel=True).double()
    assert ql.weight_q.dtype == QDTYPES[qdtype] and ql.weight_scale.dtype == torch.float32
    assert ql.to(torch.float32).weight_q.dtype == QDTYPES[qdtype] and ql.bias.dtype == torch.float32
    ql = ql.double()
    x = torch.randn(3, 5, dtype=torch.float64)
    expected = x @ dequantize_weight(ql.weight_q, ql.weight_scale, torch.float64).T + lin.bias
    assert torch.allclose(ql(x), expected, rtol=1e-14, atol=1e-14)
    assert rel_error(ql(x), lin(x)) < 4 * UNIT[QDTYPES[qdtype]]


# ------------------------------------------------------------------------------------------------ kernels


def _kernel_case(dtype, qdtype, R=2, N=37, K=16, F=16, rc=6.5, seed=3, dot="ieee"):
    g = torch.Generator().manual_seed(seed)
    step = torch.randn(R, N, 3, generator=g, dtype=torch.float64)
    pos = (step / step.norm(dim=-1, keepdim=True) * 3.8).cumsum(1).to(dtype)
    offsets = torch.linspace(0.0, rc, K, dtype=torch.float64)
    coeffs = torch.full((K,), -0.5 / float(offsets[1] - offsets[0]) ** 2, dtype=torch.float64)
    A1 = torch.randn(F, K, generator=g, dtype=torch.float64) / math.sqrt(K)
    A1[3] *= 1e-5                                   # a small channel: the scales matter
    a1 = torch.randn(F, generator=g, dtype=torch.float64) * 0.3
    A2 = torch.randn(F, F, generator=g, dtype=torch.float64) / math.sqrt(F)
    A1q, A1s = quantize_weight(A1, qdtype)
    A2q, A2s = quantize_weight(A2, qdtype)
    h = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    gm = torch.randn(R, N, F, generator=g, dtype=torch.float64).to(dtype)
    head = (A1q, a1.to(dtype), A2q, offsets.to(dtype), coeffs.to(dtype), rc, rc, rc - 0.5, "gaussian", 0.0, True,
            True, 0.0, dot)
    return pos, h, gm, head, (A1s, A2s), (A1, a1, A2)


def _close(out, expected, dtype):
    assert not torch.isnan(out).any(), "an output element was never written"
    tol = TOL[dtype]
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol * max(float(expected.abs().max()), 1e-30))


@pytest.mark.parametrize("qdtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_quantized_kernels_match_the_quantized_reference(poison_buffers, dtype, qdtype):
    pos, h, gm, head, scales, _ = _kernel_case(dtype, qdtype)
    _close(flash.cfconv_fwd(pos, h, *head, *scales), ref.cfconv_fwd_ref(pos, h, *head, *scales), dtype)
    for got, want in zip(flash.cfconv_bwd(pos, h, gm, *head, *scales), ref.cfconv_bwd_ref(pos, h, gm, *head, *scales)):
        _close(got, want, dtype)


@pytest.mark.parametrize("qdtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_quantized_kernels_with_16bit_products(poison_buffers, qdtype):
    """matmul "auto" on 16-bit weights: products of the weights' own type (tensor cores on a GPU); the result
    equals plain PyTorch doing the same 16-bit products (float32 sums) to float32 rounding."""
    pos, h, gm, head, scales, _ = _kernel_case(torch.float32, qdtype, dot="auto")
    dot = "fp16" if qdtype == torch.float16 else "bf16"
    emul, exact = head[:-1] + (dot,), head[:-1] + ("ieee",)
    out, want = flash.cfconv_fwd(pos, h, *head, *scales), ref.cfconv_fwd_ref(pos, h, *emul, *scales)
    torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-3 * float(want.abs().max()))
    # the gradients: no worse than twice PyTorch's own autograd through the same 16-bit products
    got = flash.cfconv_bwd(pos, h, gm, *head, *scales)
    truth = ref.cfconv_bwd_ref(pos.double(), h.double(), gm.double(), *exact, *scales)
    torch16 = ref.cfconv_bwd_ref(pos, h, gm, *emul, *scales)
    for g, t, p in zip(got, truth, torch16):
        scale = float(t.abs().max())
        assert float((g.double() - t).abs().max()) / scale <= 2 * float((p.double() - t).abs().max()) / scale


def test_quantized_kernel_equals_the_kernel_on_dequantized_weights():
    """Dequantizing in registers is the same arithmetic as dequantizing first (float64: to rounding)."""
    dtype = torch.float64
    pos, h, gm, head, (A1s, A2s), _ = _kernel_case(dtype, torch.float16)
    A1q, A2q = head[0], head[2]
    deq = (dequantize_weight(A1q, A1s, dtype), head[1], dequantize_weight(A2q, A2s, dtype)) + head[3:]
    _close(flash.cfconv_fwd(pos, h, *head, A1s, A2s), flash.cfconv_fwd(pos, h, *deq), dtype)
    for got, want in zip(flash.cfconv_bwd(pos, h, gm, *head, A1s, A2s), flash.cfconv_bwd(pos, h, gm, *deq)):
        _close(got, want, dtype)


def test_quantized_kernel_arguments_are_checked():
    pos, h, gm, head, (A1s, A2s), _ = _kernel_case(torch.float32, torch.float16)
    with pytest.raises(ValueError, match="both A1_scale and A2_scale"):
        flash.cfconv_fwd(pos, h, *head, A1s, None)
    bad = (head[0].float(),) + head[1:]
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flash.cfconv_fwd(pos, h, *bad, A1s, A2s)
    with pytest.raises(ValueError, match="shape"):
        flash.cfconv_fwd(pos, h, *head, A1s[:-1], A2s)


# ------------------------------------------------------------------------------------------------ the model


def _model(variant_name, backend, dtype=torch.float64, matmul="ieee"):
    """The oracle model with a 16-bit variant; ``matmul="ieee"``: the triton backend's products exact, so every
    backend computes the same numbers (16-bit products: tests/model/fused/test_triton_engine.py)."""
    clear_engine_cache()
    return apply_variant(load_model(oracle_path("mlcg_schnet_A.pt"), backend=backend, dtype=dtype, matmul=matmul),
                         variant_name)


@pytest.mark.parametrize("variant_name", ["fp16", "bf16-cast"])
@pytest.mark.parametrize("backend", FUSED_BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_backends_agree_on_quantized_weights_chignolin(fixture_a, variant_name, backend, dtype):
    pos, types = fixture_a["positions_A"][:3].to(dtype), fixture_a["bead_types"]
    e_ref, f_ref = _model(variant_name, "reference", dtype).energy_forces(pos, types)
    e, f = _model(variant_name, backend, dtype).energy_forces(pos, types)
    tol = TOL[dtype]
    assert rel_error(e, e_ref) < tol and rel_error(f, f_ref) < 10 * tol


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_quantized_molecules_agree(n):
    torch.manual_seed(n)
    pos = torch.randn(2, n, 3, dtype=torch.float64) * 3.0
    types = torch.tensor([21, 22, 6][:n])
    e_ref, f_ref = _model("fp16", "reference").energy_forces(pos, types)
    for backend in FUSED_BACKENDS:
        e, f = _model("fp16", backend).energy_forces(pos, types)
        assert float((e - e_ref).abs().max()) < 1e-12 * max(1.0, float(e_ref.abs().max()))
        assert float((f - f_ref).abs().max()) < 1e-11 * max(1.0, float(f_ref.abs().max()))


def test_quantized_real_protein_several_replicas_torch_path():
    mol = map_pdb(EXAMPLES / "4PTI_bpti.pdb")
    pos = torch.as_tensor(mol.positions)[None].repeat(2, 1, 1)
    pos[1] += 0.3 * torch.randn(pos[1].shape, dtype=pos.dtype, generator=torch.Generator().manual_seed(5))
    types = torch.as_tensor(mol.bead_types)
    e_ref, f_ref = _model("bf16", "reference").energy_forces(pos, types)
    e, f = _model("bf16", "torch").energy_forces(pos, types)
    assert rel_error(e, e_ref) < 1e-10 and rel_error(f, f_ref) < 1e-10


def test_quantized_forces_are_the_exact_gradient(fixture_a):
    """Quantization changes the potential, not the consistency of its forces: central differences."""
    assert_forces_match_finite_differences(_model("fp16", "torch"), fixture_a["positions_A"][:1].clone(),
                                           fixture_a["bead_types"], [(0, 0), (7, 1), (30, 2), (48, 0)])


def test_quantized_model_through_torchscript_and_torchforce(fixture_a):
    model = _model("fp16", "torch")
    pos, types = fixture_a["positions_A"][:2], fixture_a["bead_types"]
    e1, f1 = model.energy_forces(pos, types)
    e2, f2 = torch.jit.script(model.network).energy_forces(pos, types)
    assert torch.equal(e1, e2) and torch.equal(f1, f2)
    energy, forces = torchforce_energy_forces(model, pos, types)
    assert abs(energy - float(e1.sum())) < 1e-9 * max(1.0, abs(energy))
    assert float((torch.as_tensor(forces) - f1.reshape(-1, 3)).abs().max()) < 1e-9 * float(f1.abs().max())


def test_quantized_checkpoint_round_trip_is_bitwise(tmp_path, fixture_a):
    model = _model("bf16", "torch")
    path = tmp_path / "q.pt"
    save_checkpoint(path, model, metadata={"description": "quantized"})
    raw = torch.load(path, weights_only=True)
    assert raw["config"]["quantization"] == {"dtype": "bfloat16", "per_channel": True}
    q16 = {k: v for k, v in raw["state_dict"].items() if k.endswith("weight_q")}
    cfg = raw["config"]     # two filter Linears per block, every Linear of the output MLP
    assert len(q16) == 2 * cfg["num_interactions"] + len(cfg["output_hidden_layer_widths"]) + 1
    assert all(v.dtype == torch.bfloat16 for v in q16.values())
    assert all(raw["state_dict"][k[:-1] + "scale"].dtype == torch.float32 for k in q16)
    assert not any(k.endswith("filter_network.layers.0.weight") for k in raw["state_dict"])
    back = load_model(path, backend="torch", dtype=torch.float64)
    for k, v in model.network.state_dict().items():
        assert torch.equal(back.network.state_dict()[k], v), k
    pos, types = fixture_a["positions_A"][:2], fixture_a["bead_types"]
    assert torch.equal(back.energy_forces(pos, types)[1], model.energy_forces(pos, types)[1])


def test_quantized_checkpoint_errors(tmp_path):
    model = _model("fp16", "torch")
    path = tmp_path / "q.pt"
    save_checkpoint(path, model)
    raw = torch.load(path, weights_only=True)
    key = next(k for k in raw["state_dict"] if k.endswith("weight_q"))
    bad = dict(raw, state_dict=dict(raw["state_dict"]))
    bad["state_dict"][key] = bad["state_dict"][key].float()
    torch.save(bad, tmp_path / "float_q.pt")
    with pytest.raises(InputError, match="stored as torch.float32, the config says torch.float16"):
        load_model(tmp_path / "float_q.pt")
    nan = dict(raw, state_dict=dict(raw["state_dict"]))
    t = nan["state_dict"][key].clone()
    t[0, 0] = float("nan")
    nan["state_dict"][key] = t
    torch.save(nan, tmp_path / "nan_bits.pt")
    with pytest.raises(InputError, match="NaN"):
        load_model(tmp_path / "nan_bits.pt")
    odd = dict(raw, config=dict(raw["config"], quantization={"dtype": "int8"}))
    torch.save(odd, tmp_path / "odd.pt")
    with pytest.raises(InputError, match="float16 or bfloat16"):
        load_model(tmp_path / "odd.pt")


def test_quantize_refuses_what_it_cannot_do():
    model = _model("none", "torch")
    q = quantize(model, torch.float16)
    with pytest.raises(InputError, match="already quantized"):
        quantize(q, torch.bfloat16)
    with pytest.raises(TypeError):
        quantize(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match="unknown quantization"):
        apply_variant(model, "int8")
    assert model.config["quantization"] is None        # the input model is left alone


# ------------------------------------------------------------------------------------------------ accuracy


def _rel_rmse(f, f_ref) -> float:
    return float(((f.double() - f_ref) ** 2).sum().sqrt() / (f_ref ** 2).sum().sqrt())


@pytest.fixture(scope="module")
def example_frames():
    """The bundled example (trp-cage placeholder model) at its native structure and 4 perturbed copies."""
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    g = torch.Generator().manual_seed(1)
    pos = torch.as_tensor(mol.positions)[None].repeat(5, 1, 1)
    pos[1:] += 0.2 * torch.randn(pos[1:].shape, dtype=pos.dtype, generator=g)
    return pos, torch.as_tensor(mol.bead_types)


@pytest.mark.parametrize("variant_name, bound", [("fp16", 0.01), ("fp16-cast", 0.01), ("bf16", 0.05),
                                                 ("bf16-cast", 0.05)])
def test_force_error_bounds_versus_fp32(fixture_a, example_frames, variant_name, bound):
    """Target of the issue: fp16 with per-channel scales within 1 % force relative RMSE of float32 (bf16: a
    looser regression bound, its measured error is in docs/quantization.md). Computed in float32 against
    the unquantized float32 model, on the mlcg oracle frames and on the bundled example."""
    for path, (pos, types) in [(oracle_path("mlcg_schnet_A.pt"), (fixture_a["positions_A"], fixture_a["bead_types"])),
                               (EXAMPLES / "trpcage_placeholder.pt", example_frames)]:
        fp32 = load_model(path, backend="torch", dtype=torch.float32)
        _, f32 = fp32.energy_forces(pos.float(), types)
        _, fq = apply_variant(fp32, variant_name).energy_forces(pos.float(), types)
        assert _rel_rmse(fq, f32.double()) < bound, (path, variant_name)


def test_a_saved_quantized_model_runs_in_the_cli(tmp_path, capsys):
    from flashschnet.scripts.simulate import main

    model = load_model(EXAMPLES / "trpcage_placeholder.pt")
    path = tmp_path / "trpcage_fp16.pt"
    save_checkpoint(path, quantize(model, torch.float16), priors=model.priors, metadata=model.metadata)
    args = [str(EXAMPLES / "1L2Y_trpcage.pdb"), "--model", str(path), "--steps", "10", "--report-interval", "10",
            "--seed", "1", "--quiet", "--threads", "1"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert "16-bit weights: float16, per-channel scales" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "b"), "--quantize", "bf16"]) == 2
    assert "already quantized" in capsys.readouterr().err
