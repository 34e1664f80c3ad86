"""Neighbour lists (``flashschnet.neighbors``): the half pair list, overflow and regrowth, the tile lists (exact
and fixed-capacity), the Verlet skin's rebuild test with a NaN replica."""
from __future__ import annotations

import pytest
import torch

from flashschnet.neighbors import (NeighborListOverflow, VerletList, moved_past_half_skin, pair_list, tile_pairs,
                                  tile_pairs_fixed)


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


def test_tile_list_covers_every_pair():
    torch.manual_seed(3)
    steps = torch.randn(2, 37, 3, dtype=torch.float64)
    pos = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), dim=1)    # two random chains
    tl = tile_pairs(pos, block=8, cutoff=9.0)
    T = tl.n_tiles
    assert T == 5
    listed = {tuple(p) for p in tl.pairs.tolist()}
    for r in range(2):
        d = torch.cdist(pos[r], pos[r])
        for a in range(37):
            for b in range(a + 1, 37):
                if d[a, b] < 9.0:
                    assert (r, a // 8, b // 8) in listed
    assert len(listed) < 2 * T * (T + 1) // 2                          # something was culled
    # CSR by destination tile and the transposed order of the off-diagonal entries
    pairs = tl.pairs.long()
    for g in range(2 * T):
        rows = pairs[tl.row_ptr[g]:tl.row_ptr[g + 1]]
        assert bool((rows[:, 0] * T + rows[:, 1] == g).all())
        cols = pairs[tl.col_perm[tl.col_ptr[g]:tl.col_ptr[g + 1]].long()]
        assert bool((cols[:, 0] * T + cols[:, 2] == g).all()) and bool((cols[:, 1] < cols[:, 2]).all())


def test_fixed_capacity_tile_list_equals_the_exact_one():
    torch.manual_seed(4)
    steps = torch.randn(3, 45, 3, dtype=torch.float64)
    pos = torch.cumsum(3.8 * steps / steps.norm(dim=-1, keepdim=True), dim=1)
    exact = tile_pairs(pos, block=8, cutoff=10.0, skin=1.0)
    fixed, overflow = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0)
    assert not bool(overflow)
    T = exact.n_tiles
    assert fixed.pairs.shape[0] == 3 * T * (T + 1) // 2                # fixed shape: every tile pair fits
    Q = exact.n_entries
    assert torch.equal(fixed.pairs[:Q], exact.pairs) and torch.equal(fixed.row_ptr, exact.row_ptr)
    assert torch.equal(fixed.col_ptr, exact.col_ptr)
    Qc = exact.col_perm.shape[0]
    assert torch.equal(fixed.col_perm[:Qc], exact.col_perm)
    # a capacity that is too small is reported, and the CSR stays inside the buffer
    small, overflow = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0, capacity=Q - 3)
    assert bool(overflow) and int(small.row_ptr.max()) <= Q - 3
    _, ok = tile_pairs_fixed(pos, block=8, cutoff=10.0, skin=1.0, capacity=Q)
    assert not bool(ok)


def test_neighbour_list_is_rebuilt_while_a_replica_is_nan():
    """One replica gone NaN must not freeze every replica's Verlet list (NaN > x is False)."""
    ref = torch.zeros(2, 5, 3)
    nan = ref.clone()
    nan[1, 2, 0] = float("nan")
    assert moved_past_half_skin(ref, nan, 2.0) and moved_past_half_skin(nan, ref, 2.0)
    assert not moved_past_half_skin(ref, ref + 0.5, 2.0) and moved_past_half_skin(ref, ref + 1.5, 2.0)
