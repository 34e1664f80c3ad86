"""The packed weight layout's named, versioned scalars (flashschnet.nn.layout): the ints and floats a
CGSchNet hands to the ``flashschnet::energy_forces`` op are named fields with the layout version first, and a
layout of another version (or one written before versions existed) is one clear error, not a misread model."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import oracle_path
from flashschnet import InputError, load_model
from flashschnet.nn.layout import (FLOAT_FIELDS, INT_FIELDS, LAYOUT_VERSION, FloatField, IntField, pack_scalars,
                                      read_floats, read_ints, unpack_params)
from flashschnet.names import MATMULS


@pytest.fixture(scope="module")
def network():
    return load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="torch", matmul="bf16",
                      skin=1.5).network


def test_fields_are_named_with_the_version_first(network):
    ints, floats = network.fused_ints, network.fused_floats
    assert INT_FIELDS[0] == "version" and ints[IntField.VERSION] == LAYOUT_VERSION
    assert len(ints) == len(INT_FIELDS) and len(floats) == len(FLOAT_FIELDS)
    iv, fv = read_ints(ints), read_floats(floats)
    assert iv["n_blocks"] == len(network.interaction_blocks) and iv["table_order"] == 0
    assert iv["matmul"] == list(MATMULS).index("bf16") and ints[IntField.MATMUL] == iv["matmul"]
    assert fv["skin"] == floats[FloatField.SKIN] == 1.5 and fv["rc_graph"] == network.graph_cutoff
    again = pack_scalars({k: v for k, v in iv.items() if k != "version"}, fv)
    assert again == (ints, floats)
    with pytest.raises(ValueError, match="layout fields"):
        pack_scalars({"n_blocks": 1}, fv)


def test_scripted_network_still_passes_plain_lists(network):
    scripted = torch.jit.script(network)
    assert list(scripted.fused_ints) == network.fused_ints and list(scripted.fused_floats) == network.fused_floats


@pytest.mark.parametrize("change", ["no version", "unknown version", "floats"])
def test_an_old_or_unknown_layout_version_is_one_clear_error(network, change):
    """A TorchScript model or serialized System saved before the layout had a version carries 9 ints starting with
    the block count (8 before compression); one of a later flashschnet another version: neither is read as the
    other, the op raises one line saying which layout it got and what to rebuild."""
    ints, floats = list(network.fused_ints), list(network.fused_floats)
    if change == "no version":
        ints = ints[1:]                       # the layout before LAYOUT_VERSION
    elif change == "unknown version":
        ints[IntField.VERSION] = LAYOUT_VERSION + 1
    else:
        floats = floats[:-1]
    pos = torch.zeros(1, 3, 3, dtype=torch.float64)
    with pytest.raises(InputError) as err:
        torch.ops.flashschnet.energy_forces(pos, torch.tensor([1, 2, 3]), network.fused_params(), ints, floats,
                                            "torch")
    msg = str(err.value)
    assert "\n" not in msg and f"layout version {LAYOUT_VERSION}" in msg and "rebuild" in msg, msg
    if change == "no version":
        assert "no version" in msg
    with pytest.raises(InputError):
        unpack_params(network.fused_params(), ints, floats)
