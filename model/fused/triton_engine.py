"""The ``"triton"`` backend's edge engine: the fused Triton kernels (:mod:`flashschnet.fused.triton_ops`) behind
the engine interface of :mod:`flashschnet.fused.torch_engine` (``prepare`` / ``aggregate`` / ``backward``).

Two ways to keep the tile list (:mod:`flashschnet.neighbors`) current:

* ``rebuild="skin"`` -- built with a Verlet skin and rebuilt only when a bead moved more than half of it
  since the last build (the check reads one number back to the host each step);
* ``rebuild="always"`` -- rebuilt on the device every step by :func:`~flashschnet.neighbors.tile_pairs_fixed`
  (an ``O(R T^2)`` sphere test and a sort: negligible next to the kernels) into buffers of fixed capacity,
  with no host synchronisation, so a step can be captured in a CUDA graph. Its overflow flag is checked by
  :meth:`TritonTileEngine.check_overflow` (with the default capacity it cannot overflow).

The default is ``"always"`` on CUDA and ``"skin"`` elsewhere.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from ..neighbors import NeighborListOverflow, moved_past_half_skin, tile_pairs, tile_pairs_fixed
from .layout import BasisSpec, FilterWeights
from .triton_ops import basis_coeffs, cfconv_bwd_pos, cfconv_fwd, tile_args


class TritonTileEngine:
    """Edge engine on tiles of ``block`` consecutive beads (a power of two)."""

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, block: int = 16,
                 rebuild: Optional[str] = None, capacity: Optional[int] = None):
        self.basis, self.filters, self.skin, self.block = basis, filters, float(skin), int(block)
        if rebuild not in (None, "skin", "always"):
            raise ValueError(f"rebuild must be 'skin' or 'always', got {rebuild!r}")
        self.rebuild, self.capacity = rebuild, capacity
        self.overflow: Optional[torch.Tensor] = None
        self.offsets, self.coeffs = basis_coeffs(basis.kind, basis.centers, basis.widths)
        self.ref: Optional[torch.Tensor] = None
        self.tiles = None
        self.builds = 0

    def prepare(self, positions: torch.Tensor) -> None:
        self.R, self.N = positions.shape[0], positions.shape[1]
        self.pos = positions.contiguous()
        mode = self.rebuild or ("always" if positions.is_cuda else "skin")
        if mode == "always":
            self.tiles, self.overflow = tile_pairs_fixed(positions, self.block, self.basis.rc_graph, 0.0, self.capacity)
            self.builds += 1
        elif self.tiles is None or moved_past_half_skin(self.ref, positions, self.skin):
            self.tiles = tile_pairs(positions, self.block, self.basis.rc_graph, self.skin)
            self.ref = positions.detach().clone()
            self.builds += 1
        self.targs = tile_args(self.tiles)

    def check_overflow(self) -> None:
        """Raise :class:`~flashschnet.neighbors.NeighborListOverflow` if the last fixed-capacity build
        overflowed (reads the device flag: call it outside captured regions, e.g. once per report)."""
        if self.overflow is not None and bool(self.overflow):
            raise NeighborListOverflow(f"tile list overflowed its capacity {self.capacity}; raise the capacity")

    def _args(self, t: int):
        """Filter and basis arguments of the launchers; a quantized model's filters go in as 16-bit values
        with their scales (the kernels dequantize in registers)."""
        f, b = self.filters[t], self.basis
        rest = (self.offsets, self.coeffs, b.rc_graph, b.rc_rbf, b.rc_filt, b.kind, b.alpha, b.rbf_env, b.filt_env,
                b.lower)
        if f.A1q is not None:
            return (f.A1q, f.a1, f.A2q) + rest + (f.A1s, f.A2s)
        return (f.A1, f.a1, f.A2) + rest

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        m = cfconv_fwd(self.pos, h.reshape(self.R, self.N, -1), *self.targs, *self._args(t))
        return m.reshape(self.R * self.N, -1)

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor):
        args = self._args(t)
        gm3 = gm.reshape(self.R, self.N, -1)
        gh = cfconv_fwd(self.pos, gm3, *self.targs, *args)
        gpos = cfconv_bwd_pos(self.pos, h.reshape(self.R, self.N, -1), gm3, *self.targs, *args)
        return gh.reshape(self.R * self.N, -1), gpos.reshape(self.R * self.N, 3)
