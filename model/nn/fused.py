"""Energies and exact forces of CGSchNet without autograd: the fused backends' driver.

The network's node-level part (embedding, ``lin1``, ``lin2``, ``lin``, output MLP; all ``[R*N, H]``
tensors) runs here in PyTorch with a hand-written backward. The edge-level part -- distances, basis,
filter network, filter x features, reduction -- is delegated to an *edge engine* with two calls per block:

* ``aggregate(t, h) -> m``: ``m_i = sum_j W^t_ij * h_j``;
* ``backward(t, h, gm) -> (gh, grad_pos)``: ``gh_j = sum_i W^t_ij * gm_i`` (the same aggregation, the
  filter being symmetric) and ``dE/dr`` through the distance dependence of ``W^t`` (both cosine envelopes
  included), given ``gm = dE/dm``. The filters are recomputed, never stored (FlashAttention-style).

Engines: :class:`TorchPairEngine` (``backend="torch"``: a half pair list with a Verlet skin, edges in
chunks so peak memory stays bounded, reductions by ``index_add_`` on CPU, which is sequential and
deterministic) and the Triton tile engine in :mod:`flashschnet.ops.fused` (``backend="triton"``).

Node-level backward, per block ``x' = x + tanh(m L2^T + b2) L^T + b`` with ``h = x L1^T``::

    ga = gx' L;  gv = ga (1 - a^2);  gm = gv L2;  (gh, gpos) = engine.backward(t, h, gm);  gx = gx' + gh L1
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from ..errors import InputError
from ..neighbors import VerletList
from .quant import dequantize_weight


@dataclass
class BasisSpec:
    """The radial basis and the two envelopes (model length unit)."""

    kind: str                 # "gaussian" | "expnormal"
    centers: torch.Tensor     # gaussian: offset [K]; expnormal: means [K]
    widths: torch.Tensor      # gaussian: coeff [] (negative); expnormal: betas [K]
    alpha: float              # expnormal only
    lower: float              # basis cutoff_lower (expnormal uses it)
    rbf_env: bool             # cosine envelope on the basis
    rc_rbf: float
    filt_env: bool            # cosine envelope on the filter
    rc_filt: float
    rc_graph: float


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


@dataclass
class FilterWeights:
    """One block's filter network. ``A1``/``A2`` are the weights computed with (dequantized for a
    quantized model); ``A1q``/``A1s``, ``A2q``/``A2s`` the stored 16-bit values and float32 scales (None
    unless quantized), which the Triton kernels load instead."""

    A1: torch.Tensor   # [F, K]
    a1: torch.Tensor   # [F]
    A2: torch.Tensor   # [F, F]
    A1q: Optional[torch.Tensor] = None   # [F, K] float16 / bfloat16
    A1s: Optional[torch.Tensor] = None   # [F] float32
    A2q: Optional[torch.Tensor] = None   # [F, F]
    A2s: Optional[torch.Tensor] = None   # [F]


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


# ----------------------------------------------------------------------------------------------- driver


@dataclass
class NodeWeights:
    embedding: torch.Tensor                       # [types, H]
    blocks: List[Dict[str, torch.Tensor]]         # L1 [F,H], L2 [H,F], b2 [H], L [H,H], b [H]
    out: List[Tuple[torch.Tensor, Optional[torch.Tensor]]]   # output MLP layers (W, c); last c is None


def energy_forces_fused(weights: NodeWeights, positions: torch.Tensor, bead_types: torch.Tensor,
                        engine) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` (model units) with a hand-written backward.

    ``engine`` provides ``prepare``, ``aggregate`` and ``backward`` (see the module docstring).
    """
    R, N = positions.shape[0], positions.shape[1]
    engine.prepare(positions)
    x = weights.embedding.index_select(0, bead_types).repeat(R, 1)
    saved = []
    for t, blk in enumerate(weights.blocks):
        h = x @ blk["L1"].t()
        m = engine.aggregate(t, h)
        a = torch.tanh(torch.addmm(blk["b2"], m, blk["L2"].t()))
        x = x + torch.addmm(blk["b"], a, blk["L"].t())
        saved.append((h, a))
    zs = []
    z = x
    for W, c in weights.out[:-1]:
        z = torch.tanh(torch.addmm(c, z, W.t()))
        zs.append(z)
    W_last, _ = weights.out[-1]
    y = z @ W_last.t()                                       # [M, 1]
    energy = y.reshape(R, N).sum(1)
    # backward: dE/dy = 1
    g = W_last.expand(R * N, W_last.shape[1]).clone()        # dE/dz_last
    for (W, _), z in zip(reversed(weights.out[:-1]), reversed(zs)):
        g = (g * (1.0 - z * z)) @ W
    gx = g
    gpos = torch.zeros(R * N, 3, dtype=positions.dtype, device=positions.device)
    for t in range(len(weights.blocks) - 1, -1, -1):
        blk = weights.blocks[t]
        h, a = saved[t]
        gv = (gx @ blk["L"]) * (1.0 - a * a)
        gm = gv @ blk["L2"]
        gh, gp = engine.backward(t, h, gm)
        gpos = gpos + gp
        gx = gx + gh @ blk["L1"]
    return energy, (-gpos).reshape(R, N, 3)


def unpack_params(params: List[torch.Tensor], ints: List[int], floats: List[float],
                  with_filters: bool = True) -> Tuple[NodeWeights, BasisSpec, List[FilterWeights]]:
    """The fused layout from the packed weights of :meth:`CGSchNet.fused_params` and the model's
    ``fused_ints`` / ``fused_floats`` (see :mod:`flashschnet.ops.fused` for the order). Quantized weights
    (``ints[5] == 1``) are dequantized into the dtype of the embedding (the model's dtype).
    ``with_filters=False`` skips the filter networks (returns an empty list; the per-step call, whose
    engine holds its own filters)."""
    n_blocks, n_hidden, kind, rbf_env, filt_env, quantized = ints
    alpha, lower, rc_rbf, rc_filt, rc_graph, _skin = floats
    emb, centers, widths = params[0], params[1], params[2]
    dt = emb.dtype
    k = 3

    def weight(needed: bool = True):
        nonlocal k
        if quantized:
            q, s = params[k], params[k + 1]
            k += 2
            return (dequantize_weight(q, s, dt) if needed else None), q, s
        k += 1
        return params[k - 1], None, None

    def take():
        nonlocal k
        k += 1
        return params[k - 1]

    blocks, filters = [], []
    for _ in range(n_blocks):
        blocks.append({"L1": take(), "L2": take(), "b2": take(), "L": take(), "b": take()})
        A1, A1q, A1s = weight(with_filters)
        a1 = take()
        A2, A2q, A2s = weight(with_filters)
        if with_filters:
            filters.append(FilterWeights(A1=A1, a1=a1, A2=A2, A1q=A1q, A1s=A1s, A2q=A2q, A2s=A2s))
    out = []
    for _ in range(n_hidden):
        W = weight()[0]
        out.append((W, take()))
    out.append((weight()[0], None))
    basis = BasisSpec(kind="gaussian" if kind == 0 else "expnormal", centers=centers, widths=widths, alpha=alpha,
                      lower=lower, rbf_env=bool(rbf_env), rc_rbf=rc_rbf, filt_env=bool(filt_env), rc_filt=rc_filt,
                      rc_graph=rc_graph)
    return NodeWeights(embedding=emb, blocks=blocks, out=out), basis, filters


def unpack(model) -> Tuple[NodeWeights, BasisSpec, List[FilterWeights]]:
    """The fused layout of a :class:`~flashschnet.nn.schnet.CGSchNet`, through the same packing the
    ``flashschnet::energy_forces`` op receives. Raises :class:`InputError` for configs the fused backends
    do not implement."""
    from .schnet import fused_unsupported_reason   # late: schnet imports this module's users

    reason = fused_unsupported_reason(model.config)
    if reason:
        raise InputError(f"{reason}; use backend='reference'")
    return unpack_params(model.fused_params(), model.fused_ints, model.fused_floats)
