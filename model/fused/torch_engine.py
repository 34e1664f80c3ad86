"""The ``"torch"`` backend's edge engine: a half pair list (``i < j``) with a Verlet skin, edges in chunks.

The engine interface (used by :func:`flashschnet.fused.driver.energy_forces_fused`), two calls per block:

* ``aggregate(t, h) -> m``: ``m_i = sum_j W^t_ij * h_j``;
* ``backward(t, h, gm) -> (gh, grad_pos)``: ``gh_j = sum_i W^t_ij * gm_i`` (the same aggregation, the
  filter being symmetric) and ``dE/dr`` through the distance dependence of ``W^t`` (both cosine envelopes
  included), given ``gm = dE/dm``. The filters are recomputed, never stored (FlashAttention-style).

Each filter is evaluated once per unordered pair and serves both directions; chunks of ``chunk`` pairs keep
peak memory bounded; reductions by ``index_add_`` on CPU are sequential and deterministic.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

from ..neighbors import VerletList
from .layout import BasisSpec, FilterWeights


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


class TorchPairEngine:
    """Edge engine on a half pair list (``i < j``), chunked.

    Parameters
    ----------
    basis : BasisSpec
    filters : list of FilterWeights, one per block
    skin : float
        Verlet skin (model length unit); the list is rebuilt when a bead moved more than ``skin / 2``.
    chunk : int
        Pairs processed at once; peak extra memory is O(chunk * (K + 4F)).
    """

    def __init__(self, basis: BasisSpec, filters: List[FilterWeights], skin: float = 2.0, chunk: int = 2048,
                 verlet: Optional[VerletList] = None):
        self.basis, self.filters, self.chunk = basis, filters, int(chunk)
        self.verlet = verlet if verlet is not None else VerletList(basis.rc_graph, skin)
        self.pos: Optional[torch.Tensor] = None

    def prepare(self, positions: torch.Tensor) -> None:
        R, N = positions.shape[0], positions.shape[1]
        self.pos = positions.reshape(R * N, 3)
        nl = self.verlet.get(positions)
        # Only the pairs inside the graph cutoff go on: the chunks -- and with them every matrix product's
        # shape and every summation order -- are then a function of the positions alone, not of where the
        # Verlet list was last rebuilt, so a run resumed from a checkpoint repeats the uninterrupted run
        # bitwise (and the skin shell is dropped once per step instead of once per block and pass).
        keep = torch.empty(nl.i.shape[0], dtype=torch.bool, device=positions.device)
        for s in range(0, nl.i.shape[0], self.chunk):
            rij = self.pos.index_select(0, nl.i[s:s + self.chunk]) - self.pos.index_select(0, nl.j[s:s + self.chunk])
            keep[s:s + self.chunk] = torch.linalg.vector_norm(rij, dim=-1) < self.basis.rc_graph
        sel = keep.nonzero(as_tuple=True)[0]
        self.i, self.j = nl.i.index_select(0, sel), nl.j.index_select(0, sel)

    def _chunks(self):
        P = self.i.shape[0]
        for s in range(0, P, self.chunk):
            i, j = self.i[s:s + self.chunk], self.j[s:s + self.chunk]
            rij = self.pos.index_select(0, i) - self.pos.index_select(0, j)      # r_i - r_j
            d = torch.linalg.vector_norm(rij, dim=-1)
            keep = d < self.basis.rc_graph
            if not bool(keep.all()):          # drop the skin shell's pairs before the expensive part
                sel = keep.nonzero(as_tuple=True)[0]
                i, j, rij, d, keep = i[sel], j[sel], rij[sel], d[sel], keep[sel]
            yield i, j, rij, d, keep

    def _filter(self, t: int, d: torch.Tensor, keep: torch.Tensor, need_grad: bool):
        f = self.filters[t]
        e, de = basis_and_derivative(d, self.basis)
        s = torch.tanh(torch.addmm(f.a1, e, f.A1.t()))
        y = s @ f.A2.t()
        c, dc = filter_envelope(d, self.basis)
        c = c * keep.to(c.dtype)
        W = y * c.unsqueeze(-1)
        return W, (e, de, s, y, c, dc) if need_grad else None

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        m = torch.zeros_like(h)
        for i, j, _, d, keep in self._chunks():
            W, _ = self._filter(t, d, keep, False)
            m.index_add_(0, i, W * h.index_select(0, j))
            m.index_add_(0, j, W * h.index_select(0, i))
        return m

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        f = self.filters[t]
        gh = torch.zeros_like(h)
        gpos = torch.zeros_like(self.pos)
        for i, j, rij, d, keep in self._chunks():
            W, (e, de, s, y, c, dc) = self._filter(t, d, keep, True)
            gm_i, gm_j = gm.index_select(0, i), gm.index_select(0, j)
            h_i, h_j = h.index_select(0, i), h.index_select(0, j)
            gh.index_add_(0, j, W * gm_i)
            gh.index_add_(0, i, W * gm_j)
            G = gm_i * h_j + gm_j * h_i                      # dE/dW for the unordered pair
            gC = (G * y).sum(-1)
            ds = (G * c.unsqueeze(-1)) @ f.A2
            du = ds * (1.0 - s * s)
            ge = du @ f.A1
            dd = ((ge * de).sum(-1) + gC * dc) * keep.to(d.dtype)
            v = rij * (dd / d).unsqueeze(-1)                 # dE/dr_i for this pair
            gpos.index_add_(0, i, v)
            gpos.index_add_(0, j, -v)
        return gh, gpos
