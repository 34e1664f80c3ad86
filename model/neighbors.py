"""Per-replica neighbour lists (never across replicas), with a Verlet skin.

:func:`pair_list` is a *half* list of bead pairs ``i < j`` within ``cutoff + skin`` inside each replica,
sorted by destination ``i`` (CSR row pointers by sorting, no atomic cursor), in a buffer of fixed capacity,
used by the memory-bounded path (``backend="torch"``). The triton backend keeps a block-sparse list instead:
flags over fixed tile-pair slots, rebuilt on the device (:func:`flashschnet.kernels.tiles._tile_flags_kernel`,
launched by :func:`flashschnet.fused.tile_flags.update_tiles`).

:class:`VerletList` keeps a list valid while no bead of a replica moved more than half the skin since the
last build, and regrows its capacity on overflow (never truncates).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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

    def get(self, positions: torch.Tensor, moved: Optional[bool] = None) -> PairList:
        """The list for ``positions``, rebuilt when stale; ``moved``: the caller's own displacement check (else
        :func:`moved_past_half_skin`)."""
        if moved is None:
            moved = self.current is None or moved_past_half_skin(self.ref, positions, self.skin)
        if moved or self.current is None:
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
