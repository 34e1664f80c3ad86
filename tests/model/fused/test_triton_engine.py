"""The whole model on the fused Triton kernels (backend="triton"; on CPU under TRITON_INTERPRET=1, set by
conftest.py): energies and exact forces vs mlcg's oracle, the reference backend and finite differences;
TorchScript and an OpenMM TorchForce calling the custom op; determinism."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import assert_forces_match_finite_differences, oracle_path, rel_error, torchforce_energy_forces
from flashschnet import load_model
from flashschnet.fused.driver import energy_forces_fused
from flashschnet.fused.layout import unpack
from flashschnet.fused.triton_engine import TritonTileEngine

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.mark.parametrize("dtype, tol_e, tol_f", [(torch.float64, 1e-10, 1e-10), (torch.float32, 1e-5, 1e-4)])
def test_triton_backend_matches_mlcg_oracle(fixture_a, dtype, tol_e, tol_f):
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=dtype, backend="triton")
    pos = fixture_a["positions_A"][[0, 2, 5]].to(dtype)                  # 3 replicas
    e, f = m.energy_forces(pos, fixture_a["bead_types"])
    assert rel_error(e, fixture_a["energies_kcal_mol"][[0, 2, 5]]) < tol_e
    assert rel_error(f, fixture_a["forces_kcal_mol_A"][[0, 2, 5]]) < tol_f


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_molecules_match_reference(n):
    ref = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference")
    tri = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    pos = torch.randn(2, n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(n)) * 3.0
    types = torch.tensor([21, 22, 6][:n])
    e1, f1 = ref.energy_forces(pos, types)
    e2, f2 = tri.energy_forces(pos, types)
    assert float((e1 - e2).abs().max()) < 1e-12 * max(1.0, float(e1.abs().max()))
    assert float((f1 - f2).abs().max()) < 1e-11 * max(1.0, float(f1.abs().max()))


def test_forces_match_finite_differences(fixture_a):
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    assert_forces_match_finite_differences(m, fixture_a["positions_A"][6:7].clone(), fixture_a["bead_types"],
                                           [(2, 0), (31, 2)])


def test_deterministic_and_skin_reuse(fixture_a):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="triton")
    weights, basis, filters = unpack(model.network)
    eng = TritonTileEngine(basis, filters, skin=2.0, block=8)
    pos = fixture_a["positions_A"][:2].float()
    types = fixture_a["bead_types"]
    e1, f1 = energy_forces_fused(weights, pos, types, eng)
    e2, f2 = energy_forces_fused(weights, pos + 0.05, types, eng)       # within the skin: no rebuild
    e3, f3 = energy_forces_fused(weights, pos, types, eng)
    assert eng.builds == 1
    assert torch.equal(e1, e3) and torch.equal(f1, f3)                  # bitwise repeatable


def test_torchscript_and_torchforce_call_the_custom_op(fixture_a):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    types = fixture_a["bead_types"]
    pos = fixture_a["positions_A"][:2]
    scripted = torch.jit.script(model.network)
    e, f = scripted.energy_forces(pos, types)
    assert rel_error(f, fixture_a["forces_kcal_mol_A"][:2]) < 1e-10
    energy, forces = torchforce_energy_forces(model, pos, types)
    assert abs(energy - float(fixture_a["energies_kcal_mol"][:2].sum())) < 1e-9
    assert np.abs(forces - fixture_a["forces_kcal_mol_A"][:2].reshape(-1, 3).numpy()).max() < 1e-9


def test_device_side_rebuild_mode_gives_the_same_numbers(fixture_a):
    """rebuild="always" (fixed-capacity list rebuilt every call, no host sync: CUDA-graph friendly)."""
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="triton")
    weights, basis, filters = unpack(model.network)
    pos = fixture_a["positions_A"][:2]
    types = fixture_a["bead_types"]
    e1, f1 = energy_forces_fused(weights, pos, types, TritonTileEngine(basis, filters, block=8, rebuild="skin"))
    eng = TritonTileEngine(basis, filters, block=8, rebuild="always")
    e2, f2 = energy_forces_fused(weights, pos, types, eng)
    eng.check_overflow()
    assert torch.equal(e1, e2) and torch.equal(f1, f2)
    small = TritonTileEngine(basis, filters, block=8, rebuild="always", capacity=3)
    energy_forces_fused(weights, pos, types, small)
    with pytest.raises(Exception, match="overflowed"):
        small.check_overflow()
