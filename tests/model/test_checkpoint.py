"""Model files (``flashschnet.checkpoint``): our checkpoint round trip, the bundled placeholder model, an mlcg
export's config, and the one-line errors of unreadable, unsafe or inconsistent files."""
from __future__ import annotations

import pickle

import torch

from tests.conftest import EXAMPLES, oracle_path
from flashschnet import load_model
from flashschnet.checkpoint import read_model_file, save_checkpoint
from tests.helpers.model_files import one_line_load_error


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


def test_model_file_errors(tmp_path, fixture_a, capsys):
    one_line_load_error(tmp_path / "missing.pt", "not found")
    (tmp_path / "junk.pt").write_bytes(b"\x00\x01garbage" * 10)
    one_line_load_error(tmp_path / "junk.pt", "not a readable model file (not a torch file: it begins with the "
                                              "bytes 00 01 67")
    (tmp_path / "text.pt").write_text("hello\n")     # torch says "KeyError: 101" (the opcode byte of 'e')
    one_line_load_error(tmp_path / "text.pt", "not a readable model file (a text file, not a torch file: it "
                                              "begins 'hello')")
    (tmp_path / "empty.pt").write_bytes(b"")
    one_line_load_error(tmp_path / "empty.pt", "not a readable model file (the file is empty)")
    good = oracle_path("mlcg_schnet_A.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(good[: len(good) // 2])
    one_line_load_error(tmp_path / "trunc.pt", "not a readable model file (a damaged or truncated torch file")
    torch.save({"evil": _Evil()}, tmp_path / "evil.pt")
    one_line_load_error(tmp_path / "evil.pt", "arbitrary code")
    assert "this must never run" not in capsys.readouterr().out
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump([1, 2, 3], f)
    one_line_load_error(tmp_path / "plain.pkl", "model")
    torch.save({"something": torch.zeros(3)}, tmp_path / "other.pt")
    one_line_load_error(tmp_path / "other.pt", "not a flashschnet checkpoint or an mlcg export")
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tmp_path / "scripted.pt")
    msg = one_line_load_error(tmp_path / "scripted.pt", "a TorchScript module (torch.jit.save), not a model file")
    assert "weights_only" not in msg, msg          # torch's own message advises weights_only=False: never quoted


def test_model_weight_errors(tmp_path, fixture_a):
    bad = dict(fixture_a)
    sd = dict(bad["state_dict"])
    sd["interaction_blocks.0.lin.bias"] = torch.full_like(sd["interaction_blocks.0.lin.bias"], float("nan"))
    bad["state_dict"] = sd
    torch.save(bad, tmp_path / "nan.pt")
    one_line_load_error(tmp_path / "nan.pt", "NaN")
    sd = dict(fixture_a["state_dict"])
    sd["embedding_layer.weight"] = sd["embedding_layer.weight"][:10]
    torch.save(dict(fixture_a, state_dict=sd), tmp_path / "shape.pt")
    one_line_load_error(tmp_path / "shape.pt", "embedding_layer.weight")
    sd = dict(fixture_a["state_dict"])
    del sd["output_network.layers.4.weight"]
    torch.save(dict(fixture_a, state_dict=sd), tmp_path / "missing_key.pt")
    one_line_load_error(tmp_path / "missing_key.pt", "missing")
    ckpt = read_model_file(oracle_path("mlcg_schnet_A.pt"))
    torch.save(dict(ckpt, format_version=99), tmp_path / "future.pt")
    one_line_load_error(tmp_path / "future.pt", "format_version")


def _compressed(model64, dtype):
    from flashschnet import compress

    return compress(model64, knots=64, dtype=dtype, tolerance=1.0)      # a small table: the format, not accuracy


def test_compressed_checkpoint_round_trip_is_bitwise(tmp_path, fixture_a, model64):
    """A compressed model (filter tables) saves as a normal checkpoint and loads back bit for bit: tables,
    scales, config; a 16-bit table keeps its dtype (also when loaded in float32)."""
    for dtype in ("float32", "bfloat16"):
        model = _compressed(model64, dtype)
        path = tmp_path / f"c_{dtype}.pt"
        save_checkpoint(path, model)
        raw = torch.load(path, weights_only=True)
        assert raw["config"]["compression"] == {"kind": "quintic", "knots": 64, "dtype": dtype}
        tables = {k: v for k, v in raw["state_dict"].items() if k.endswith(".table")}
        assert len(tables) == raw["config"]["num_interactions"]
        assert all(v.dtype == getattr(torch, dtype) and v.shape[0] == 64 for v in tables.values())
        assert all(raw["state_dict"][k[:-len("table")] + "scale"].dtype == torch.float32 for k in tables)
        back = load_model(path, dtype=torch.float64, backend="reference")
        assert back.config == model.config
        own = model.state_dict()
        assert set(back.network.state_dict()) == set(own)
        for k, v in back.network.state_dict().items():
            assert v.dtype == own[k].dtype and torch.equal(v, own[k]), k
        pos, types = fixture_a["positions_A"][:2], fixture_a["bead_types"]
        e1, f1 = model.energy_forces(pos, types)
        e2, f2 = back.energy_forces(pos, types)
        assert torch.equal(e1, e2) and torch.equal(f1, f2)
        single = load_model(path, backend="torch")       # float32 network: the table keeps its storage dtype
        assert all(single.network.state_dict()[k].dtype == v.dtype for k, v in tables.items())


def test_compressed_checkpoint_with_a_table_of_another_dtype_is_refused(tmp_path, model64):
    model = _compressed(model64, "float16")
    save_checkpoint(tmp_path / "c.pt", model)
    raw = torch.load(tmp_path / "c.pt", weights_only=True)
    key = next(k for k in raw["state_dict"] if k.endswith(".table"))
    sd = dict(raw["state_dict"], **{key: raw["state_dict"][key].float()})
    torch.save(dict(raw, state_dict=sd), tmp_path / "float_table.pt")
    msg = one_line_load_error(tmp_path / "float_table.pt", key)
    assert "stored as torch.float32" in msg and "torch.float16" in msg
    cfg = dict(raw["config"], compression=dict(raw["config"]["compression"], dtype="bfloat16"))
    torch.save(dict(raw, config=cfg), tmp_path / "config_says_bf16.pt")
    msg = one_line_load_error(tmp_path / "config_says_bf16.pt", key)
    assert "stored as torch.float16" in msg and "torch.bfloat16" in msg
