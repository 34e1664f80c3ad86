"""Neighbour lists (``flashschnet.neighbors``): the half pair list, overflow and regrowth, the Verlet skin's
rebuild test with a NaN replica. (The triton backend's tile-pair flags: tests/model/kernels/test_cfconv.py.)"""
from __future__ import annotations

import pytest
import torch

from flashschnet.neighbors import NeighborListOverflow, VerletList, moved_past_half_skin, pair_list


def test_pair_list_is_a_sorted_half_list_within_replicas():
    torch.manual_seed(1)
    pos = torch.randn(3, 40, 3, dtype=torch.float64) * 6.0
    nl = pair_list(pos, 7.0, chunk=9)
    assert bool((nl.i < nl.j).all())
    assert bool(((nl.i // 40) == (nl.j // 40)).all())               # never across replicas
    key = nl.i * 120 + nl.j
    assert bool((key[1:] > key[:-1]).all())                          # sorted, no duplicates
    want = set()
    for r in range(3):
        d = torch.cdist(pos[r], pos[r])
        for a in range(40):
            for b in range(a + 1, 40):
                if d[a, b] < 7.0:
                    want.add((r * 40 + a, r * 40 + b))
    assert set(zip(nl.i.tolist(), nl.j.tolist())) == want
    # CSR rows
    for b in (0, 41, 119):
        rows = nl.i[nl.row_ptr[b]:nl.row_ptr[b + 1]]
        assert bool((rows == b).all()) and rows.numel() == int((nl.i == b).sum())


def test_neighbor_list_overflow_is_detected_and_regrown():
    torch.manual_seed(2)
    pos = torch.randn(1, 30, 3, dtype=torch.float64) * 3.0
    with pytest.raises(NeighborListOverflow):
        pair_list(pos, 10.0, capacity=5)
    v = VerletList(cutoff=8.0, skin=1.0, capacity=5)
    nl = v.get(pos)
    assert v.overflows >= 1 and v.capacity >= nl.n_pairs
    assert nl.n_pairs == pair_list(pos, 9.0).n_pairs                   # nothing truncated


def test_neighbour_list_is_rebuilt_while_a_replica_is_nan():
    """One replica gone NaN must not freeze every replica's Verlet list (NaN > x is False)."""
    ref = torch.zeros(2, 5, 3)
    nan = ref.clone()
    nan[1, 2, 0] = float("nan")
    assert moved_past_half_skin(ref, nan, 2.0) and moved_past_half_skin(nan, ref, 2.0)
    assert not moved_past_half_skin(ref, ref + 0.5, 2.0) and moved_past_half_skin(ref, ref + 1.5, 2.0)
