"""The ``"triton"`` edge engine: the fused Triton kernels (:mod:`flashschnet.kernels`), a whole step as one
sequence of launches (:meth:`TritonTileEngine.energy_forces`), and the same CFConv kernels behind the
:class:`~flashschnet.fused.engine.EdgeEngine` interface (``prepare`` / ``aggregate`` / ``backward``) for the
node-level PyTorch pass.

Everything that does not change from step to step is built once, when the engine first meets positions of a
dtype and device: the plans (:mod:`flashschnet.fused.plans`: the filters' padded weights or tables;
:mod:`flashschnet.fused.node_plans`: the node layers' padded weights) and a
:class:`~flashschnet.fused.workspace.Workspace` of persistent buffers; the first block's per-bead-type rows are
built when the bead types change. A fused step of ``n`` interaction blocks is then ``1 + 4 n`` launches
(:mod:`flashschnet.fused.launches`), nothing allocated but the outputs, nothing read back to the host:

1. the tile flags (:func:`~flashschnet.fused.tile_flags.update_tiles`): the positions scaled to the model's
   length unit, and each replica's flags and work list rebuilt on the device only when one of its beads moved
   more than half the Verlet skin;
2. per block, forward: the CFConv kernel over the work list, then the node kernel (reduction, ``lin2 -> tanh ->
   lin -> residual -> next lin1``; after the last block the output MLP and the backward's start);
3. per block, backward (last to first): the CFConv backward kernel (feature and position gradients, each filter
   evaluated once), then the node kernel (reductions, ``gh L1``, the previous block's ``gm``; block 0: forces,
   energies and their total, in the caller's units).

A block's filter is a strategy: :class:`ExactTileFilter` (the filter network on the exact kernels, matrix products
at the chosen precision) or, for a compressed model's :class:`~flashschnet.nn.layout.TableWeights`,
:class:`TableTileFilter` (the tabulated-filter kernels: no basis, no filter network, no matrix products -- the
matmul precision does not apply -- and tile flags for the pair cutoff ``min(rc_graph, r_end)``).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

from ..nn.layout import BasisSpec, FilterWeights, NodeWeights, TableWeights, is_table
from .launches import (bwd_launch, exact_groups, fwd_launch, node_buffers, node_bwd_launch, node_fwd_launch,
                       reduce_launch, run, table_bwd_launch, table_fwd_launch)
from .node_plans import NodePlan, plan_nodes, type_rows
from .nodes import energy_forces_scaled
from .plans import (BasisPlan, FilterPlan, TablePlan, basis_coeffs, plan_basis, plan_filter, plan_table,
                    resolve_dot)
from .tile_flags import update_tiles
from . import workspace
from .workspace import BLOCK, Workspace


class ExactTileFilter:
    """One block's exact filter network on the CFConv kernels (:mod:`flashschnet.kernels.cfconv`): its
    :class:`~flashschnet.fused.plans.FilterPlan` and the step's shared :class:`~flashschnet.fused.plans.BasisPlan`;
    one position partial per slot and channel group of the backward kernel."""

    NP = exact_groups("_cfconv_bwd_kernel")

    def __init__(self, fp: FilterPlan, bp: BasisPlan):
        self.fp, self.bp = fp, bp
        self.F, self.FP = fp.F, fp.FP

    def forward_launch(self, ws: Workspace, h, h_rs: int, programs: Optional[int] = None):
        return fwd_launch(ws, self.fp, self.bp, h, h_rs, programs)

    def backward_launch(self, ws: Workspace, h, h_rs: int, gm, programs: Optional[int] = None):
        return bwd_launch(ws, self.fp, self.bp, h, h_rs, gm, programs)


class TableTileFilter:
    """One block's tabulated filter on the CFConv table kernels: its :class:`~flashschnet.fused.plans.TablePlan`
    (the flags must be built for a radius >= ``cutoff``); one position partial per slot and channel group."""

    def __init__(self, tp: TablePlan):
        self.tp = tp
        self.F, self.FP, self.cutoff, self.NP = tp.F, tp.FP, tp.cutoff, tp.NCG

    def forward_launch(self, ws: Workspace, h, h_rs: int, programs: Optional[int] = None):
        return table_fwd_launch(ws, self.tp, h, h_rs, programs)

    def backward_launch(self, ws: Workspace, h, h_rs: int, gm, programs: Optional[int] = None):
        return table_bwd_launch(ws, self.tp, h, h_rs, gm, programs)


def aggregate(filt, ws: Workspace, h: torch.Tensor, programs: Optional[int] = None) -> torch.Tensor:
    """``m = cfconv(ws.pos, h)`` [R, N, F] of one filter strategy (``h`` [R, N, FP] contiguous; flags and work
    list built): the CFConv kernel and the plain reduction."""
    m, _, _ = ws.unfused(filt.F)
    if ws.R * ws.N:
        run(filt.forward_launch(ws, h, ws.N, programs))
        run(reduce_launch(ws, ws.rowpart, ws.colpart, m, filt.FP, filt.F))
    return m


def backward(filt, ws: Workspace, h: torch.Tensor, gm: torch.Tensor,
             programs: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh [R, N, F], dE/dpos [R, N, 3])`` of one filter strategy given ``gm = dE/dm`` (``[R, N, FP]``)."""
    _, gh, gpos = ws.unfused(filt.F)
    if ws.R * ws.N:
        run(filt.backward_launch(ws, h, ws.N, gm, programs))
        run(reduce_launch(ws, ws.rowpart, ws.colpart, gh, filt.FP, filt.F))
        run(reduce_launch(ws, ws.prow, ws.pcol, gpos, 4, 3, filt.NP))
    return gh, gpos


def _empty(shape, like: torch.Tensor) -> torch.Tensor:
    """A step's output, uninitialised (the workspace's allocator: every element is written by a kernel)."""
    return workspace._empty(shape, like)


def padded(x: torch.Tensor, R: int, N: int, FP: int) -> torch.Tensor:
    """``x`` ([R*N, F] or [R, N, F]) as a contiguous [R, N, FP] (zero channels appended when F < FP)."""
    x = x.reshape(R, N, -1)
    if x.shape[-1] < FP:
        x = torch.nn.functional.pad(x, (0, FP - x.shape[-1]))
    return x.contiguous()


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
    programs : int or None
        Persistent programs of the CFConv kernels (None: :func:`~flashschnet.fused.launches.persistent_programs`;
        results do not depend on it).
    """

    #: a step allocates nothing but its outputs and never reads the device back to the host: it can be captured
    #: in a CUDA graph
    graphable = True

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, block: int = BLOCK,
                 dot: Optional[str] = None, programs: Optional[int] = None):
        self.basis, self.filters, self.skin, self.block = basis, filters, float(skin), int(block)
        self.dot_request, self.programs = dot, programs
        self.offsets, self.coeffs = basis_coeffs(basis.kind, basis.centers, basis.widths)
        self.ws: Optional[Workspace] = None
        self.sources: Optional[list] = None          # one filter strategy per block, once planned
        self.dot: Optional[str] = None
        self.cutoff = basis.rc_graph             # the tile flags' radius (tables: min(rc_graph, r_end))
        self.planned_for = None                  # (dtype, device) of the plans
        self.node_plan: Optional[NodePlan] = None
        self._node_plan_of = None                # (id of the node weights, dtype, device) of node_plan
        self._types_key = None
        self._type_rows = None

    # ---------------------------------------------------------------------------------------------- plans

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

    @property
    def FP(self) -> int:
        return self.sources[0].FP if self.sources else 16

    @property
    def NP(self) -> int:
        return self.sources[0].NP if self.sources else 1

    def _workspace(self, positions: torch.Tensor) -> Workspace:
        if self.sources is None or self.planned_for != (positions.dtype, positions.device):
            self._plan(positions)
            self.ws = None
            self.node_plan, self._node_plan_of, self._types_key = None, None, None
        if self.ws is None or not self.ws.matches(positions, self.FP, self.NP):
            self.ws = Workspace(positions.shape[0], positions.shape[1], self.FP, positions.dtype, positions.device,
                                self.block, self.NP)
        return self.ws

    def _nodes(self, weights: NodeWeights, dtype, device) -> Optional[NodePlan]:
        """The fused node layers' plan, or None where the node-level PyTorch pass runs instead: an output MLP deeper
        than the kernels fuse, and float64 on a GPU (the node kernels' float64 variants spill registers on sm_80 and
        sm_90: ``tools/device/gpu_fit.py``; they run under the interpreter, where they are tested)."""
        key = (id(weights), dtype, device)
        if self._node_plan_of != key:
            fuse = bool(weights.blocks) and not (dtype == torch.float64 and torch.device(device).type == "cuda")
            self.node_plan = plan_nodes(weights, self.FP, dtype, device) if fuse else None
            self._node_plan_of, self._types_key = key, None
            self._weights_alive = weights              # the key's id stays valid while the plan is used
        return self.node_plan

    def _rows_of_types(self, bead_types: torch.Tensor):
        """``(x_0, h_0)`` of the bead types (:func:`~flashschnet.fused.node_plans.type_rows`), rebuilt only when
        the types tensor or its contents change."""
        key = (bead_types.data_ptr(), bead_types._version, tuple(bead_types.shape), bead_types.device)
        if self._types_key != key:
            self._type_rows = type_rows(self.node_plan, bead_types)
            self._types_key = key
        return self._type_rows

    # ---------------------------------------------------------------------------------------------- fused step

    def energy_forces(self, weights: NodeWeights, positions: torch.Tensor, bead_types: torch.Tensor,
                      scales: Sequence[float] = (1.0, 1.0, 1.0)):
        """``(energies [R], forces [R, N, 3], total [])`` of positions ``[R, N, 3]`` given in a length unit of
        ``scales = (length_scale, energy_scale, force_scale)`` times the model's (model units x the scales out):
        the fused step (module docstring), or the node-level PyTorch pass over the same CFConv kernels where the
        node layers are not fused (:meth:`_nodes`)."""
        length_scale, energy_scale, force_scale = (float(s) for s in scales)
        R, N = positions.shape[0], positions.shape[1]
        pos = positions.contiguous()
        ws = self._workspace(pos)
        plan = self._nodes(weights, pos.dtype, pos.device)
        if plan is None or R * N == 0:
            return energy_forces_scaled(weights, pos, bead_types, self, scales)
        energies, forces, total = _empty((R,), pos), _empty((R, N, 3), pos), _empty((1,), pos)
        x0, h0 = self._rows_of_types(bead_types)
        bufs = node_buffers(ws, plan)
        update_tiles(ws, pos, self.cutoff, self.skin, length_scale)
        nb = len(self.sources)
        for t, src in enumerate(self.sources):
            h, h_rs = (h0, 0) if t == 0 else (bufs["h"][t - 1], N)
            run(src.forward_launch(ws, h, h_rs, self.programs))
            run(node_fwd_launch(ws, plan, t, x0 if t == 0 else bufs["x"], 0 if t == 0 else N))
        for t in range(nb - 1, -1, -1):
            h, h_rs = (h0, 0) if t == 0 else (bufs["h"][t - 1], N)
            run(self.sources[t].backward_launch(ws, h, h_rs, bufs["gm"], self.programs))
            run(node_bwd_launch(ws, plan, t, energies, total, forces, energy_scale, force_scale))
        return energies, forces, total.reshape(())

    # ---------------------------------------------------------------------------------------------- EdgeEngine

    def prepare(self, positions: torch.Tensor) -> None:
        ws = self._workspace(positions)
        self.R, self.N = positions.shape[0], positions.shape[1]
        update_tiles(ws, positions.contiguous(), self.cutoff, self.skin)

    @property
    def builds(self) -> int:
        """Tile-flag builds so far (the most of any replica; reads a device counter: diagnostics only)."""
        return 0 if self.ws is None else int(self.ws.builds.max())

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        src = self.sources[t]
        m = aggregate(src, self.ws, padded(h, self.R, self.N, src.FP), self.programs)
        return m.reshape(self.R * self.N, -1)

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor):
        src = self.sources[t]
        gh, gpos = backward(src, self.ws, padded(h, self.R, self.N, src.FP), padded(gm, self.R, self.N, src.FP),
                            self.programs)
        return gh.reshape(self.R * self.N, -1), gpos.reshape(self.R * self.N, 3)
