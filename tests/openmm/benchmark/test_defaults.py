"""flashschnet.openmm.benchmark.defaults (what the benchmark measures when not told otherwise): the packaged BPTI
structure, and the built-in CGSchNet with the oracle's hyper-parameters and seeded random weights -- the same
network in any dtype, the caller's random state left alone."""
from __future__ import annotations

import torch

from tests.conftest import EXAMPLES
from flashschnet.openmm.benchmark.defaults import (DEFAULT_CONFIG, DEFAULT_MODEL_LABEL, DEFAULT_PDB_NAME,
                                                   default_model, default_pdb)


def test_default_pdb_is_the_bundled_bpti():
    with default_pdb() as path:
        assert path.name == DEFAULT_PDB_NAME == "4PTI_bpti.pdb" and path.is_file()
        assert path.read_bytes() == (EXAMPLES / DEFAULT_PDB_NAME).read_bytes()


def test_default_model_is_seeded_in_any_dtype_and_leaves_the_callers_random_state():
    state = torch.get_rng_state()
    wide = default_model(backend="reference", dtype=torch.float64)
    assert torch.equal(torch.get_rng_state(), state)                  # forked: the caller's stream goes on as before
    single = default_model(backend="reference")
    assert not single.network.training and wide.priors is None
    assert wide.metadata["placeholder"] is True and wide.metadata["description"] == DEFAULT_MODEL_LABEL
    for key in ("hidden_channels", "num_filters", "num_interactions", "embedding_size"):
        assert wide.config[key] == DEFAULT_CONFIG[key], key
    params = dict(single.network.named_parameters())
    assert params
    for name, value in wide.network.named_parameters():
        assert value.dtype == torch.float64 and params[name].dtype == torch.float32, name
        assert torch.equal(value, params[name].double()), name           # the same seeded weights, widened exactly
    assert not torch.equal(params["embedding_layer.weight"], torch.zeros_like(params["embedding_layer.weight"]))
