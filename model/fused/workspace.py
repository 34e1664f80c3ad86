"""The triton engine's persistent buffers: one :class:`Workspace` per engine and positions shape.

Beads of a replica are cut into tiles of :data:`BLOCK` consecutive beads; the tile pairs ``(I, J)``, ``I <= J``,
have fixed slots (:func:`tile_counts`; the layout is described in :mod:`flashschnet.kernels.tiles`). A step
launches its kernels on these buffers and allocates nothing, so it can be captured in a CUDA graph.
"""
from __future__ import annotations

from typing import Tuple

import torch

#: beads per tile (destination tiles, and the granularity of the tile-pair flags)
BLOCK = 16


def tile_counts(N: int, block: int = BLOCK) -> Tuple[int, int, int]:
    """``(T, S, SO)``: tiles per replica, tile-pair slots (``I <= J``) and off-diagonal slots (``I < J``)."""
    T = (int(N) + block - 1) // block
    return T, T * (T + 1) // 2, T * (T - 1) // 2


def _empty(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An uninitialised output or partial buffer (every element read is written by a kernel first)."""
    return torch.empty(shape, dtype=dtype or like.dtype, device=like.device)


class Workspace:
    """Persistent buffers of one engine for positions ``[R, N, 3]`` and filter width ``F``.

    ``flags`` int8 [R*S] (tile-pair slots, all active until the first flag build:
    :func:`flashschnet.fused.tile_flags.update_tiles`), ``ref`` [R, N, 3] (positions at each replica's last flag
    build; NaN: never built), ``builds`` int32 [R] (flag builds per replica, counted on the device), row/column
    partial buffers of width F and 3, and the outputs ``m``, ``gh`` [R, N, F] and ``gpos`` [R, N, 3].
    """

    def __init__(self, R: int, N: int, F: int, dtype, device, block: int = BLOCK):
        self.R, self.N, self.F, self.block = int(R), int(N), int(F), int(block)
        T, S, SO = tile_counts(N, block)
        self.T, self.S, self.SO = T, S, SO
        like = torch.empty(0, dtype=dtype, device=device)
        self.flags = torch.ones(max(R * S, 1), dtype=torch.int8, device=device)
        self.ref = torch.full((R, N, 3), float("nan"), dtype=dtype, device=device)
        self.builds = torch.zeros(max(R, 1), dtype=torch.int32, device=device)
        self.rowbuf = _empty((max(R * T, 1), block, F), like)
        self.colbuf = _empty((max(R * SO, 1), block, F), like)
        self.prow = _empty((max(R * T, 1), block, 3), like)
        self.pcol = _empty((max(R * SO, 1), block, 3), like)
        self.m = _empty((R, N, F), like)
        self.gh = _empty((R, N, F), like)
        self.gpos = _empty((R, N, 3), like)

    def matches(self, pos: torch.Tensor, F: int) -> bool:
        return (tuple(pos.shape[:2]) == (self.R, self.N) and self.F == F and pos.dtype == self.ref.dtype
                and pos.device == self.ref.device)
