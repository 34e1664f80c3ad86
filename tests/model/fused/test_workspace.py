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
    assert tile_counts(0) == (0, 0, 0)
    assert tile_counts(1) == (1, 1, 0) and tile_counts(16) == (1, 1, 0)
    assert tile_counts(17) == (2, 3, 1)
    assert tile_counts(40) == (3, 6, 3)                    # 3 tiles, the last partial: 6 slots, 3 off-diagonal
    assert tile_counts(40, block=8) == (5, 15, 10)
    ws = Workspace(2, 40, 6, torch.float64, torch.device("cpu"))
    assert (ws.R, ws.N, ws.F, ws.block, ws.T, ws.S, ws.SO) == (2, 40, 6, 16, 3, 6, 3)
    assert ws.flags.dtype == torch.int8 and ws.flags.tolist() == [1] * 12       # all slots active until built
    assert ws.ref.shape == (2, 40, 3) and bool(torch.isnan(ws.ref).all())      # never built
    assert ws.builds.dtype == torch.int32 and ws.builds.tolist() == [0, 0]
    assert ws.rowbuf.shape == (6, 16, 6) and ws.colbuf.shape == (6, 16, 6)      # R*T rows, R*SO columns
    assert ws.prow.shape == (6, 16, 3) and ws.pcol.shape == (6, 16, 3)
    assert ws.m.shape == ws.gh.shape == (2, 40, 6) and ws.gpos.shape == (2, 40, 3)
    assert ws.m.dtype == ws.rowbuf.dtype == torch.float64
    pos = torch.zeros(2, 40, 3, dtype=torch.float64)
    assert ws.matches(pos, 6)
    assert not ws.matches(pos, 5) and not ws.matches(pos.float(), 6) and not ws.matches(pos[:1], 6)
    assert not ws.matches(pos[:, :39], 6)
    one = Workspace(1, 1, 4, torch.float32, torch.device("cpu"))     # one bead: one tile, no off-diagonal slot
    assert (one.T, one.S, one.SO) == (1, 1, 0)
    assert one.colbuf.shape == (1, 16, 4) and one.pcol.shape == (1, 16, 3)     # never zero-size


def test_poison_fills_nan():
    """The poison_buffers fixture (autouse here) really fills the launchers' buffers with NaN."""
    out = workspace._empty((3, 2), torch.zeros(1, dtype=torch.float64))
    assert torch.isnan(out).all()
