"""The reference CGSchNet against mlcg's own numbers, finite differences, TorchScript, replicas and sizes;
model-file loading and its errors."""
from __future__ import annotations

import pickle

import pytest
import torch

from conftest import EXAMPLES, oracle_path, rel_error
from flashschnet import load_model
from flashschnet.checkpoint import read_model_file, save_checkpoint
from flashschnet.errors import InputError
from flashschnet.nn.schnet import CGSchNet
from flashschnet.backends import resolve_backend




@pytest.fixture(scope="module")
def model64():
    """The network with the reference (mlcg-style autograd) backend: the tests here check it against mlcg itself."""
    return load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference").network




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


# ------------------------------------------------------------------------------------------- model files


def test_checkpoint_round_trip(tmp_path, fixture_a, model64):
    path = tmp_path / "m.pt"
    save_checkpoint(path, model64, metadata={"description": "test"})
    raw = torch.load(path, weights_only=True)
    assert {"format_version", "config", "units", "state_dict"} <= set(raw)
    assert raw["units"] == {"length": "angstrom", "energy": "kcal/mol"}
    m2 = load_model(path, dtype=torch.float64, backend="reference")
    e1, f1 = model64.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    e2, f2 = m2.energy_forces(fixture_a["positions_A"], fixture_a["bead_types"])
    assert torch.equal(e1, e2) and torch.equal(f1, f2)
    assert m2.metadata["description"] == "test"


def test_bundled_placeholder_model_loads_with_priors():
    m = load_model(EXAMPLES / "trpcage_placeholder.pt")
    assert m.metadata["placeholder"] is True and "PLACEHOLDER" in m.metadata["description"]
    assert m.priors is not None and m.priors.n_beads == 97
    assert m.config["cg_mapping"] == "5bead"


def test_mlcg_export_config(model64):
    cfg = model64.config
    assert cfg["rbf"] == {"kind": "gaussian", "num_rbf": 50,
                          "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 15.0}}
    assert cfg["cutoff"]["kind"] == "cosine" and cfg["cg_mapping"] == "5bead"


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def _one_line_error(path, match):
    with pytest.raises(InputError) as info:
        load_model(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and match in msg
    return msg


def test_model_file_errors(tmp_path, fixture_a, capsys):
    _one_line_error(tmp_path / "missing.pt", "not found")
    (tmp_path / "junk.pt").write_bytes(b"\x00\x01garbage" * 10)
    _one_line_error(tmp_path / "junk.pt", "not a readable model file")
    (tmp_path / "empty.pt").write_bytes(b"")
    _one_line_error(tmp_path / "empty.pt", "not a readable model file")
    good = oracle_path("mlcg_schnet_A.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(good[: len(good) // 2])
    _one_line_error(tmp_path / "trunc.pt", "not a readable model file")
    torch.save({"evil": _Evil()}, tmp_path / "evil.pt")
    _one_line_error(tmp_path / "evil.pt", "arbitrary code")
    assert "this must never run" not in capsys.readouterr().out
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump([1, 2, 3], f)
    _one_line_error(tmp_path / "plain.pkl", "model")
    torch.save({"something": torch.zeros(3)}, tmp_path / "other.pt")
    _one_line_error(tmp_path / "other.pt", "not a flashschnet checkpoint or an mlcg export")


def test_model_weight_errors(tmp_path, fixture_a):
    bad = dict(fixture_a)
    sd = dict(bad["state_dict"])
    sd["interaction_blocks.0.lin.bias"] = torch.full_like(sd["interaction_blocks.0.lin.bias"], float("nan"))
    bad["state_dict"] = sd
    torch.save(bad, tmp_path / "nan.pt")
    _one_line_error(tmp_path / "nan.pt", "NaN")
    sd = dict(fixture_a["state_dict"])
    sd["embedding_layer.weight"] = sd["embedding_layer.weight"][:10]
    torch.save(dict(fixture_a, state_dict=sd), tmp_path / "shape.pt")
    _one_line_error(tmp_path / "shape.pt", "embedding_layer.weight")
    sd = dict(fixture_a["state_dict"])
    del sd["output_network.layers.4.weight"]
    torch.save(dict(fixture_a, state_dict=sd), tmp_path / "missing_key.pt")
    _one_line_error(tmp_path / "missing_key.pt", "missing")
    ckpt = read_model_file(oracle_path("mlcg_schnet_A.pt"))
    torch.save(dict(ckpt, format_version=99), tmp_path / "future.pt")
    _one_line_error(tmp_path / "future.pt", "format_version")


def test_bead_type_check(model64):
    model64.check_bead_types(torch.tensor([1, 24]))
    with pytest.raises(InputError, match="bead type 30"):
        model64.check_bead_types(torch.tensor([1, 30]))


def test_backend_is_chosen_in_one_place(monkeypatch):
    assert resolve_backend(None) == "torch"
    assert resolve_backend(None, "cpu") == "torch"
    assert resolve_backend(None, "cuda") == "triton"
    assert resolve_backend("reference") == "reference"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(InputError, match="needs a CUDA device"):
        resolve_backend("triton", "cpu")
    with pytest.raises(InputError, match="unknown backend"):
        resolve_backend("magic")
    with pytest.raises(InputError):
        load_model(oracle_path("mlcg_schnet_A.pt"), backend="magic")


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
