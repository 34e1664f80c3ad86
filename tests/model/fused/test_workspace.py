"""flashschnet.fused.workspace: tiles and tile-pair slots per replica (tile_counts), a Workspace's persistent
buffers (every flag active and every reference position NaN before the first build, no zero-size buffer) and
when it fits positions; the launchers' uninitialised buffers (``_empty``) are what the poison_buffers fixture
fills with NaN."""
from __future__ import annotations

import pytest
import torch

from flashschnet.fused import workspace
from flashschnet.fused.workspace import BLOCK, Workspace, tile_counts


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def test_tile_counts_and_the_buffers_of_a_workspace():
    assert BLOCK == 16
    assert tile_counts(0) == (0, 0)
    assert tile_counts(1) == (1, 1) and tile_counts(16) == (1, 1)
    assert tile_counts(17) == (2, 3)
    assert tile_counts(40) == (3, 6)                    # 3 tiles, the last partial: 6 slots
    assert tile_counts(40, block=8) == (5, 15)
    ws = Workspace(2, 40, 32, torch.float64, torch.device("cpu"), NP=2)
    assert (ws.R, ws.N, ws.FP, ws.NP, ws.block, ws.T, ws.S) == (2, 40, 32, 2, 16, 3, 6)
    assert ws.flags.dtype == torch.int8 and ws.flags.tolist() == [1] * 12       # all slots active until built
    assert ws.worklist.dtype == ws.counts.dtype == torch.int32 and ws.worklist.shape == (12,)
    assert ws.counts.tolist() == [0, 0]                                           # no item before the first build
    assert ws.ref.shape == (2, 40, 3) and bool(torch.isnan(ws.ref).all())      # never built
    assert ws.builds.dtype == torch.int32 and ws.builds.tolist() == [0, 0]
    assert ws.pos.shape == (2, 40, 3) and bool(torch.isnan(ws.pos).all())      # poisoned until a step writes it
    assert ws.C == 3 and ws.rowpart.shape == (12, 16, 32) and ws.prow.shape == (24, 16, 4)   # (NP) per slot
    assert ws.colpart.shape == (6, 16, 32) and ws.pcol.shape == (12, 16, 4)   # (NP) per off-diagonal slot
    m, gh, gpos = ws.unfused(6)
    assert m.shape == gh.shape == (2, 40, 6) and gpos.shape == (2, 40, 3) and ws.unfused(6)[0] is m
    assert m.dtype == ws.rowpart.dtype == torch.float64
    nodes = ws.nodes(64, 3, 4, 100)
    assert nodes["x"].shape == (2, 40, 64) and nodes["a"].shape == (3, 2, 40, 64) and nodes["h"].shape == (2, 2, 40, 32)
    assert nodes["gm"].shape == (2, 40, 32) and nodes["facc"].shape == (2, 40, 4) and nodes["epart"].shape == (6,)
    assert nodes["scratch"].shape == (400,) and ws.nodes(64, 3, 4, 100) is nodes
    pos = torch.zeros(2, 40, 3, dtype=torch.float64)
    assert ws.matches(pos, 32, 2)
    assert not ws.matches(pos, 64, 2) and not ws.matches(pos, 32, 1) and not ws.matches(pos.float(), 32, 2)
    assert not ws.matches(pos[:1], 32, 2) and not ws.matches(pos[:, :39], 32, 2)
    one = Workspace(1, 1, 32, torch.float32, torch.device("cpu"))     # one bead: one tile, one slot
    assert (one.T, one.S) == (1, 1)
    assert one.C == 0 and one.colpart.shape == (1, 16, 32) and one.pcol.shape == (1, 16, 4)   # never zero-size
    assert one.nodes(64, 1, 4, 100)["h"].shape == (1, 1, 1, 32)                  # one block: a placeholder row
    none = Workspace(0, 0, 32, torch.float32, torch.device("cpu"))
    assert none.flags.numel() == none.counts.numel() == 1 and none.rowpart.shape == (1, 16, 32)


def test_poison_fills_nan():
    """The poison_buffers fixture (autouse here) really fills the launchers' buffers with NaN."""
    out = workspace._empty((3, 2), torch.zeros(1, dtype=torch.float64))
    assert torch.isnan(out).all()


def test_shapes_whose_partial_rows_overflow_32_bits_are_refused_in_one_line():
    T, S = tile_counts(2000, BLOCK)                        # 125 tiles, 7,875 tile pairs per replica
    limit = 2 ** 31 // (S * 4 * BLOCK)                     # NP = 4 channel groups
    Workspace(limit, 2000, 32, torch.float32, "meta", NP=4)   # the largest that fits (meta: nothing allocated)
    with pytest.raises(ValueError, match=f"{limit} replicas at most for this system"):
        Workspace(limit + 1, 2000, 32, torch.float32, "meta", NP=4)
