"""The triton engine's persistent buffers: one :class:`Workspace` per engine and positions shape.

Beads of a replica are cut into tiles of :data:`BLOCK` consecutive beads; the tile pairs ``(I, J)``, ``I <= J``,
have fixed slots (:func:`tile_counts`; the layout, the work list and the partials are described in
:mod:`flashschnet.kernels.tiles`). A step launches its kernels on these buffers and allocates nothing but its
outputs, so it can be captured in a CUDA graph.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

#: beads per tile (destination tiles, and the granularity of the tile-pair flags)
BLOCK = 16


def tile_counts(N: int, block: int = BLOCK) -> Tuple[int, int]:
    """``(T, S)``: tiles per replica and tile-pair slots (``I <= J``) per replica."""
    T = (int(N) + block - 1) // block
    return T, T * (T + 1) // 2


def _empty(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An uninitialised output or partial buffer (every element read is written by a kernel first)."""
    return torch.empty(shape, dtype=dtype or like.dtype, device=like.device)


class Workspace:
    """Persistent buffers of one engine for positions ``[R, N, 3]``, filter width padded to ``FP`` and ``NP``
    position partials per slot.

    Always: ``flags`` int8 [R*S] (all active until the first build), ``worklist`` int32 [R*S] and ``counts``
    int32 [R] (the work list: :func:`flashschnet.fused.tile_flags.update_tiles`), ``ref`` [R, N, 3] (positions at
    each replica's last build; NaN: never built), ``builds`` int32 [R], ``pos`` [R, N, 3] (this step's positions
    in the model's length unit), the row partials ``rowpart`` [R*S, B, FP] and ``prow`` [R*S*NP, B, 4] (one per
    slot) and the column partials ``colpart`` [R*C, B, FP] and ``pcol`` [R*C*NP, B, 4] (one per off-diagonal slot:
    ``C = S - T``). The unfused path's outputs (:meth:`unfused`) and the fused node layers' buffers
    (:meth:`nodes`) are made on first use. Every buffer has at least one row (none is zero-size).
    """

    def __init__(self, R: int, N: int, FP: int, dtype, device, block: int = BLOCK, NP: int = 1):
        self.R, self.N, self.FP, self.block, self.NP = int(R), int(N), int(FP), int(block), int(NP)
        T, S = tile_counts(N, block)
        if R * S * max(NP, 1) * block >= 2 ** 31:     # the kernels index partial rows in 32 bits (tiles._col_slot)
            raise ValueError(f"{R} replicas of {N} beads are {R * S} tile pairs, more than the GPU kernels index "
                             f"({2 ** 31 // (S * max(NP, 1) * block)} replicas at most for this system): run fewer "
                             "replicas per System")
        self.T, self.S, self.C = T, S, S - T
        like = torch.empty(0, dtype=dtype, device=device)
        self.like = like
        self.flags = torch.ones(max(R * S, 1), dtype=torch.int8, device=device)
        self.worklist = torch.zeros(max(R * S, 1), dtype=torch.int32, device=device)
        self.counts = torch.zeros(max(R, 1), dtype=torch.int32, device=device)
        self.ref = torch.full((R, N, 3), float("nan"), dtype=dtype, device=device)
        self.builds = torch.zeros(max(R, 1), dtype=torch.int32, device=device)
        self.pos = _empty((R, N, 3), like)
        self.rowpart = _empty((max(R * S, 1), block, FP), like)
        self.colpart = _empty((max(R * self.C, 1), block, FP), like)
        self.prow = _empty((max(R * S * NP, 1), block, 4), like)
        self.pcol = _empty((max(R * self.C * NP, 1), block, 4), like)
        self._unfused: Optional[tuple] = None
        self._nodes: Optional[dict] = None

    def matches(self, pos: torch.Tensor, FP: int, NP: int) -> bool:
        return (tuple(pos.shape[:2]) == (self.R, self.N) and self.FP == FP and self.NP == NP
                and pos.dtype == self.ref.dtype and pos.device == self.ref.device)

    def unfused(self, F: int) -> tuple:
        """``(m, gh [R, N, F], gpos [R, N, 3])``: the outputs of the unfused path's reductions."""
        if self._unfused is None or self._unfused[0].shape[-1] != F:
            R, N = self.R, self.N
            self._unfused = (_empty((R, N, F), self.like), _empty((R, N, F), self.like), _empty((R, N, 3), self.like))
        return self._unfused

    def nodes(self, HP: int, blocks: int, programs: int, scratch_values: int) -> dict:
        """The fused node layers' buffers: ``x`` [R, N, HP] (the running node features), ``a`` [blocks, R, N, HP]
        and ``h`` [blocks - 1, R, N, FP] (saved for the backward; ``h[t - 1]`` is block ``t``'s CFConv input, the
        first block's is per bead type), ``gx`` [R, N, HP], ``gm`` [R, N, FP], ``facc`` [R, N, 4] (the force so
        far), ``epart`` [R*T] (per-tile energies) and ``scratch`` (``scratch_values`` per node program,
        ``programs`` of them)."""
        key = (HP, blocks, programs, scratch_values)
        if self._nodes is None or self._nodes["key"] != key:
            R, N, FP, like = self.R, self.N, self.FP, self.like
            self._nodes = {"key": key, "x": _empty((R, N, HP), like), "a": _empty((max(blocks, 1), R, N, HP), like),
                           "h": _empty((max(blocks - 1, 1), R, N, FP), like), "gx": _empty((R, N, HP), like),
                           "gm": _empty((R, N, FP), like), "facc": _empty((R, N, 4), like),
                           "epart": _empty((max(R * self.T, 1),), like),
                           "scratch": _empty((max(programs * scratch_values, 1),), like)}
        return self._nodes
