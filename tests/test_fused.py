"""The fused CPU path (backend="torch"): exact energies/forces without autograd, half pair list with a
Verlet skin, chunked edges, determinism, neighbour-list overflow."""
from __future__ import annotations

import pytest
import torch

from conftest import EXAMPLES, assert_forces_match_finite_differences, oracle_path, rel_error
from flashschnet import load_model, map_pdb
from flashschnet.neighbors import NeighborListOverflow, VerletList, pair_list, tile_pairs, tile_pairs_fixed
from flashschnet.fused import clear_engine_cache
from flashschnet.fused.driver import energy_forces_fused
from flashschnet.fused.layout import unpack
from flashschnet.fused.torch_engine import TorchPairEngine


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


def test_pair_list_is_a_sorted_half_list_within_replicas():
    torch.manual_seed(1)
    pos = torch.randn(3, 40, 3, dtype=torch.float64) * 6.0
    nl = pair_list(pos, 7.0, chunk=9)
    assert bool((nl.i < nl.j).all())
    assert bool(((nl.i // 40) == (nl.j // 40)).all())               # never across replicas
    key = nl.i * 120 + nl.j
    assert bool((key[1:] > key[:-1]).all())                          # sorted, no duplicates
    want = set()
    for r in range(3):
        d = torch.cdist(pos[r], pos[r])
        for a in range(40):
            for b in range(a + 1, 40):
                if d[a, b] < 7.0:
                    want.add((r * 40 + a, r * 40 + b))
    assert set(zip(nl.i.tolist(), nl.j.tolist())) == want
    # CSR rows
    for b in (0, 41, 119):
        rows = nl.i[nl.row_ptr[b]:nl.row_ptr[b + 1]]
        assert bool((rows == b).all()) and rows.numel() == int((nl.i == b).sum())


def test_neighbor_list_overflow_is_detected_and_regrown():
    torch.manual_seed(2)
    pos = torch.randn(1, 30, 3, dtype=torch.float64) * 3.0
    with pytest.raises(NeighborListOverflow):
        pair_list(pos, 10.0, capacity=5)
    v = VerletList(cutoff=8.0, skin=1.0, capacity=5)
    nl = v.get(pos)
    assert v.overflows >= 1 and v.capacity >= nl.n_pairs
    assert nl.n_pairs == pair_list(pos, 9.0).n_pairs                   # nothing truncated


def test_tile_list_covers_every_pair():
    torch.manual_seed(3)
    steps = torch.randn(2, 37, 3, dtype=torch.float64)
    pos = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), dim=1)    # two random chains
    tl = tile_pairs(pos, block=8, cutoff=9.0)
    T = tl.n_tiles
    assert T == 5
    listed = {tuple(p) for p in tl.pairs.tolist()}
    for r in range(2):
        d = torch.cdist(pos[r], pos[r])
        for a in range(37):
            for b in range(a + 1, 37):
                if d[a, b] < 9.0:
                    assert (r, a // 8, b // 8) in listed
    assert len(listed) < 2 * T * (T + 1) // 2                          # something was culled
    # CSR by destination tile and the transposed order of the off-diagonal entries
    pairs = tl.pairs.long()
    for g in range(2 * T):
        rows = pairs[tl.row_ptr[g]:tl.row_ptr[g + 1]]
        assert bool((rows[:, 0] * T + rows[:, 1] == g).all())
        cols = pairs[tl.col_perm[tl.col_ptr[g]:tl.col_ptr[g + 1]].long()]
        assert bool((cols[:, 0] * T + cols[:, 2] == g).all()) and bool((cols[:, 1] < cols[:, 2]).all())


def test_fixed_capacity_tile_list_equals_the_exact_one():
    torch.manual_seed(4)
    steps = torch.randn(3, 45, 3, dtype=torch.float64)
    pos = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), dim=1)
    exact = tile_pairs(pos, block=8, cutoff=10.0, skin=1.0)
    fixed, overflow = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0)
    assert not bool(overflow)
    T = exact.n_tiles
    assert fixed.pairs.shape[0] == 3 * T * (T + 1) // 2                # fixed shape: every tile pair fits
    Q = exact.n_entries
    assert torch.equal(fixed.pairs[:Q], exact.pairs) and torch.equal(fixed.row_ptr, exact.row_ptr)
    assert torch.equal(fixed.col_ptr, exact.col_ptr)
    Qc = exact.col_perm.shape[0]
    assert torch.equal(fixed.col_perm[:Qc], exact.col_perm)
    # a capacity that is too small is reported, and the CSR stays inside the buffer
    small, overflow = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0, capacity=Q - 3)
    assert bool(overflow) and int(small.row_ptr.max()) <= Q - 3
    _, ok = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0, capacity=Q)
    assert not bool(ok)
