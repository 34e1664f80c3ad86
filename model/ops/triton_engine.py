"""The ``"triton"`` backend's edge engine: the fused Triton kernels of :mod:`flashschnet.ops.flash` behind
the engine interface of :mod:`flashschnet.nn.fused` (``prepare`` / ``aggregate`` / ``backward``).

The tile list (:func:`flashschnet.neighbors.tile_pairs`) is built with a Verlet skin and rebuilt only
when a bead moved more than half of it since the last build.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from ..neighbors import tile_pairs
from ..nn.fused import BasisSpec, FilterWeights
from .flash import basis_coeffs, cfconv_bwd_pos, cfconv_fwd, tile_args


class TritonTileEngine:
    """Edge engine on tiles of ``block`` consecutive beads (a power of two)."""

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, block: int = 16):
        self.basis, self.filters, self.skin, self.block = basis, filters, float(skin), int(block)
        self.offsets, self.coeffs = basis_coeffs(basis.kind, basis.centers, basis.widths)
        self.ref: Optional[torch.Tensor] = None
        self.tiles = None
        self.builds = 0

    def _needs_rebuild(self, positions: torch.Tensor) -> bool:
        if self.ref is None or self.ref.shape != positions.shape or self.ref.device != positions.device:
            return True
        return bool(((positions - self.ref) ** 2).sum(-1).amax() > (0.5 * self.skin) ** 2)

    def prepare(self, positions: torch.Tensor) -> None:
        self.R, self.N = positions.shape[0], positions.shape[1]
        self.pos = positions.contiguous()
        if self.tiles is None or self._needs_rebuild(positions):
            self.tiles = tile_pairs(positions, self.block, self.basis.rc_graph, self.skin)
            self.ref = positions.detach().clone()
            self.builds += 1
        self.targs = tile_args(self.tiles)

    def _args(self, t: int):
        f, b = self.filters[t], self.basis
        return (f.A1, f.a1, f.A2, self.offsets, self.coeffs, b.rc_graph, b.rc_rbf, b.rc_filt, b.kind, b.alpha,
                b.rbf_env, b.filt_env, b.lower)

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        m = cfconv_fwd(self.pos, h.reshape(self.R, self.N, -1), *self.targs, *self._args(t))
        return m.reshape(self.R * self.N, -1)

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor):
        args = self._args(t)
        gm3 = gm.reshape(self.R, self.N, -1)
        gh = cfconv_fwd(self.pos, gm3, *self.targs, *args)
        gpos = cfconv_bwd_pos(self.pos, h.reshape(self.R, self.N, -1), gm3, *self.targs, *args)
        return gh.reshape(self.R * self.N, -1), gpos.reshape(self.R * self.N, 3)
