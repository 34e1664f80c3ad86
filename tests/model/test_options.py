"""flashschnet.options: one ModelOptions, one validate() whose one-line messages name the field (or a front end's
spelling of it), and prepare_model, which equals the load -> compress -> quantize sequence it replaced, bit for bit."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import EXAMPLES, oracle_path
from flashschnet import InputError, LoadedModel, ModelOptions, load_model, prepare_model
from flashschnet.options import resolve_compression
from flashschnet.transforms import apply_compression, apply_variant

ORACLE = oracle_path("mlcg_schnet_A.pt")


@pytest.mark.parametrize("options, message", [
    (dict(backend="cuda"), "backend must be one of reference, torch, triton (or None: triton on CUDA, torch "
                           "otherwise), got 'cuda'"),
    (dict(precision="half"), "precision must be single or double, got 'half'"),
    (dict(quantize="int8"), "quantize must be one of none, fp16, bf16, fp16-cast, bf16-cast, got 'int8'"),
    (dict(compress="fp16"), "compress must be one of auto, none, float32, float16, bfloat16, got 'fp16'"),
    (dict(compress="float32", compress_knots=2), "compress_knots must be an integer >= 4, got 2"),
    (dict(compress="float32", compress_knots=64.0), "compress_knots must be an integer >= 4, got 64.0"),
    (dict(compress="none", compress_knots=64), "compress_knots needs a compression: pass compress float32, float16 or "
                                               "bfloat16"),
    (dict(backend="reference", compress_knots=64), "compress_knots needs a compression (compress auto runs the exact "
                                                   "filters here): pass compress float32, float16 or bfloat16"),
    (dict(matmul="int8"), "matmul must be one of auto, ieee, tf32, bf16, fp16, got 'int8'"),
    (dict(cuda_graph="yes"), "cuda_graph must be True or False, got 'yes'"),
    (dict(skin=-1.0), "skin must be a non-negative length (model unit) or None, got -1.0"),
    (dict(skin=float("nan")), "skin must be a non-negative length (model unit) or None, got nan"),
])
def test_each_bad_option_is_one_line_naming_the_field(options, message):
    with pytest.raises(InputError) as exc:
        ModelOptions(**options).validate()
    assert str(exc.value) == message


def test_a_front_end_names_the_fields_its_own_way():
    names = {"compress_knots": "--compress-knots", "compress": "--compress", "precision": "--precision"}
    with pytest.raises(InputError, match=r"^--compress-knots needs a compression: pass --compress float32"):
        ModelOptions(compress="none", compress_knots=64).validate(names=names)
    with pytest.raises(InputError, match=r"^--precision must be single or double"):
        ModelOptions(precision="half").validate(names=names)
    with pytest.raises(InputError, match=r"^matmul must be one of"):          # a field it does not list
        ModelOptions(matmul="x").validate(names=names)


def test_the_defaults_and_every_known_value_pass():
    ModelOptions().validate()
    ModelOptions(backend="reference", precision="double", quantize="bf16-cast", compress="bfloat16",
                 compress_knots=4, matmul="ieee", cuda_graph=True, skin=0).validate()
    assert ModelOptions(precision="double").dtype == torch.float64 and ModelOptions().dtype == torch.float32


def test_options_of_an_object_take_the_fields_it_has():
    class Settings:
        precision, quantize, steps = "double", "fp16", 10

    assert ModelOptions.of(Settings()) == ModelOptions(precision="double", quantize="fp16")


def _old_sequence(o: ModelOptions):
    """What plugin/simulate.py, mlpotential.py and the benchmark did before prepare_model (the tables "auto"
    resolves to made directly, not through the cache)."""
    model = load_model(ORACLE, backend=o.backend, dtype=o.dtype, device="cpu", matmul=o.matmul,
                       cuda_graph=o.cuda_graph)
    return apply_variant(apply_compression(model, resolve_compression(o), o.compress_knots), o.quantize)


def _assert_same(a: LoadedModel, b: LoadedModel, fixture_a) -> None:
    assert a.config == b.config and a.backend == b.backend
    assert (a.network.matmul, a.network.cuda_graph, a.network.skin) == (b.network.matmul, b.network.cuda_graph,
                                                                       b.network.skin)
    sa, sb = a.network.state_dict(), b.network.state_dict()
    assert sa.keys() == sb.keys() and all(sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]) for k in sa)
    dtype = next(a.network.parameters()).dtype
    pos, types = fixture_a["positions_A"][:1, :24].to(dtype), fixture_a["bead_types"][:24]     # a few beads: cheap
    (ea, fa), (eb, fb) = a.energy_forces(pos, types), b.energy_forces(pos, types)
    assert torch.equal(ea, eb) and torch.equal(fa, fb)


@pytest.mark.parametrize("options", [
    ModelOptions(),
    ModelOptions(backend="reference", precision="double"),
    ModelOptions(backend="torch", quantize="bf16-cast", matmul="ieee"),
    ModelOptions(backend="torch", compress="float16", compress_knots=64, quantize="fp16"),
], ids=["defaults", "reference-double", "torch-bf16cast", "torch-table-fp16"])
def test_prepare_model_equals_the_old_load_compress_quantize_sequence_bitwise(fixture_a, options):
    _assert_same(prepare_model(ORACLE, options), _old_sequence(options), fixture_a)


def test_prepare_model_of_a_model_in_memory_equals_the_file_and_leaves_it_alone(fixture_a):
    path = EXAMPLES / "trpcage_placeholder.pt"
    given = load_model(path, backend="reference", dtype=torch.float64)
    before = {k: v.clone() for k, v in given.network.state_dict().items()}
    options = ModelOptions(backend="torch", quantize="fp16")
    made = prepare_model(given, options)
    _assert_same(made, prepare_model(path, options), fixture_a)
    assert made.network is not given.network and given.backend == "reference"
    assert all(torch.equal(v, before[k]) for k, v in given.network.state_dict().items())
    assert next(given.network.parameters()).dtype == torch.float64
    assert made.priors is not None and made.priors is not given.priors and made.metadata == given.metadata
    assert made.source_path == str(path)


def test_prepare_model_validates_with_the_field_names():
    with pytest.raises(InputError, match="^quantize must be one of"):
        prepare_model(ORACLE, ModelOptions(quantize="int4"))


#: what "auto" becomes for each backend (None: the default backend) and precision
AUTO = {(None, "single"): "float32", ("torch", "single"): "float32", ("triton", "single"): "float32",
        ("reference", "single"): "none", (None, "double"): "none", ("torch", "double"): "none",
        ("triton", "double"): "none", ("reference", "double"): "none"}


@pytest.mark.parametrize("backend", [None, "torch", "triton", "reference"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("compress", ["auto", "none", "float32", "float16", "bfloat16"])
def test_resolve_compression_for_every_backend_precision_and_value(backend, precision, compress):
    got = resolve_compression(ModelOptions(backend=backend, precision=precision, compress=compress))
    assert got == (AUTO[(backend, precision)] if compress == "auto" else compress)


def test_auto_keeps_the_exact_filters_for_16_bit_weights_and_product_precisions():
    assert ModelOptions().compress == "auto" and resolve_compression(ModelOptions()) == "float32"
    for quantize in ("fp16", "bf16", "fp16-cast", "bf16-cast"):
        assert resolve_compression(ModelOptions(quantize=quantize)) == "none"
    for matmul in ("ieee", "tf32", "bf16", "fp16"):
        assert resolve_compression(ModelOptions(backend="triton", matmul=matmul)) == "none"
    assert resolve_compression(ModelOptions(quantize="fp16", compress="float32")) == "float32"     # as asked


def test_prepare_model_says_once_what_the_default_chose_and_how_to_opt_out(tmp_path, monkeypatch):
    from flashschnet.tablecache import CACHE_ENV
    from flashschnet.tiny import tiny_model

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))   # empty: other tests build this model's tables

    path = tiny_model(EXAMPLES / "1L2Y_trpcage.pdb", tmp_path / "tiny.pt")
    names = {"compress": "--compress"}
    made = prepare_model(path, names=names)
    assert made.config["compression"] == {"kind": "quintic", "knots": 256, "dtype": "float32"}
    assert len(made.notes) == 1 and "\n" not in made.notes[0]
    assert made.notes[0].startswith("network: float32 filter tables by default (quintic, 256 knots; built and cached")
    assert made.notes[0].endswith("; --compress none for the exact filter network")
    again = prepare_model(path, names=names)                          # the second time from the cache
    assert "from the cache in" in again.notes[0]
    for asked in (ModelOptions(compress="float32"), ModelOptions(compress="none"), ModelOptions(backend="reference"),
                  ModelOptions(precision="double")):
        assert prepare_model(path, asked).notes == []                 # nothing chosen for the user: no note
    assert prepare_model(path, ModelOptions(compress="none")).config.get("compression") is None
    assert prepare_model(path, ModelOptions(backend="reference")).config.get("compression") is None


def test_auto_falls_back_to_the_exact_filters_with_a_note_when_tables_miss_their_bound(tmp_path, monkeypatch):
    import flashschnet.transforms as transforms
    from flashschnet.tiny import tiny_model

    path = tiny_model(EXAMPLES / "1L2Y_trpcage.pdb", tmp_path / "tiny.pt", seed=3)
    monkeypatch.setitem(transforms.TOLERANCE, "float32", 1e-30)             # no table can meet this bound
    made = prepare_model(path)
    assert made.config.get("compression") is None and len(made.notes) == 1
    assert made.notes[0].startswith("network: the exact filter network (float32 filter tables by default, but a "
                                    "quintic float32 table with 256 knots misses the error bound")
    with pytest.raises(InputError, match="misses the error bound"):          # asked for: the error, as before
        prepare_model(path, ModelOptions(compress="float32"))
