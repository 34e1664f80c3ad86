"""Bad model files, fuzzed: truncated at any length, random bytes, a pickle that would run code, NaN weights,
too few bead types. Each is an InputError with one line naming the file; nothing in the file runs."""
from __future__ import annotations

import pickle

import pytest
import torch
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from tests.conftest import EXAMPLES
from flashschnet.checkpoint import load_model, read_model_file
from flashschnet.errors import InputError
from tests.helpers.fuzz import fuzz_settings
from tests.helpers.model_files import RunsCode, one_line_load_error

MODEL = EXAMPLES / "trpcage_trained.pt"
DATA = MODEL.read_bytes()
SETTINGS = fuzz_settings(25, HealthCheck.function_scoped_fixture)


@SETTINGS
@given(cut=st.integers(0, len(DATA) - 1))
def test_truncated_checkpoint(tmp_path, cut):
    p = tmp_path / "cut.pt"
    p.write_bytes(DATA[:cut])
    one_line_load_error(p)


@SETTINGS
@given(junk=st.binary(max_size=2000))
def test_random_bytes(tmp_path, junk):
    p = tmp_path / "junk.pt"
    p.write_bytes(junk)
    one_line_load_error(p)


def test_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    p = tmp_path / "evil.pt"
    torch.save({"format_version": 1, "config": RunsCode(marker)}, p, pickle_protocol=2)
    assert "needs arbitrary code" in one_line_load_error(p)
    p2 = tmp_path / "evil2.pt"
    with open(p2, "wb") as f:
        pickle.dump(RunsCode(marker), f, protocol=2)
    one_line_load_error(p2)
    assert not marker.exists()


def test_nan_weights_and_too_few_bead_types(tmp_path):
    ckpt = read_model_file(MODEL)
    key = next(k for k, v in ckpt["state_dict"].items() if v.is_floating_point() and v.dim() == 2)
    bad = dict(ckpt, state_dict=dict(ckpt["state_dict"]))
    bad["state_dict"][key] = bad["state_dict"][key].clone().fill_(float("nan"))
    p = tmp_path / "nan.pt"
    torch.save(bad, p)
    assert "NaN" in one_line_load_error(p)
    small = dict(ckpt, config=dict(ckpt["config"], embedding_size=5), state_dict=dict(ckpt["state_dict"]))
    small["state_dict"]["embedding_layer.weight"] = small["state_dict"]["embedding_layer.weight"][:5].clone()
    p = tmp_path / "small.pt"
    torch.save(small, p)
    model = load_model(p)                                   # a valid model, for 5 bead types only
    with pytest.raises(InputError, match="bead type"):
        model.check_bead_types(torch.tensor([1, 21, 22, 23, 24]), "trp-cage")
