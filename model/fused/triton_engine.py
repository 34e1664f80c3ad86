"""The ``"triton"`` edge engine: the fused Triton kernels (:mod:`flashschnet.kernels`) behind the
:class:`~flashschnet.fused.engine.EdgeEngine` interface (``prepare`` / ``aggregate`` / ``backward``).

Everything that does not change from step to step is built once, when the engine first meets positions of a
dtype and device: the plans (:mod:`flashschnet.fused.plans`: padded, transposed filter weights in the operand
type of the matrix-product precision, the basis and scalar tensors) and a
:class:`~flashschnet.fused.workspace.Workspace` of persistent buffers. A step then launches
(:mod:`flashschnet.fused.launches`), per call: the tile flags (:func:`~flashschnet.fused.tile_flags.update_tiles`:
each replica's tile-pair flags rebuilt on the device only when one of its beads moved more than half the Verlet
skin), and per interaction block a forward kernel + reduction and a backward kernel (feature and position
gradients together, each filter evaluated once) + two reductions. Nothing is allocated by the engine and nothing
is read back to the host, so the step can be captured in a CUDA graph (:mod:`flashschnet.fused.graph`).

A block's filter is a strategy, as in :mod:`flashschnet.fused.torch_engine`: :class:`ExactTileFilter` (the
filter network on the exact kernels, matrix products at the chosen precision) or, for a compressed model's
:class:`~flashschnet.nn.layout.TableWeights`, :class:`TableTileFilter` (the tabulated-filter kernels: no basis,
no filter network, no matrix products -- the matmul precision does not apply -- and tile flags for the pair
cutoff ``min(rc_graph, r_end)``).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from .launches import bwd_launch, fwd_launch, reduce_launch, run, table_bwd_launch, table_fwd_launch
from ..nn.layout import BasisSpec, FilterWeights, TableWeights, is_table
from .plans import (BasisPlan, FilterPlan, TablePlan, basis_coeffs, plan_basis, plan_filter, plan_table,
                    resolve_dot)
from .tile_flags import update_tiles
from .workspace import BLOCK, Workspace


class ExactTileFilter:
    """One block's exact filter network on the CFConv kernels (:mod:`flashschnet.kernels.cfconv`): its
    :class:`~flashschnet.fused.plans.FilterPlan` and the step's shared :class:`~flashschnet.fused.plans.BasisPlan`."""

    def __init__(self, fp: FilterPlan, bp: BasisPlan):
        self.fp, self.bp = fp, bp
        self.F = fp.F

    def aggregate(self, ws: Workspace, pos: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``m = cfconv(pos, h)`` into ``ws.m`` [R, N, F] (returned). ``pos``/``h`` contiguous, compute dtype."""
        if ws.R * ws.N:
            run(fwd_launch(ws, pos, h, self.fp, self.bp))
            run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.m, self.F))
        return ws.m

    def backward(self, ws: Workspace, pos: torch.Tensor, h: torch.Tensor,
                 gm: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(gh, dE/dpos)`` into ``ws.gh`` [R, N, F] and ``ws.gpos`` [R, N, 3] (returned), given ``gm = dE/dm``."""
        if ws.R * ws.N:
            run(bwd_launch(ws, pos, h, gm, self.fp, self.bp))
            run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.gh, self.F))
            run(reduce_launch(ws, ws.prow, ws.pcol, ws.gpos, 3))
        return ws.gh, ws.gpos


class TableTileFilter:
    """One block's tabulated filter on the CFConv table kernels (:mod:`flashschnet.kernels.cfconv`): its
    :class:`~flashschnet.fused.plans.TablePlan` (the flags must be built for a radius >= ``cutoff``)."""

    def __init__(self, tp: TablePlan):
        self.tp = tp
        self.F, self.cutoff = tp.F, tp.cutoff

    def aggregate(self, ws: Workspace, pos: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        if ws.R * ws.N:
            run(table_fwd_launch(ws, pos, h, self.tp))
            run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.m, self.F))
        return ws.m

    def backward(self, ws: Workspace, pos: torch.Tensor, h: torch.Tensor,
                 gm: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if ws.R * ws.N:
            run(table_bwd_launch(ws, pos, h, gm, self.tp))
            run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.gh, self.F))
            run(reduce_launch(ws, ws.prow, ws.pcol, ws.gpos, 3))
        return ws.gh, ws.gpos


class TritonTileEngine:
    """Edge engine on tiles of ``block`` consecutive beads.

    Parameters
    ----------
    basis : BasisSpec
    filters : list of FilterWeights or of TableWeights (a compressed model), one per block
    skin : float
        Verlet skin of the tile-pair flags (model length unit).
    dot : str or None
        Matrix-product precision ("auto"/None, "ieee", "tf32", "bf16", "fp16";
        :func:`~flashschnet.fused.plans.resolve_dot`); ignored with tables (``self.dot`` is then "ieee":
        a lookup is exact arithmetic in the compute dtype).
    """

    #: a step allocates nothing and never reads the device back to the host: it can be captured in a CUDA graph
    graphable = True

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, block: int = BLOCK,
                 dot: Optional[str] = None):
        self.basis, self.filters, self.skin, self.block = basis, filters, float(skin), int(block)
        self.dot_request = dot
        self.offsets, self.coeffs = basis_coeffs(basis.kind, basis.centers, basis.widths)
        self.ws: Optional[Workspace] = None
        self.sources: Optional[list] = None          # one filter strategy per block, once planned
        self.dot: Optional[str] = None
        self.cutoff = basis.rc_graph             # the tile flags' radius (tables: min(rc_graph, r_end))
        self.planned_for = None                  # (dtype, device) of the plans

    def _source(self, f, dtype, device, bp: Optional[BasisPlan]):
        """The filter strategy of one block's weights ``f``."""
        if isinstance(f, TableWeights):
            return TableTileFilter(plan_table(f.table, f.scale, f.r_end, int(f.table.shape[2]), dtype, device,
                                              self.basis.rc_graph))
        if f.A1q is not None:
            return ExactTileFilter(plan_filter(f.A1q, f.a1, f.A2q, bp.KP, dtype, self.dot, f.A1s, f.A2s), bp)
        return ExactTileFilter(plan_filter(f.A1, f.a1, f.A2, bp.KP, dtype, self.dot), bp)

    def _plan(self, positions: torch.Tensor) -> None:
        dtype, dev = positions.dtype, positions.device
        self.planned_for = (dtype, dev)
        bp = None
        if self.filters and is_table(self.filters[0]):
            self.dot = "ieee"
        else:
            quant = self.filters[0].A1q is not None if self.filters else False
            self.dot = resolve_dot(self.dot_request, dtype, self.filters[0].A1q.dtype if quant else None)
            b = self.basis
            bp = plan_basis(self.offsets, self.coeffs, b.kind, b.alpha, b.lower, b.rc_graph, b.rc_rbf, b.rc_filt,
                            b.rbf_env, b.filt_env, dtype, dev)
        self.sources = [self._source(f, dtype, dev, bp) for f in self.filters]
        if self.sources and isinstance(self.sources[0], TableTileFilter):
            self.cutoff = self.sources[0].cutoff

    def prepare(self, positions: torch.Tensor) -> None:
        if self.sources is None or self.planned_for != (positions.dtype, positions.device):
            self._plan(positions)
            self.ws = None
        F = self.sources[0].F if self.sources else 1
        if self.ws is None or not self.ws.matches(positions, F):
            self.ws = Workspace(positions.shape[0], positions.shape[1], F, positions.dtype, positions.device,
                                self.block)
        self.R, self.N = positions.shape[0], positions.shape[1]
        self.pos = positions.contiguous()
        update_tiles(self.ws, self.pos, self.cutoff, self.skin)

    @property
    def builds(self) -> int:
        """Tile-flag builds so far (the most of any replica; reads a device counter: diagnostics only)."""
        return 0 if self.ws is None else int(self.ws.builds.max())

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        hh = h.reshape(self.R, self.N, -1).contiguous()
        return self.sources[t].aggregate(self.ws, self.pos, hh).reshape(self.R * self.N, -1)

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor):
        hh, gg = h.reshape(self.R, self.N, -1).contiguous(), gm.reshape(self.R, self.N, -1).contiguous()
        gh, gpos = self.sources[t].backward(self.ws, self.pos, hh, gg)
        return gh.reshape(self.R * self.N, -1), gpos.reshape(self.R * self.N, 3)
