"""The ``"torch"`` edge engine: a half pair list (``i < j``) with a Verlet skin, edges in chunks.

It implements :class:`~flashschnet.fused.engine.EdgeEngine` (that module describes the interface: ``prepare``,
``aggregate``, ``backward``); the filters are recomputed, never stored (FlashAttention-style).

A block's filter is a strategy (chosen per block from its weights in :meth:`TorchPairEngine.prepare`): the exact
filter network (:class:`ExactFilter`: ``W`` and ``dW/dd`` in forward mode,
the basis tangent through the same products) or a table of the distance (:class:`TableFilter`, a compressed
model: :mod:`flashschnet.nn.table`). Each filter is evaluated once per unordered pair and serves both
directions; chunks of ``chunk`` pairs keep peak memory bounded; reductions by ``index_add_`` on CPU are
sequential and deterministic. The pairs of a step are ordered by :class:`Segments` of their first bead and then by
distance (a function of the positions alone), which lets the fused table loops run on any number of threads with
the same bits.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

from ..neighbors import VerletList
from ..nn.table import polynomial_rows
from ..nn.layout import BasisSpec, FilterWeights, TableWeights, is_table
from .node_ops import TORCH_NODE_OPS, CNodeOps
from .pair_loops import PairLoops, bucket_scale, order_key, segments
from .nodes import energy_forces_scaled


def _cosine(d: torch.Tensor, rc: float) -> Tuple[torch.Tensor, torch.Tensor]:
    inside = (d < rc).to(d.dtype)
    arg = d * (math.pi / rc)
    return 0.5 * (torch.cos(arg) + 1.0) * inside, -0.5 * (math.pi / rc) * torch.sin(arg) * inside


def basis_and_derivative(d: torch.Tensor, b: BasisSpec) -> Tuple[torch.Tensor, torch.Tensor]:
    """``e [P, K]`` and ``de/dd [P, K]`` for distances ``d [P]``."""
    dd = d.unsqueeze(-1)
    if b.kind == "gaussian":
        diff = dd - b.centers
        g = torch.exp(b.widths * diff * diff)
        dg = g * (2.0 * b.widths * diff)
    else:
        x = torch.exp(b.alpha * (b.lower - dd))
        diff = x - b.centers
        g = torch.exp(-b.widths * diff * diff)
        dg = g * (-2.0 * b.widths * diff) * (-b.alpha * x)
    if b.rbf_env:
        c, dc = _cosine(d, b.rc_rbf)
        return g * c.unsqueeze(-1), dg * c.unsqueeze(-1) + g * dc.unsqueeze(-1)
    return g, dg


def filter_envelope(d: torch.Tensor, b: BasisSpec) -> Tuple[torch.Tensor, torch.Tensor]:
    if b.filt_env:
        return _cosine(d, b.rc_filt)
    return torch.ones_like(d), torch.zeros_like(d)


def radial(d: torch.Tensor, b: BasisSpec) -> Tuple[torch.Tensor, ...]:
    """What every block's filter network needs of the distances ``d [P]``: the basis ``e``, ``de/dd`` [P, K]
    and the filter envelope ``c``, ``dc/dd`` [P]."""
    e, de = basis_and_derivative(d, b)
    c, dc = filter_envelope(d, b)
    return e, de, c, dc


class ExactFilter:
    """A block's filter network: ``W = tanh(e A1^T + a1) A2^T * C(d)`` and ``dW/dd`` (forward mode), given the
    :func:`radial` terms of the distances (the same for every block: the engine computes them once per step)."""

    def __init__(self, f: FilterWeights, basis: BasisSpec):
        self.f, self.basis = f, basis

    def values(self, d: torch.Tensor, rad) -> torch.Tensor:
        f = self.f
        e, _, c, _ = rad
        y = torch.tanh(torch.addmm(f.a1, e, f.A1.t())) @ f.A2.t()
        return y * c.unsqueeze(-1)

    def values_and_derivative(self, d: torch.Tensor, rad) -> Tuple[torch.Tensor, torch.Tensor]:
        f = self.f
        e, de, c, dc = rad
        s = torch.tanh(torch.addmm(f.a1, e, f.A1.t()))
        ds = (de @ f.A1.t()) * (1.0 - s * s)
        y, dy = s @ f.A2.t(), ds @ f.A2.t()
        return y * c.unsqueeze(-1), dy * c.unsqueeze(-1) + y * dc.unsqueeze(-1)


class TableFilter:
    """A block's tabulated filter (:mod:`flashschnet.nn.table`), the same function as
    :func:`~flashschnet.nn.table.table_lookup` arranged for speed on a CPU. The table is laid out once per
    engine as ``[2Q (n - 1), F]`` -- interval ``k`` owns rows ``2Q k ..``, the coefficients of its polynomial in
    ``t`` (:func:`~flashschnet.nn.table.polynomial_rows`, scales applied), rounded once to the compute dtype. The C
    loops evaluate it by Horner's rule (:mod:`flashschnet.kernels.cpu_pairs`); the PyTorch path as the weighted
    sum of the ``2Q`` rows with weights ``t^e`` (and ``e t^(e-1) / h`` for ``dW/dd``):
    ``torch.nn.functional.embedding_bag(..., per_sample_weights=, mode="sum")``, PyTorch's fused
    gather-and-weighted-sum (one pass; ~8x faster on 2 cores than gathering ``[P, 2Q, F]`` and a batched
    product, measured with ``torch.profiler`` at R = 8 BPTI), deterministic."""

    def __init__(self, f: TableWeights, dtype: torch.dtype, device):
        n, Q, F = f.table.shape
        self.n, self.Q, self.F, self.r_end = n, Q, F, float(f.r_end)
        self.inv_h = (n - 1) / self.r_end
        tab = f.table.to(device=device, dtype=torch.float64) * f.scale.to(device=device,
                                                                          dtype=torch.float64).unsqueeze(0)
        self.rows = polynomial_rows(tab).to(dtype).reshape(2 * Q * (n - 1), F).contiguous()
        self.powers = torch.arange(2 * Q, device=device, dtype=dtype)
        self.offsets = torch.arange(2 * Q, device=device)

    @property
    def knots(self) -> Tuple[int, float]:
        """What a pair's interval and ``t`` depend on (not the degree): blocks with equal knots share them in a
        step."""
        return self.n, self.r_end

    def _weights(self, d: torch.Tensor):
        """``(rows [P, 2Q] int64, weights [P, 2, 2Q])``: each pair's table rows and their weights for the value
        (``[:, 0]``: ``t^e``) and the derivative (``[:, 1]``: ``e t^(e-1) / h``); zero weights for ``d >= r_end``."""
        x = d * self.inv_h
        k = torch.clamp(torch.floor(x), 0, self.n - 2)
        t = x - k
        rows = k.to(torch.int64).unsqueeze(1) * (2 * self.Q) + self.offsets
        pw = torch.pow(t.unsqueeze(1), self.powers)                                    # [P, 2Q], t^0 = 1
        dpw = torch.zeros_like(pw)
        dpw[:, 1:] = pw[:, :-1] * (self.powers[1:] * self.inv_h)
        weights = torch.stack([pw, dpw], dim=1) * (d < self.r_end).to(d.dtype).view(-1, 1, 1)
        return rows, weights

    def _sum(self, rows: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding_bag(rows, self.rows, per_sample_weights=weights.contiguous(),
                                                 mode="sum")

    def values(self, d: torch.Tensor, rad=None) -> torch.Tensor:
        rows, w = self._weights(d)
        return self._sum(rows, w[:, 0])

    def values_and_derivative(self, d: torch.Tensor, rad=None) -> Tuple[torch.Tensor, torch.Tensor]:
        rows, w = self._weights(d)
        return self._sum(rows, w[:, 0]), self._sum(rows, w[:, 1])


#: the most memory a step's basis terms (``2K + 2`` values per pair) may take to be kept for all blocks and
#: both passes instead of being recomputed per block and pass (BPTI at R = 8: ~80 MB in float32)
RADIAL_CACHE_BYTES = 512 * 2 ** 20


class TorchPairEngine:
    """Edge engine on a half pair list (``i < j``), chunked (:class:`~flashschnet.fused.engine.EdgeEngine`).

    Parameters
    ----------
    basis : BasisSpec
    filters : list of FilterWeights or TableWeights, one per block
    skin : float
        Verlet skin (model length unit); the list is rebuilt when a bead moved more than ``skin / 2``.
    chunk : int
        Pairs processed at once; peak extra memory is O(chunk * (K + 4F)).
    fused_loops : bool or None
        Run the pair loops (gather, multiply, scatter; a tabulated filter's lookup) as the fused C kernels of
        :mod:`flashschnet.kernels.cpu_pairs` on CPU tensors (True: required; None, the default: when they can be
        built here) or as PyTorch ops (False; always on other devices). Same arithmetic either way. The node
        pass's dense layers follow the same choice for float32 (:mod:`flashschnet.kernels.cpu_nodes`: their
        products round in another order than PyTorch's).
    fused_step : bool or None
        With the fused loops and node kernels, float32 and every filter a table (the default model on a CPU): the
        whole step as one C call (:mod:`flashschnet.fused.cpu_step`; the same bits as the kernels called one at a
        time). True: required; None, the default: when it builds here; False: the kernels one call at a time.
    """

    #: a step reads pair-list sizes back to the host: it cannot be captured in a CUDA graph
    graphable = False

    def __init__(self, basis: BasisSpec, filters: List, skin: float = 2.0, chunk: int = 2048,
                 verlet: Optional[VerletList] = None, fused_loops: Optional[bool] = None,
                 fused_step: Optional[bool] = None):
        self.basis, self.filters, self.chunk = basis, filters, int(chunk)
        self.verlet = verlet if verlet is not None else VerletList(basis.rc_graph, skin)
        self.pos: Optional[torch.Tensor] = None
        self._sources = None
        self.fused_loops = fused_loops
        self.loops: Optional[PairLoops] = None
        self.node_ops = TORCH_NODE_OPS
        self._radial = None
        self._table_t: dict = {}
        self.fused_step = fused_step
        self._step = None

    def energy_forces(self, weights, positions: torch.Tensor, bead_types: torch.Tensor, scales=(1.0, 1.0, 1.0)):
        """A whole step: the node-level pass around this engine (:func:`flashschnet.fused.nodes.energy_forces_scaled`),
        or the same as one C call (``fused_step``)."""
        self._setup(positions)
        step = self._c_step(weights, positions)
        if step is not None:
            return step.energy_forces(self, positions, bead_types, scales)
        return energy_forces_scaled(weights, positions, bead_types, self, scales)

    def _c_step(self, weights, positions: torch.Tensor):
        """The :class:`~flashschnet.fused.cpu_step.CStep` of this engine for ``weights`` and the positions' shape, or
        None where the step runs as the composed pass (``fused_step``)."""
        R, N = positions.shape[0], positions.shape[1]
        step = self._step
        if step is not None and step.weights is weights and (step.R, step.N) == (R, N) and step.ops is self.node_ops:
            return step
        self._step = None
        if self.fused_step is False:
            return None
        tables = self._sources[1]
        applies = (positions.dtype == torch.float32 and positions.device.type == "cpu" and self.loops is not None
                   and isinstance(self.node_ops, CNodeOps) and len(tables) > 0
                   and all(isinstance(t, TableFilter) for t in tables))
        if not applies:
            if self.fused_step:
                raise RuntimeError("fused_step=True needs float32 CPU positions, tabulated filters and the fused "
                                   "loops and node kernels")
            return None
        from ..kernels.cpu_step import library
        from .cpu_step import CStep

        lib = library()
        if lib is None:
            if self.fused_step:
                raise RuntimeError("fused_step=True but the fused CPU step could not be built (see the log)")
            return None
        self._step = CStep(lib, self.node_ops, weights, tables, segments(R, N), self.basis.rc_graph, self.verlet.skin)
        return self._step

    def _setup(self, positions: torch.Tensor) -> None:
        """The filters in the positions' dtype and device, and the kernels that run them (once per dtype and
        device)."""
        if self._sources is None or self._sources[0] != (positions.dtype, positions.device):
            self._sources = ((positions.dtype, positions.device),
                             [TableFilter(f, positions.dtype, positions.device) if is_table(f)
                              else ExactFilter(f, self.basis) for f in self.filters])
            self.loops = None
            if self.fused_loops is not False and positions.device.type == "cpu" and \
                    positions.dtype in (torch.float32, torch.float64):
                from ..kernels.cpu_pairs import library

                lib = library()
                if lib is None and self.fused_loops:
                    raise RuntimeError("fused_loops=True but the fused CPU pair kernels could not be built "
                                       "(see the log)")
                self.loops = None if lib is None else PairLoops(lib, positions.dtype)
            self.node_ops = self._node_ops(positions)
            self._step = None

    def prepare(self, positions: torch.Tensor) -> None:
        R, N = positions.shape[0], positions.shape[1]
        self.pos = positions.reshape(R * N, 3)
        self._setup(positions)
        nl = self.verlet.get(positions)
        # Only the pairs inside the graph cutoff go on: the chunks -- and with them every matrix product's
        # shape and every summation order -- are then a function of the positions alone, not of where the
        # Verlet list was last rebuilt, so a run resumed from a checkpoint repeats the uninterrupted run
        # bitwise (and the skin shell is dropped once per step instead of once per block and pass).
        # the distances of the list's pairs, once per step; those of the kept pairs serve every block and both
        # passes
        if self.loops is not None:
            i, j, d = self.loops.pairs_within(nl.i, nl.j, self.pos.contiguous(), self.basis.rc_graph)
        else:
            d = torch.empty(nl.i.shape[0], dtype=positions.dtype, device=positions.device)
            for s in range(0, nl.i.shape[0], self.chunk):
                rij = (self.pos.index_select(0, nl.i[s:s + self.chunk])
                       - self.pos.index_select(0, nl.j[s:s + self.chunk]))
                d[s:s + self.chunk] = torch.linalg.vector_norm(rij, dim=-1)
            sel = (d < self.basis.rc_graph).nonzero(as_tuple=True)[0]
            i, j, d = nl.i.index_select(0, sel), nl.j.index_select(0, sel), d.index_select(0, sel)
        # the step's order (a function of the positions alone, like the rest): by segment, then distance
        seg = segments(R, N)
        inv_w = bucket_scale(self.basis.rc_graph, positions.dtype)
        if self.loops is not None:
            self.i, self.j, self.d, self.seg = self.loops.order_pairs(i, j, d, seg, float(inv_w))
        else:
            perm = torch.sort(order_key(i, d, seg, inv_w.to(d.device)), stable=True).indices
            self.i, self.j, self.d, self.seg = i.index_select(0, perm), j.index_select(0, perm), \
                d.index_select(0, perm), seg
        self._radial = None
        self._table_t = {}

    def _node_ops(self, positions: torch.Tensor):
        """The node pass's dense layers (:mod:`~flashschnet.fused.node_ops`), chosen with the pair loops: the
        fused C kernels for float32 on a CPU (``fused_loops`` True: required; None: when they build here), else
        PyTorch's ops."""
        if self.fused_loops is False or positions.device.type != "cpu" or positions.dtype != torch.float32:
            return TORCH_NODE_OPS
        from ..kernels.cpu_nodes import library

        lib = library()
        if lib is None and self.fused_loops:
            raise RuntimeError("fused_loops=True but the fused CPU node kernels could not be built (see the log)")
        return TORCH_NODE_OPS if lib is None else CNodeOps(lib)

    def _intervals_of(self, src: "TableFilter"):
        """The fused loops' table interval and ``t`` of this step's pairs for ``src``'s knots (computed by the
        first block that needs them, shared by every block and both passes)."""
        w = self._table_t.get(src.knots)
        if w is None:
            w = self._table_t[src.knots] = self.loops.table_intervals(src, self.d)
        return w

    def _chunks(self, src, with_rij: bool = False):
        """``(i, j, r_i - r_j or None, d, radial terms or None)`` per chunk; the radial terms of an exact filter
        are computed once per step and kept while they fit :data:`RADIAL_CACHE_BYTES`."""
        P = self.i.shape[0]
        exact = isinstance(src, ExactFilter)
        if exact and self._radial is None:
            K = int(self.basis.centers.numel())
            self._radial = {} if P * (2 * K + 2) * self.d.element_size() <= RADIAL_CACHE_BYTES else False
        for s in range(0, P, self.chunk):
            i, j = self.i[s:s + self.chunk], self.j[s:s + self.chunk]
            rij = self.pos.index_select(0, i) - self.pos.index_select(0, j) if with_rij else None     # r_i - r_j
            d = self.d[s:s + self.chunk]
            rad = None
            if exact:
                rad = self._radial.get(s) if self._radial is not False else None
                if rad is None:
                    rad = radial(d, self.basis)
                    if self._radial is not False:
                        self._radial[s] = rad
            yield i, j, rij, d, rad

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        src = self._sources[1][t]
        m = torch.zeros_like(h)
        h = h.contiguous()
        if self.loops is not None and isinstance(src, TableFilter):
            self.loops.table_fwd(src, self.seg, *self._intervals_of(src), self.i, self.j, h, m)
            return m
        for i, j, _, d, rad in self._chunks(src):
            W = src.values(d, rad)
            if self.loops is not None:
                self.loops.msg_fwd(i, j, W.contiguous(), h, m)
                continue
            m.index_add_(0, i, W * h.index_select(0, j))
            m.index_add_(0, j, W * h.index_select(0, i))
        return m

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        src = self._sources[1][t]
        gh = torch.zeros_like(h)
        gpos = torch.zeros_like(self.pos)
        h, gm = h.contiguous(), gm.contiguous()
        if self.loops is not None:
            pos = self.pos.contiguous()
            if isinstance(src, TableFilter):
                self.loops.table_bwd(src, self.seg, *self._intervals_of(src), self.i, self.j, self.d, h, gm, pos,
                                     gh, gpos)
                return gh, gpos
            for i, j, _, d, rad in self._chunks(src):
                W, dW = src.values_and_derivative(d, rad)
                self.loops.msg_bwd(i, j, W.contiguous(), dW.contiguous(), h, gm, pos, d, gh, gpos)
            return gh, gpos
        for i, j, rij, d, rad in self._chunks(src, with_rij=True):
            W, dW = src.values_and_derivative(d, rad)
            gm_i, gm_j = gm.index_select(0, i), gm.index_select(0, j)
            h_i, h_j = h.index_select(0, i), h.index_select(0, j)
            gh.index_add_(0, j, W * gm_i)
            gh.index_add_(0, i, W * gm_j)
            dd = ((gm_i * h_j + gm_j * h_i) * dW).sum(-1)     # dE/dd of the unordered pair
            v = rij * (dd / d).unsqueeze(-1)                  # dE/dr_i for this pair
            gpos.index_add_(0, i, v)
            gpos.index_add_(0, j, -v)
        return gh, gpos
