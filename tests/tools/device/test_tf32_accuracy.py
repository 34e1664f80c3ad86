"""The CPU emulation of the triton kernels' tf32 filter products (flashschnet.fused.emulation) and the prediction
the GPU check reads from docs/tf32-accuracy.json (made by tools/device/tf32_accuracy.py): the roundings bit for bit
against numpy, the emulation against ieee, the plain-PyTorch emulation and the bf16 products, and the recorded
prediction against a recomputation. A few seconds."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.conftest import ROOT, oracle_path
from flashschnet.fused import emulation as ta
from tests.helpers.cfconv_reference import round_tf32 as helper_round_tf32

JSON = ROOT / "docs" / "tf32-accuracy.json"
PAIR = [0, 3]            # two oracle frames for the quick checks


# ------------------------------------------------------------------------------------------------ roundings


def numpy_tf32(x: np.ndarray, mode: str) -> np.ndarray:
    """float32 -> tf32 (as float32) by float64 arithmetic, independent of the bit tricks: the two tf32 neighbours
    ``lo <= |x| < hi = lo + ulp`` (ulp = 2^(e - 10), e the exponent of |x|, at least -126: subnormals share the
    smallest normal's spacing), then ``"rz"`` lo, ``"rna"`` the nearer, ties away from zero. Exact: |x| has 24
    significant bits, ulp is a power of two, so |x| / ulp, floor, lo, hi and both distances are exact in float64."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x.astype(np.float64))
    finite = np.isfinite(a) & (a > 0)
    safe = np.where(finite, a, 1.0)
    _, ex = np.frexp(safe)                               # safe = m 2^ex, m in [0.5, 1): exponent ex - 1
    ulp = np.ldexp(1.0, np.maximum(ex - 1, -126) - 10)
    lo = np.floor(safe / ulp) * ulp
    hi = lo + ulp
    if mode == "rz":
        r = lo
    else:
        r = np.where(safe - lo >= hi - safe, hi, lo)
    with np.errstate(over="ignore"):
        r32 = np.where(r >= 2.0 ** 128, np.inf, r).astype(np.float32)
    r32 = np.copysign(r32, x)
    return np.where(finite, r32, x)                      # zeros, inf, NaN unchanged


def bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def sample_values() -> np.ndarray:
    """Random bit patterns over the whole float32 range, random normal values, and the edge cases: ties (low 13
    bits exactly 0x1000, both parities of the last kept bit), one below/above a tie, subnormals (smallest, ties,
    largest), the largest finite value (rounds to inf), +-0, +-inf, NaNs with low and high payloads; both signs."""
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32)
    normal = rng.standard_normal(5000).astype(np.float32)
    edges = []
    for exp in (0, 1, 100, 127, 200, 254):                    # exponent fields (0: subnormal)
        for keep in (0x0, 0x2000, 0x7FE000, 0x7FC000):      # kept mantissa bits (even / odd last kept bit)
            for low in (0x0, 0x1, 0xFFF, 0x1000, 0x1001, 0x1FFF):
                edges.append((exp << 23) | keep | low)
    edges += [0x00000001, 0x00001000, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F7FEFFF, 0x7F7FF000, 0x00000000,
              0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FBFFFFF]
    edges = np.array(edges, dtype=np.uint32)
    edges = np.concatenate([edges, edges | np.uint32(0x80000000)])          # negatives, -0, -inf, -NaN
    return np.concatenate([raw.view(np.float32), normal, edges.view(np.float32)])


@pytest.mark.parametrize("mode", ["rna", "rz"])
def test_tf32_rounding_is_bit_exact(mode):
    x = sample_values()
    fn = ta.round_tf32 if mode == "rna" else ta.truncate_tf32
    with np.errstate(invalid="ignore"):
        got = fn(torch.from_numpy(x.copy())).numpy()
        want = numpy_tf32(x, mode)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all() and np.array_equal(bits(got[nan]), bits(x[nan])), "NaN must stay the same NaN"
    bad = np.flatnonzero(bits(got[~nan]) != bits(want[~nan]))
    assert bad.size == 0, [(hex(int(bits(x[~nan])[i])), hex(int(bits(got[~nan])[i])), hex(int(bits(want[~nan])[i])))
                           for i in bad[:5]]
    assert not (bits(got[~nan]) & 0x1FFF).any(), "the low 13 bits must be zero"
    # spot checks of the tie rule: away from zero for both parities (not ties-to-even)
    t = torch.tensor(np.array([0x3F801000, 0x3F803000, 0xBF801000], dtype=np.uint32).view(np.float32))
    expect = {"rna": [0x3F802000, 0x3F804000, 0xBF802000], "rz": [0x3F800000, 0x3F802000, 0xBF800000]}[mode]
    assert bits(fn(t).numpy()).tolist() == expect
    assert bits(fn(torch.tensor([np.float32(3.4028235e38)])).numpy()).tolist() == [0x7F800000 if mode == "rna"
                                                                                  else 0x7F7FE000]


def test_kernel_tests_helper_rounds_the_same_finite_values():
    """tests/helpers/cfconv_reference.round_tf32 (the kernel tests' ``dot="tf32"`` reference) is the same
    rounding on finite values."""
    x = sample_values()
    x = x[np.isfinite(x)]
    a = ta.round_tf32(torch.from_numpy(x.copy())).numpy()
    b = helper_round_tf32(torch.from_numpy(x.copy())).numpy()
    assert np.array_equal(bits(a), bits(b))


# ------------------------------------------------------------------------------------------------ emulations


@pytest.fixture(scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)            # the recorded numbers were made with one thread (the C loops split by it)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def nets():
    import flashschnet

    path = oracle_path("mlcg_schnet_A.pt")
    return {"fused": flashschnet.load_model(path, backend="torch", dtype=torch.float32).network,
            "plain": flashschnet.load_model(path, backend="reference", dtype=torch.float32).network}


@pytest.fixture(scope="module")
def pair(one_thread, nets):
    """Outputs of both emulations at every precision on two oracle frames, and the truth."""
    ds = ta.oracle_dataset(str(oracle_path("mlcg_schnet_A.pt")), frames=PAIR)
    pos, types = ds["positions"].float(), ds["bead_types"]
    out = {(impl, prec): tuple(t.double() for t in ta.energy_forces(impl, nets[impl], pos, types, prec))
           for impl in ta.IMPLEMENTATIONS for prec in ("ieee", "tf32", "bf16")}
    backend = tuple(t.double() for t in nets["fused"].energy_forces(pos, types))
    return out, backend, ds


def test_fused_ieee_is_the_torch_backend_bit_for_bit(pair):
    out, backend, _ = pair
    assert torch.equal(out["fused", "ieee"][0], backend[0]) and torch.equal(out["fused", "ieee"][1], backend[1])


def test_tf32_emulation_is_not_a_no_op_and_both_implementations_agree(pair):
    out, _, _ = pair
    for k in (0, 1):                               # energies, forces
        vs_ieee = ta.rel(out["fused", "tf32"][k], out["fused", "ieee"][k])
        between = ta.rel(out["fused", "tf32"][k], out["plain", "tf32"][k])
        ieee_between = ta.rel(out["fused", "ieee"][k], out["plain", "ieee"][k])
        assert vs_ieee > 2e-4, vs_ieee            # tf32 moves the outputs by ~1e-3
        assert between < 1e-4 and between < 0.05 * vs_ieee, (between, vs_ieee)
        assert ieee_between < 1e-5, ieee_between


def test_tf32_error_lies_between_ieee_and_bf16(pair):
    out, _, ds = pair
    for impl in ta.IMPLEMENTATIONS:
        err = {p: ta.errors(*out[impl, p], ds["e_true"], ds["f_true"]) for p in ("ieee", "tf32", "bf16")}
        for key in ("energy_rel_err_vs_float64", "forces_rel_err_vs_float64", "forces_rel_rmse_vs_float64"):
            assert err["ieee"][key] < err["tf32"][key] < err["bf16"][key], (impl, key, err)


# ------------------------------------------------------------------------------------------------ the JSON


def test_recorded_prediction_matches_a_recomputation(one_thread, nets):
    """docs/tf32-accuracy.json's prediction, recomputed on the whole oracle (fused path): ~1e-6 relative where it
    was made (same torch and CPU: the same bits); elsewhere float32 differences in the vectorised products and
    functions flip a few tf32 roundings, which moves these max-errors by ~1 %: 5 % there."""
    report = json.loads(JSON.read_text())
    pred = report["prediction"]
    assert pred["oracle"] == "tests/data/oracles/mlcg_schnet_A.pt" == ta.ORACLE
    assert "2 x the prediction + 1e-6" in pred["rule"] and pred["rule"].startswith("GPU tf32 passes if")
    same_env = report["settings"]["environment"] == ta.environment()
    tol = 1e-6 if same_env else 5e-2
    ds = ta.oracle_dataset(str(oracle_path("mlcg_schnet_A.pt")))
    pos, types = ds["positions"].float(), ds["bead_types"]
    for prec in ("ieee", "tf32", "tf32_rz", "bf16"):
        e, f = ta.fused_energy_forces(nets["fused"], pos, types, prec)
        got = {"energy_rel_err_vs_float64": ta.rel(e.double(), ds["e_true"]),
               "forces_rel_err_vs_float64": ta.rel(f.double(), ds["f_true"])}
        for key, v in got.items():
            assert v == pytest.approx(pred[prec][key], rel=tol, abs=0), (prec, key, same_env)
        if prec in report["prediction_outputs"] and same_env:
            rec = report["prediction_outputs"][prec]
            assert ta.rel(torch.tensor(rec["forces"], dtype=torch.float64), f.double()) < 1e-6
            assert ta.rel(torch.tensor(rec["energies"], dtype=torch.float64), e.double()) < 1e-6
    # the ordering the device check relies on
    assert pred["ieee"]["forces_rel_err_vs_float64"] < pred["tf32"]["forces_rel_err_vs_float64"] \
        < pred["tf32_rz"]["forces_rel_err_vs_float64"] < pred["bf16"]["forces_rel_err_vs_float64"]
