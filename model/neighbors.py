"""Per-replica neighbour lists (never across replicas), with a Verlet skin.

Two granularities, one per backend:

* :func:`pair_list` -- a *half* list of bead pairs ``i < j`` within ``cutoff + skin`` inside each replica,
  sorted by destination ``i`` (CSR row pointers by sorting, no atomic cursor), in a buffer of fixed
  capacity. Used by the memory-bounded CPU path (``backend="torch"``).
* :func:`tile_pairs` -- a *block-sparse* half list: beads are cut into tiles of ``block`` consecutive
  beads (consecutive along the chain, so spatially compact), and tile pairs ``(I, J)``, ``I <= J``, whose
  bounding spheres come within ``cutoff + skin`` are listed, sorted by destination tile (CSR) and, for the
  column side, by source tile (the transposed CSR). Used by the fused Triton kernels: each tile pair's
  filters are evaluated once and serve both directions; the row side is reduced in the program that owns
  the destination tile and the column side through per-tile-pair partials reduced in the transposed
  order, so no atomics are needed and results repeat bitwise.

:class:`VerletList` keeps a list valid while no bead of a replica moved more than half the skin since the
last build, and regrows its capacity on overflow (never truncates).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .errors import FlashSchNetError


class NeighborListOverflow(FlashSchNetError, RuntimeError):
    """A neighbour list needed more entries than its fixed capacity."""


# ------------------------------------------------------------------------------------------ pair lists


@dataclass
class PairList:
    """Half list of pairs in flattened ``[R*N]`` bead indices.

    Attributes
    ----------
    i, j : Tensor, int64, [P]
        Pair members, ``i < j`` and in the same replica; sorted by ``i`` then ``j``.
    row_ptr : Tensor, int64, [R*N + 1]
        CSR pointers: pairs with first member ``b`` are ``row_ptr[b] : row_ptr[b+1]``.
    cutoff : float
        The radius the list was built for (cutoff + skin).
    """

    i: torch.Tensor
    j: torch.Tensor
    row_ptr: torch.Tensor
    cutoff: float

    @property
    def n_pairs(self) -> int:
        return int(self.i.shape[0])


def pair_list(positions: torch.Tensor, cutoff: float, capacity: Optional[int] = None, chunk: int = 256) -> PairList:
    """All pairs ``i < j`` with ``d_ij < cutoff`` inside each replica.

    Parameters
    ----------
    positions : Tensor, [R, N, 3]
        Model length unit.
    cutoff : float
        List radius (the graph cutoff plus any skin).
    capacity : int, optional
        Maximum number of pairs; more raises :class:`NeighborListOverflow` (the caller regrows).
    chunk : int
        Rows of the distance matrix processed at once (bounds peak memory to ``R * chunk * N``).
    """
    R, N = positions.shape[0], positions.shape[1]
    p = positions.detach()
    rows_i, rows_j = [], []
    c2 = cutoff * cutoff
    for start in range(0, N, chunk):
        stop = min(N, start + chunk)
        diff = p[:, None, :, :] - p[:, start:stop, None, :]           # [R, c, N, 3]
        d2 = (diff * diff).sum(-1)
        jj = torch.arange(N, device=p.device)
        ii = torch.arange(start, stop, device=p.device)
        mask = (d2 < c2) & (jj[None, None, :] > ii[None, :, None])
        r, a, b = mask.nonzero(as_tuple=True)                          # sorted by (r, a, b)
        rows_i.append(r * N + start + a)
        rows_j.append(r * N + b)
    i = torch.cat(rows_i) if rows_i else torch.zeros(0, dtype=torch.long, device=p.device)
    j = torch.cat(rows_j) if rows_j else torch.zeros(0, dtype=torch.long, device=p.device)
    if R > 1 and len(rows_i) > 1:   # chunks are sorted within; restore the global (r, i, j) order
        order = torch.argsort(i * (R * N) + j)
        i, j = i[order], j[order]
    if capacity is not None and i.shape[0] > capacity:
        raise NeighborListOverflow(f"pair list needs {i.shape[0]} pairs, capacity is {capacity}")
    counts = torch.bincount(i, minlength=R * N)
    row_ptr = torch.zeros(R * N + 1, dtype=torch.long, device=p.device)
    row_ptr[1:] = torch.cumsum(counts, 0)
    return PairList(i=i, j=j, row_ptr=row_ptr, cutoff=float(cutoff))


# ------------------------------------------------------------------------------------------ tile lists


@dataclass
class TileList:
    """Block-sparse half list of tile pairs.

    Beads ``[R, N]`` are padded to ``[R, T*B]`` (``T = ceil(N / B)``); tile ``I`` of replica ``r`` holds beads
    ``I*B .. I*B+B-1`` (those ``>= N`` are padding).

    Attributes
    ----------
    pairs : Tensor, int32, [Q, 3]
        ``(r, I, J)`` with ``I <= J``, sorted by ``(r, I, J)``.
    row_ptr : Tensor, int32, [R*T + 1]
        Entries of destination tile ``g = r*T + I`` are ``pairs[row_ptr[g]:row_ptr[g+1]]``.
    col_perm : Tensor, int32, [Qc]
        Indices into ``pairs`` of the off-diagonal entries (``I < J``) sorted by ``(r, J, I)``.
    col_ptr : Tensor, int32, [R*T + 1]
        Off-diagonal entries whose *source* tile is ``g = r*T + J`` are ``col_perm[col_ptr[g]:col_ptr[g+1]]``.
    n_tiles, block, n_beads, replicas : int
    """

    pairs: torch.Tensor
    row_ptr: torch.Tensor
    col_perm: torch.Tensor
    col_ptr: torch.Tensor
    n_tiles: int
    block: int
    n_beads: int
    replicas: int

    @property
    def n_entries(self) -> int:
        return int(self.pairs.shape[0])


def _ptr(group: torch.Tensor, n: int) -> torch.Tensor:
    counts = torch.bincount(group.long(), minlength=n)
    ptr = torch.zeros(n + 1, dtype=torch.long, device=group.device)
    ptr[1:] = torch.cumsum(counts, 0)
    return ptr.to(torch.int32)


def _near_tiles(positions: torch.Tensor, B: int, radius: float) -> torch.Tensor:
    """``[R, T, T]`` bool: tiles whose bounding spheres (centre = mean of the tile's real beads) come within
    ``radius`` of each other."""
    R, N = positions.shape[0], positions.shape[1]
    T = (N + B - 1) // B
    p = positions.detach()
    pad = T * B - N
    valid = torch.ones(R, T * B, dtype=torch.bool, device=p.device)
    if pad:
        p = torch.cat([p, p[:, -1:, :].expand(R, pad, 3)], dim=1)        # padding sits on the last bead
        valid[:, N:] = False
    tiles = p.reshape(R, T, B, 3)
    vmask = valid.reshape(R, T, B, 1).to(p.dtype)
    center = (tiles * vmask).sum(2) / vmask.sum(2)                       # [R, T, 3]
    radius_t = (((tiles - center[:, :, None, :]) ** 2).sum(-1).sqrt() * vmask[..., 0]).amax(2)   # [R, T]
    dc = (center[:, :, None, :] - center[:, None, :, :]).norm(dim=-1)     # [R, T, T]
    return dc - radius_t[:, :, None] - radius_t[:, None, :] < radius


def tile_pairs(positions: torch.Tensor, block: int, cutoff: float, skin: float = 0.0) -> TileList:
    """Tile pairs ``(I, J)``, ``I <= J``, whose bounding spheres come within ``cutoff + skin``.

    Conservative: every bead pair with ``d < cutoff`` lies in a listed tile pair, and stays covered while
    no bead moves more than ``skin / 2``. The search is ``O(R * T^2)`` sphere tests on device.
    """
    R, N = positions.shape[0], positions.shape[1]
    B = int(block)
    T = (N + B - 1) // B
    p = positions
    near = _near_tiles(positions, B, cutoff + skin)
    upper = torch.ones(T, T, dtype=torch.bool, device=p.device).triu()
    r, I, J = (near & upper).nonzero(as_tuple=True)                      # sorted by (r, I, J)
    pairs = torch.stack([r, I, J], 1).to(torch.int32)
    row_ptr = _ptr(r * T + I, R * T)
    off = (I < J).nonzero(as_tuple=True)[0]
    key = (r[off] * T + J[off]) * T + I[off]
    col_perm = off[torch.argsort(key)].to(torch.int32)
    col_ptr = _ptr((r[off] * T + J[off]), R * T)
    return TileList(pairs=pairs, row_ptr=row_ptr, col_perm=col_perm, col_ptr=col_ptr, n_tiles=T, block=B,
                    n_beads=N, replicas=R)


def tile_pairs_fixed(positions: torch.Tensor, block: int, cutoff: float, skin: float = 0.0,
                     capacity: Optional[int] = None) -> Tuple[TileList, torch.Tensor]:
    """:func:`tile_pairs` with fixed-size outputs and no host synchronisation (CUDA-graph capturable).

    ``pairs`` has ``capacity`` rows (default: every tile pair, ``R*T*(T+1)/2``, so it cannot overflow);
    entries past the real count are padding that no CSR range reaches. Returns the list and a device
    ``bool`` tensor that is True when more tile pairs were near than ``capacity`` holds: the caller must
    check it (e.g. once per report interval) and rebuild with a larger capacity -- the CSR pointers are
    clamped to the capacity, so an overflowed list is incomplete, never out of bounds.
    """
    R, N = positions.shape[0], positions.shape[1]
    B = int(block)
    T = (N + B - 1) // B
    dev = positions.device
    near = _near_tiles(positions, B, cutoff + skin) & torch.ones(T, T, dtype=torch.bool, device=dev).triu()
    flat = near.reshape(-1)                                          # index = (r*T + I)*T + J
    cap = int(capacity) if capacity is not None else R * T * (T + 1) // 2
    big = R * T * T
    idx = torch.arange(big, device=dev)
    keys = torch.sort(torch.where(flat, idx, torch.full_like(idx, big))).values[:cap]
    valid = keys < big
    keys = torch.where(valid, keys, torch.zeros_like(keys))
    pairs = torch.stack([keys // (T * T), (keys // T) % T, keys % T], 1).to(torch.int32)
    total = flat.sum()
    overflow = total > cap
    counts = near.reshape(R * T, T).sum(1)
    row_ptr = torch.zeros(R * T + 1, dtype=torch.long, device=dev)
    row_ptr[1:] = torch.cumsum(counts, 0).clamp(max=cap)
    rank = torch.cumsum(flat.long(), 0) - 1                          # position in the row-sorted list
    r_, i_, j_ = idx // (T * T), (idx // T) % T, idx % T
    off = flat & (i_ < j_) & (rank < cap)
    ckeys = torch.where(off, (r_ * T + j_) * T + i_, torch.full_like(idx, big))
    corder = torch.sort(ckeys).indices
    ccap = min(cap, R * T * (T - 1) // 2) if T > 1 else 0
    col_perm = rank[corder[:max(ccap, 0)]].clamp(min=0).to(torch.int32)
    ccounts = torch.zeros(R * T, dtype=torch.long, device=dev).index_add_(
        0, (r_ * T + j_), off.long())
    col_ptr = torch.zeros(R * T + 1, dtype=torch.long, device=dev)
    col_ptr[1:] = torch.cumsum(ccounts, 0)
    tl_ = TileList(pairs=pairs, row_ptr=row_ptr.to(torch.int32), col_perm=col_perm, col_ptr=col_ptr.to(torch.int32),
                   n_tiles=T, block=B, n_beads=N, replicas=R)
    return tl_, overflow


# ------------------------------------------------------------------------------------------ Verlet skin


def moved_past_half_skin(ref: Optional[torch.Tensor], positions: torch.Tensor, skin: float) -> bool:
    """True when a list built at ``ref`` may be stale for ``positions``: no reference yet, another shape or
    device, or some bead moved more than ``skin / 2`` -- or is NaN now or was then (``NaN > x`` is False: one
    replica gone NaN would otherwise freeze every replica's list for good)."""
    if ref is None or ref.shape != positions.shape or ref.device != positions.device:
        return True
    return not bool(((positions.detach() - ref) ** 2).sum(-1).amax() <= (0.5 * skin) ** 2)


class VerletList:
    """A pair list rebuilt only when some bead of some replica moved more than ``skin / 2`` since the last
    build (or the number of replicas/beads changed). Capacity grows by ``growth`` on overflow.

    ``get(positions [R, N, 3]) -> PairList`` (pairs within ``cutoff + skin``; the caller still applies the
    exact cutoff per pair).
    """

    def __init__(self, cutoff: float, skin: float = 2.0, capacity: Optional[int] = None, growth: float = 1.5):
        self.cutoff, self.skin, self.growth = float(cutoff), float(skin), float(growth)
        self.capacity = capacity
        self.ref: Optional[torch.Tensor] = None
        self.current: Optional[PairList] = None
        self.builds = 0
        self.overflows = 0

    def get(self, positions: torch.Tensor) -> PairList:
        if self.current is None or moved_past_half_skin(self.ref, positions, self.skin):
            while True:
                try:
                    self.current = pair_list(positions, self.cutoff + self.skin, self.capacity)
                    break
                except NeighborListOverflow:
                    self.overflows += 1
                    self.capacity = int(self.capacity * self.growth) + 1
            if self.capacity is None:
                self.capacity = max(16, int(self.current.n_pairs * self.growth))
            self.ref = positions.detach().clone()
            self.builds += 1
        return self.current
