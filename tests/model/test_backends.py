"""Backend choice (``flashschnet.backends.resolve_backend``): the one place a backend is chosen."""
from __future__ import annotations

import pytest

from tests.conftest import oracle_path
from flashschnet import load_model
from flashschnet.backends import resolve_backend
from flashschnet.errors import InputError


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
