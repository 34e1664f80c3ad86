"""The ``"triton"`` backend's edge engine: the fused Triton kernels (:mod:`flashschnet.fused.triton_ops`) behind
the engine interface of :mod:`flashschnet.fused.torch_engine` (``prepare`` / ``aggregate`` / ``backward``).

Everything that does not change from step to step is built once, when the engine is made or first meets
positions of a shape: the padded, transposed filter weights in the operand type of the matrix-product
precision, the basis and scalar tensors, and a :class:`~flashschnet.fused.triton_ops.Workspace` of persistent
buffers. A step then launches, per call: one tile-flag kernel (each replica's tile-pair flags are rebuilt on the
device only when one of its beads moved more than half the Verlet skin; PyTorch ops on the device beyond 128
tiles), and per interaction block a forward
kernel + reduction and a backward kernel (feature and position gradients together, each filter evaluated once)
+ two reductions. Nothing is allocated by the engine and nothing is read back to the host, so the step can be
captured in a CUDA graph (:mod:`flashschnet.fused.graph`).

A compressed model's blocks (:class:`~flashschnet.fused.layout.TableWeights`) get table plans and the
tabulated-filter kernels (:mod:`flashschnet.fused.triton_table_ops`) instead: no basis, no filter network, no
matrix products (the matmul precision does not apply), and tile flags for the pair cutoff ``min(rc_graph,
r_end)``.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from .layout import BasisSpec, FilterWeights, is_table
from .triton_ops import (BLOCK, Workspace, basis_coeffs, launch_bwd, launch_fwd, plan_basis, plan_filter,
                         resolve_dot, update_tiles)
from .triton_table_ops import launch_table_bwd, launch_table_fwd, plan_table


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
        :func:`~flashschnet.fused.triton_ops.resolve_dot`); ignored with tables (``self.dot`` is then "ieee":
        a lookup is exact arithmetic in the compute dtype).
    """

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, block: int = BLOCK,
                 dot: Optional[str] = None):
        self.basis, self.filters, self.skin, self.block = basis, filters, float(skin), int(block)
        self.dot_request = dot
        self.offsets, self.coeffs = basis_coeffs(basis.kind, basis.centers, basis.widths)
        self.ws: Optional[Workspace] = None
        self.plans = None
        self.dot: Optional[str] = None
        self.tables = bool(filters) and is_table(filters[0])
        self.cutoff = basis.rc_graph             # the tile flags' radius (tables: min(rc_graph, r_end))
        self.planned_for = None                  # (dtype, device) of the plans

    def _plan(self, positions: torch.Tensor) -> None:
        dtype, dev = positions.dtype, positions.device
        self.planned_for = (dtype, dev)
        if self.tables:
            self.dot = "ieee"
            self.plans = [plan_table(f.table, f.scale, f.r_end, int(f.table.shape[2]), dtype, dev,
                                     self.basis.rc_graph) for f in self.filters]
            self.cutoff = self.plans[0].cutoff
            return
        quant = self.filters[0].A1q is not None if self.filters else False
        self.dot = resolve_dot(self.dot_request, dtype, self.filters[0].A1q.dtype if quant else None)
        b = self.basis
        self.bplan = plan_basis(self.offsets, self.coeffs, b.kind, b.alpha, b.lower, b.rc_graph, b.rc_rbf, b.rc_filt,
                                b.rbf_env, b.filt_env, dtype, dev)
        self.plans = []
        for f in self.filters:
            if f.A1q is not None:
                self.plans.append(plan_filter(f.A1q, f.a1, f.A2q, self.bplan.KP, dtype, self.dot, f.A1s, f.A2s))
            else:
                self.plans.append(plan_filter(f.A1, f.a1, f.A2, self.bplan.KP, dtype, self.dot))

    def prepare(self, positions: torch.Tensor) -> None:
        if self.plans is None or self.planned_for != (positions.dtype, positions.device):
            self._plan(positions)
            self.ws = None
        F = self.plans[0].F if self.plans else 1
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
        if self.tables:
            m = launch_table_fwd(self.ws, self.pos, hh, self.plans[t])
        else:
            m = launch_fwd(self.ws, self.pos, hh, self.plans[t], self.bplan)
        return m.reshape(self.R * self.N, -1)

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor):
        hh, gg = h.reshape(self.R, self.N, -1).contiguous(), gm.reshape(self.R, self.N, -1).contiguous()
        if self.tables:
            gh, gpos = launch_table_bwd(self.ws, self.pos, hh, gg, self.plans[t])
        else:
            gh, gpos = launch_bwd(self.ws, self.pos, hh, gg, self.plans[t], self.bplan)
        return gh.reshape(self.R * self.N, -1), gpos.reshape(self.R * self.N, 3)
