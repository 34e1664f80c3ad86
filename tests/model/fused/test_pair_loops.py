"""flashschnet.fused.pair_loops: the step's pair order. The C counting sort (PairLoops.order_pairs) puts the pairs
in the order of the PyTorch sort by order_key, bit for bit, with each segment's first pair; segments cover every
bead once, at most 8 per replica. The loops over that order: tests/model/kernels/test_cpu_pairs.py."""
from __future__ import annotations

import pytest
import torch

from flashschnet.fused.pair_loops import DISTANCE_BUCKETS, PairLoops, order_key, segments
from flashschnet.kernels import cpu_pairs


@pytest.mark.parametrize("R, N", [(1, 1), (1, 3), (1, 97), (3, 70), (2, 300)])
def test_segments_cover_every_bead_once(R, N):
    seg = segments(R, N)
    assert 1 <= seg.NS <= 8 and seg.SB * seg.NS >= N and seg.SB * (seg.NS - 1) < N
    assert seg.partial_rows == R * sum(N - s * seg.SB for s in range(seg.NS))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_the_c_order_is_the_pytorch_sort_by_order_key(dtype):
    g = torch.Generator().manual_seed(3)
    R, N, P, rc = 2, 90, 900, 12.0
    r = torch.randint(0, R, (P,), generator=g)
    a, b = torch.randint(0, N, (P,), generator=g), torch.randint(0, N, (P,), generator=g)
    i, j = r * N + torch.minimum(a, b), r * N + torch.maximum(a, b)
    d = (torch.rand(P, generator=g, dtype=torch.float64) * rc).to(dtype)
    seg = segments(R, N)
    inv_w = torch.tensor(DISTANCE_BUCKETS / rc, dtype=dtype)
    oi, oj, od, seg = PairLoops(cpu_pairs.library(), dtype).order_pairs(i, j, d, seg, float(inv_w))
    key = order_key(i, d, seg, inv_w)
    perm = torch.sort(key, stable=True).indices
    assert torch.equal(oi, i[perm]) and torch.equal(oj, j[perm]) and torch.equal(od, d[perm])
    first_bead = (oi % N) // seg.SB + (oi // N) * seg.NS                # each pair's segment
    counts = torch.bincount(first_bead, minlength=R * seg.NS)
    assert torch.equal(seg.start, torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]))
