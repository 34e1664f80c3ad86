"""The fused CPU path (backend="torch", ``flashschnet.fused.torch_engine``): exact energies/forces without
autograd, a Verlet skin, chunked edges, determinism. The neighbour lists themselves: test_neighbors.py."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import EXAMPLES, assert_forces_match_finite_differences, oracle_path, rel_error
from flashschnet import load_model, map_pdb
from flashschnet.fused import clear_engine_cache
from flashschnet.fused.nodes import energy_forces_fused
from flashschnet.nn.layout import unpack
from flashschnet.fused.torch_engine import TorchPairEngine

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
PLACEHOLDER = str(EXAMPLES / "trpcage_placeholder.pt")


@pytest.mark.parametrize("dtype, tol_e, tol_f", [(torch.float64, 1e-10, 1e-10), (torch.float32, 1e-5, 1e-4)])
def test_torch_backend_matches_mlcg_oracle(fixture_a, dtype, tol_e, tol_f):
    clear_engine_cache()
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=dtype, backend="torch")
    e, f = m.energy_forces(fixture_a["positions_A"].to(dtype), fixture_a["bead_types"])
    assert e.dtype == dtype and f.shape == (7, 49, 3)
    assert rel_error(e, fixture_a["energies_kcal_mol"]) < tol_e
    assert rel_error(f, fixture_a["forces_kcal_mol_A"]) < tol_f


def test_torch_backend_through_torchscript(fixture_a):
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch").network
    s = torch.jit.script(m)
    e1, f1 = m.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    e2, f2 = s.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    assert torch.equal(e1, e2) and torch.equal(f1, f2)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("replicas", [1, 3])
def test_tiny_molecules_match_reference(n, replicas):
    ref = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference")
    fused = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch")
    torch.manual_seed(10 * n + replicas)
    pos = torch.randn(replicas, n, 3, dtype=torch.float64) * 3.0
    types = torch.tensor([21, 22, 6][:n])
    e1, f1 = ref.energy_forces(pos, types)
    e2, f2 = fused.energy_forces(pos, types)
    assert float((e1 - e2).abs().max()) < 1e-12 * max(1.0, float(e1.abs().max()))
    assert float((f1 - f2).abs().max()) < 1e-11 * max(1.0, float(f1.abs().max()))


def test_real_protein_several_replicas_match_reference():
    """BPTI (284 beads, 5-bead mapping) x 2 replicas, random fixture-A weights, float64."""
    mol = map_pdb(EXAMPLES / "4PTI_bpti.pdb")
    ref = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference")
    fused = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch")
    pos = torch.as_tensor(mol.positions)[None].repeat(2, 1, 1)
    pos[1] += 0.3 * torch.randn(pos[1].shape, dtype=pos.dtype, generator=torch.Generator().manual_seed(5))
    types = torch.as_tensor(mol.bead_types)
    e1, f1 = ref.energy_forces(pos, types)
    e2, f2 = fused.energy_forces(pos, types)
    assert rel_error(e2, e1) < 1e-12 and rel_error(f2, f1) < 1e-11


def test_forces_match_finite_differences(fixture_a):
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch")
    assert_forces_match_finite_differences(m, fixture_a["positions_A"][4:5].clone(), fixture_a["bead_types"],
                                           [(0, 0), (7, 1), (20, 2), (48, 0)])


def test_bitwise_deterministic(fixture_a):
    clear_engine_cache()
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="torch")
    pos = fixture_a["positions_A"].float()
    runs = [m.energy_forces(pos, fixture_a["bead_types"]) for _ in range(3)]
    clear_engine_cache()
    runs.append(m.energy_forces(pos, fixture_a["bead_types"]))
    for e, f in runs[1:]:
        assert torch.equal(e, runs[0][0]) and torch.equal(f, runs[0][1])


def test_verlet_skin_reuses_and_rebuilds(fixture_a):
    ref = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference")
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch")
    weights, basis, filters = unpack(model.network)
    eng = TorchPairEngine(basis, filters, skin=2.0, chunk=97)
    types = fixture_a["bead_types"]
    pos = fixture_a["positions_A"][:2].clone()
    g = torch.Generator().manual_seed(0)
    for step in range(6):   # small moves: the list built at step 0 stays valid and results stay exact
        e, f = energy_forces_fused(weights, pos, types, eng)
        e_ref, f_ref = ref.energy_forces(pos, types)
        assert rel_error(e, e_ref) < 1e-12 and rel_error(f, f_ref) < 1e-11
        pos = pos + 0.1 * torch.randn(pos.shape, generator=g, dtype=pos.dtype)
    assert eng.verlet.builds == 1
    pos[0, 3] += 1.5                      # one bead moves more than skin / 2: rebuild
    e, f = energy_forces_fused(weights, pos, types, eng)
    assert eng.verlet.builds == 2
    assert rel_error(f, ref.energy_forces(pos, types)[1]) < 1e-11


def test_chunk_size_does_not_change_results(fixture_a):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch")
    weights, basis, filters = unpack(model.network)
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    out = [energy_forces_fused(weights, pos, types, TorchPairEngine(basis, filters, chunk=c)) for c in (7, 128, 100000)]
    for e, f in out[1:]:
        assert float((e - out[0][0]).abs().max()) < 1e-12 and float((f - out[0][1]).abs().max()) < 1e-12


def test_forces_do_not_depend_on_the_verlet_list_history():
    """The fused CPU path gives bitwise the same forces for the same positions whatever positions its Verlet
    list was built at (the root cause of the non-bitwise resume of tests/integration/test_long_runs.py)."""
    model = load_model(PLACEHOLDER, backend="torch")
    weights, basis, filters = unpack(model.network)
    mol = map_pdb(PDB, mapping="5bead")
    types = torch.as_tensor(mol.bead_types)
    pos = torch.as_tensor(mol.positions, dtype=torch.float32)[None].repeat(2, 1, 1)
    g = torch.Generator().manual_seed(3)
    moved = pos + 0.6 * (torch.rand(pos.shape, generator=g) - 0.5)    # < skin/2 = 1 A: no rebuild
    fresh = TorchPairEngine(basis, filters, chunk=512)
    aged = TorchPairEngine(basis, filters, chunk=512)
    energy_forces_fused(weights, pos, types, aged)                     # list built at `pos`
    e1, f1 = energy_forces_fused(weights, moved, types, aged)
    e2, f2 = energy_forces_fused(weights, moved, types, fresh)         # list built at `moved`
    assert aged.verlet.builds == 1 and fresh.verlet.builds == 1
    assert aged.verlet.current.n_pairs != fresh.verlet.current.n_pairs  # different lists ...
    assert torch.equal(e1, e2) and torch.equal(f1, f2)                 # ... same numbers
