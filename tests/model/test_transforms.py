"""flashschnet.transforms: compress (tabulated filters), with quantize composed on it (quantize and the named
variants: also tests/model/test_options.py and tests/model/nn/test_quant.py). The error bound at the default knots
(float32 tables, float64 compute, mlcg oracle frames), forces = minus the exact gradient of the tabulated energy
(finite differences), the torch engine and TorchScript equal the reference on the same tables, non-filter weights
untouched, pairs beyond the table, tiny molecules and replicas, 16-bit tables, composition with quantize, one-line
refusals."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import CPU_BACKENDS, assert_forces_match_finite_differences, rel_error, torchforce_energy_forces
from flashschnet import CGSchNet, InputError, compress, quantize
from flashschnet.fused import clear_engine_cache
from flashschnet.transforms import DEFAULT_KNOTS, TOLERANCE, apply_compression, describe_compression


def rel_rms(a, b) -> float:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


@pytest.fixture(scope="module")
def default32(model64):
    """The oracle model compressed with the defaults (float32 table), computed in float64."""
    return compress(model64)


def test_default_float32_tables_meet_the_force_bound_on_the_oracle_frames(fixture_a, model64, default32):
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    e0, f0 = model64.energy_forces(pos, types)
    e, f = default32.energy_forces(pos, types)
    assert default32.config["compression"] == {"kind": "quintic", "knots": DEFAULT_KNOTS, "dtype": "float32"}
    assert rel_rms(f, f0) <= 1e-5, rel_rms(f, f0)
    assert rel_error(e, e0) <= 1e-5


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_forces_are_the_gradient_of_the_tabulated_energy(fixture_a, model64, backend):
    # a coarse table (24 knots): far from the exact network, but its forces must still be its own gradient
    coarse = compress(model64, knots=24, tolerance=1.0)
    coarse.backend = backend
    pos = fixture_a["positions_A"][2:3].clone()
    assert_forces_match_finite_differences(coarse, pos, fixture_a["bead_types"],
                                           [(0, 0), (7, 1), (20, 2), (33, 0), (48, 1)], h=1e-5, tol=1e-7)


@pytest.mark.parametrize("kind", ["cubic", "quintic"])
def test_torch_engine_and_torchscript_equal_the_reference_on_the_same_tables(fixture_a, model64, kind):
    clear_engine_cache()
    ref = compress(model64, knots=48, kind=kind, tolerance=1.0)
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    e_ref, f_ref = ref.energy_forces(pos, types)
    fused = compress(model64, knots=48, kind=kind, tolerance=1.0)
    fused.backend = "torch"
    e, f = fused.energy_forces(pos, types)
    assert rel_error(e, e_ref) < 1e-12 and rel_error(f, f_ref) < 1e-10
    e_s, f_s = torch.jit.script(fused).energy_forces(pos, types)
    assert rel_error(e_s, e_ref) < 1e-12 and rel_error(f_s, f_ref) < 1e-10


def _as(model, dtype, backend):
    import copy

    m = copy.deepcopy(model).to(dtype)
    m.backend = backend
    return m


def test_float32_compute_is_as_close_to_float64_as_the_exact_network(fixture_a, model64, default32):
    # float32 rounding of the tabulated network is no worse than twice that of the exact network
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    _, f0 = model64.energy_forces(pos, types)
    _, f_exact32 = _as(model64, torch.float32, "torch").energy_forces(pos.float(), types)
    _, f_tab64 = default32.energy_forces(pos, types)
    _, f_tab32 = _as(default32, torch.float32, "torch").energy_forces(pos.float(), types)
    assert rel_rms(f_tab32.double(), f_tab64) <= 2 * rel_rms(f_exact32.double(), f0), \
        (rel_rms(f_tab32.double(), f_tab64), rel_rms(f_exact32.double(), f0))


def test_compression_changes_no_other_weight(model64, default32):
    before, after = model64.state_dict(), default32.state_dict()
    for k, v in after.items():
        if ".conv.filter_network." in k:
            assert k.endswith(".table") or k.endswith(".scale")
            continue
        assert torch.equal(v, before[k]) and v.dtype == before[k].dtype, k
    for k in before:
        assert k in after or ".conv.filter_network.layers." in k, k
    assert not any(".filter_network.layers." in k for k in after)      # the filter networks are gone


def test_a_table_ending_before_the_graph_cutoff_gives_zero_filters_beyond_it():
    # filter envelope (cosine) ends at 6 A, the graph at 9 A: pairs between are edges with W = 0 exactly
    cfg = {"hidden_channels": 16, "num_filters": 16, "num_interactions": 2, "embedding_size": 4,
           "rbf": {"kind": "gaussian", "num_rbf": 8, "cutoff": {"kind": "cosine", "cutoff_lower": 0.0,
                                                                 "cutoff_upper": 9.0}},
           "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 6.0}}
    torch.manual_seed(0)
    exact = CGSchNet(cfg, backend="reference").double()
    comp = compress(exact)
    assert comp.interaction_blocks[0].conv.filter_network.r_end == 6.0
    pos = torch.tensor([[[0.0, 0.0, 0.0], [7.5, 0.0, 0.0], [0.0, 8.0, 0.0], [3.0, 3.0, 0.5]]], dtype=torch.float64)
    types = torch.tensor([1, 2, 3, 1])
    for backend in CPU_BACKENDS:
        comp.backend = exact.backend = backend
        e0, f0 = exact.energy_forces(pos, types)
        e, f = comp.energy_forces(pos, types)
        assert rel_error(e, e0) < 1e-8 and rel_error(f, f0) < 1e-5
    d = torch.tensor([6.0, 7.0, 8.9], dtype=torch.float64)
    assert torch.equal(comp.interaction_blocks[0].conv.filter_network(d), torch.zeros(3, 16, dtype=torch.float64))


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_tiny_molecules_and_replicas(default32, model64, n, backend):
    g = torch.Generator().manual_seed(n)
    pos = torch.randn(3, n, 3, generator=g, dtype=torch.float64) * 2.0
    types = torch.arange(n) % 20 + 1
    default32.backend = model64.backend = backend
    try:
        e0, f0 = model64.energy_forces(pos, types)
        e, f = default32.energy_forces(pos, types)
        e1, f1 = default32.energy_forces(pos[1:2], types)
    finally:
        default32.backend = model64.backend = "reference"
    assert e.shape == (3,) and f.shape == (3, n, 3) and bool(torch.isfinite(f).all())
    assert rel_error(e, e0) < 1e-5 and (n == 1 or rel_error(f, f0) < 1e-4)
    assert torch.allclose(e1, e[1:2], rtol=1e-12, atol=0) and torch.allclose(f1, f[1:2], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_tables(fixture_a, model64, name):
    comp = compress(model64, dtype=name)
    fn = comp.interaction_blocks[0].conv.filter_network
    assert fn.table.dtype == {"float16": torch.float16, "bfloat16": torch.bfloat16}[name]
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    _, f0 = model64.energy_forces(pos, types)
    _, f = comp.energy_forces(pos, types)
    # the cost of 16-bit tables (docs/compression.md): ~3e-3 (float16), ~2e-2 (bfloat16) relative RMS
    assert rel_rms(f, f0) < {"float16": 1e-2, "bfloat16": 5e-2}[name]


def test_composes_with_quantize(fixture_a, model64):
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    a = quantize(compress(model64), "float16")           # tables of the exact filters, quantized output network
    b = compress(quantize(model64, "float16"))           # tables of the quantized filters
    assert a.config["quantization"]["dtype"] == "float16" and a.config["compression"]["dtype"] == "float32"
    assert b.config["quantization"]["dtype"] == "float16" and b.config["compression"]["dtype"] == "float32"
    q = quantize(model64, "float16")
    _, fq = q.energy_forces(pos, types)
    _, fb = b.energy_forces(pos, types)
    assert rel_rms(fb, fq) < 1e-5
    assert describe_compression(a.config) == f"quintic float32 table, {DEFAULT_KNOTS} knots"
    assert apply_compression(model64, "none") is model64


def test_compressed_model_runs_as_an_openmm_torchforce(fixture_a, default32):
    pos, types = fixture_a["positions_A"][:2], fixture_a["bead_types"]
    e0, f0 = default32.energy_forces(pos, types)
    energy, forces = torchforce_energy_forces(_as(default32, torch.float32, "torch"), pos.float(), types)
    assert abs(energy - float(e0.sum())) < 1e-5 * abs(float(e0.sum()))
    assert rel_error(torch.as_tensor(forces), f0.reshape(-1, 3)) < 1e-4


def test_refusals(model64, default32):
    with pytest.raises(InputError, match="already compressed"):
        compress(default32)
    for bad in (3, 0, True, 2.5, "256", 10 ** 6):
        with pytest.raises(InputError, match="knots must be an integer"):
            compress(model64, knots=bad)
    with pytest.raises(InputError, match="kind must be one of"):
        compress(model64, kind="linear")
    with pytest.raises(InputError, match="table dtype must be one of"):
        compress(model64, dtype="int8")
    with pytest.raises(TypeError, match="CGSchNet"):
        compress(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match="unknown compression"):
        apply_compression(model64, "float8")
    # too few knots for the bound: one line naming the block, the errors, the bound and what to do
    with pytest.raises(InputError) as err:
        compress(model64, knots=16)
    msg = str(err.value)
    assert "\n" not in msg and "block 0" in msg and f"{TOLERANCE['float32']:.0e}" in msg and "more knots" in msg


def test_a_converted_real_mlcg_model_compresses_saves_and_loads(tmp_path):
    from tests.conftest import SHARED
    from flashschnet import load_model, save_checkpoint
    from flashschnet.scripts.convert import main
    from tests.helpers.real_oracles import REAL, load_oracle

    real = SHARED / "oracles" / "mlcg" / "real" / "real_cln_ca_model.pt"
    if not real.exists():
        pytest.skip(f"{real} not found (../shared/ is absent); the real mlcg file is not bundled")
    o = load_oracle(REAL / "real_cln_ca.pt")
    converted = tmp_path / "cln_ca.pt"
    assert main([str(real), str(converted)]) == 0
    exact = load_model(converted, dtype=torch.float64, backend="torch")
    comp = compress(exact)
    save_checkpoint(tmp_path / "cln_ca_tab.pt", comp)
    back = load_model(tmp_path / "cln_ca_tab.pt", dtype=torch.float64, backend="torch")
    assert back.network.config["compression"] == comp.network.config["compression"]
    assert back.priors.fingerprint == exact.priors.fingerprint           # the priors travel with it
    pos, types = o["positions_A"], o["bead_types"]
    e0, f0 = exact.energy_forces(pos, types)
    e1, f1 = comp.energy_forces(pos, types)
    e2, f2 = back.energy_forces(pos, types)
    assert torch.equal(e1, e2) and torch.equal(f1, f2)
    assert rel_rms(f1, f0) <= 1e-5 and rel_error(e1, e0) <= 1e-5
