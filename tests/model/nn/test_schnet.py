"""The reference CGSchNet (``flashschnet.nn``) against mlcg's own numbers, finite differences, TorchScript,
replicas and sizes; the bead-type check; the expnormal basis."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import oracle_path, rel_error
from flashschnet import load_model
from flashschnet.errors import InputError
from flashschnet.nn.schnet import CGSchNet


def test_energies_forces_match_mlcg_oracle_float64(fixture_a, model64):
    e, f = model64.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    assert e.shape == (7,) and f.shape == (7, 49, 3)
    assert rel_error(e, fixture_a["energies_kcal_mol"]) < 1e-10
    assert rel_error(f, fixture_a["forces_kcal_mol_A"]) < 1e-10


def test_per_bead_energies_match_mlcg(fixture_a, model64):
    pb = model64.per_bead_energy(fixture_a["positions_A"], fixture_a["bead_types"])
    assert rel_error(pb, fixture_a["per_bead_energy_kcal_mol"]) < 1e-10


def test_edges_match_mlcg_neighbour_list(fixture_a, model64):
    edges = fixture_a["neighbor_list"]["edge_index_per_frame"]
    for k in range(7):
        src, dst = model64.neighbor_list(fixture_a["positions_A"][k:k + 1])
        ours = set(zip(src.tolist(), dst.tolist()))
        theirs = set(zip(edges[k][0].tolist(), edges[k][1].tolist()))
        assert ours == theirs


def test_float32_close_to_oracle(fixture_a):
    m = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32, backend="reference")
    e, f = m.energy_forces(fixture_a["positions_A"].float(), fixture_a["bead_types"])
    assert e.dtype == torch.float32
    assert rel_error(e.double(), fixture_a["energies_kcal_mol"]) < 1e-5
    assert rel_error(f.double(), fixture_a["forces_kcal_mol_A"]) < 1e-4


def test_torchscript_equals_eager(fixture_a, model64):
    scripted = torch.jit.script(model64)
    e1, f1 = model64.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    e2, f2 = scripted.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    # TorchScript may pick other (equally exact) CPU kernels for the autograd graph: agree to rounding
    assert rel_error(e2, e1) < 1e-13 and rel_error(f2, f1) < 1e-13


def test_energy_forces_works_under_no_grad(fixture_a, model64):
    with torch.no_grad():
        e, f = model64.energy_forces(fixture_a["positions_A"][:1], fixture_a["bead_types"])
    assert rel_error(f, fixture_a["forces_kcal_mol_A"][:1]) < 1e-10


def test_forces_are_minus_gradient_finite_differences(fixture_a, model64):
    pos = fixture_a["positions_A"][3:4].clone()
    types = fixture_a["bead_types"]
    _, f = model64.energy_forces(pos, types)
    h = 1e-5
    g = torch.Generator().manual_seed(0)
    for _ in range(12):
        i, a = int(torch.randint(49, (1,), generator=g)), int(torch.randint(3, (1,), generator=g))
        p, m = pos.clone(), pos.clone()
        p[0, i, a] += h
        m[0, i, a] -= h
        fd = -(model64.energy(p, types) - model64.energy(m, types)) / (2 * h)
        assert abs(float(fd) - float(f[0, i, a])) < 1e-7 * max(1.0, abs(float(f[0, i, a])))


def test_replicas_are_independent(fixture_a, model64):
    pos, types = fixture_a["positions_A"], fixture_a["bead_types"]
    e_all, f_all = model64.energy_forces(pos, types)
    for k in range(7):
        e, f = model64.energy_forces(pos[k:k + 1], types)
        assert abs(float(e[0] - e_all[k])) < 1e-12 * max(1.0, abs(float(e[0])))
        assert float((f[0] - f_all[k]).abs().max()) < 1e-12
    # moving replica 0 far away changes nothing in replica 1 (no cross-replica edges)
    moved = pos[:2].clone()
    moved[0] += 3.0
    e2, f2 = model64.energy_forces(moved, types)
    assert abs(float(e2[1] - e_all[1])) < 1e-12 * abs(float(e_all[1]))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_molecules(model64, n):
    torch.manual_seed(n)
    pos = torch.randn(2, n, 3, dtype=torch.float64) * 2.0
    types = torch.tensor([21, 22, 23][:n])
    e, f = model64.energy_forces(pos, types)
    assert e.shape == (2,) and f.shape == (2, n, 3)
    assert torch.isfinite(e).all() and torch.isfinite(f).all()
    # translation invariance: forces sum to zero; the energy does not change
    assert float(f.sum(1).abs().max()) < 1e-10
    e_shift, _ = model64.energy_forces(pos + 1.7, types)
    assert float((e_shift - e).abs().max()) < 1e-10
    if n == 1:           # no edges: zero messages, so each block adds lin(tanh(lin2.bias)); no force
        assert float(f.abs().max()) == 0.0
        with torch.no_grad():
            x = model64.embedding_layer.weight[types]
            for block in model64.interaction_blocks:
                x = x + block.lin(torch.tanh(block.conv.lin2.bias))
            assert abs(float(model64.output_network(x).sum() - e[0])) < 1e-12


def test_pairs_beyond_cutoff_do_not_interact(model64):
    types = torch.tensor([21, 22])
    far = torch.tensor([[[0.0, 0.0, 0.0], [15.5, 0.0, 0.0]]], dtype=torch.float64)
    e, f = model64.energy_forces(far, types)
    assert float(f.abs().max()) == 0.0


def test_rotation_invariance(fixture_a, model64):
    pos, types = fixture_a["positions_A"][:1], fixture_a["bead_types"]
    q, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3)))
    e1, f1 = model64.energy_forces(pos, types)
    e2, f2 = model64.energy_forces(pos @ q.T, types)
    assert abs(float(e1 - e2)) < 1e-10
    assert float((f1 @ q.T - f2).abs().max()) < 1e-9


def test_bead_type_check(model64):
    model64.check_bead_types(torch.tensor([1, 24]))
    with pytest.raises(InputError, match="bead type 30"):
        model64.check_bead_types(torch.tensor([1, 30]))


def test_expnormal_basis_matches_formula():
    cfg = {"hidden_channels": 8, "num_filters": 8, "num_interactions": 1, "embedding_size": 5,
           "rbf": {"kind": "expnormal", "num_rbf": 6, "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 5.0}},
           "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 5.0}}
    m = CGSchNet(cfg).double()
    d = torch.tensor([0.5, 2.0, 4.9, 5.0], dtype=torch.float64)
    start = torch.exp(torch.tensor(-5.0, dtype=torch.float64))
    means = torch.linspace(float(start), 1.0, 6, dtype=torch.float64)
    betas = (2.0 / 6 * (1 - start)) ** -2
    env = 0.5 * (torch.cos(torch.pi * d / 5.0) + 1) * (d < 5.0)
    want = env[:, None] * torch.exp(-betas * (torch.exp(1.0 * (0.0 - d))[:, None] - means) ** 2)
    assert float((m.rbf_layer(d) - want).abs().max()) < 1e-14
