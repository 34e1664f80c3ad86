"""Plain-PyTorch references of the fused CFConv kernels (same signatures as the launchers of
:mod:`flashschnet.fused.triton_ops`), the oracle of the kernel tests.

Dense and simple: all ordered bead pairs of each replica with ``d < rc_graph`` are built from the positions
(the tile arguments are accepted and ignored, so the tile culling is checked too), the basis and the filter
are materialised per pair, and messages are summed with ``index_add``. The position gradient is taken by
autograd of ``sum(gm * m)`` -- an independent check of the hand-derived backward kernel.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch


def _envelope(d: torch.Tensor, rc: float, on: bool) -> torch.Tensor:
    if not on:
        return torch.ones_like(d)
    return 0.5 * (torch.cos(d * (math.pi / rc)) + 1.0) * (d < rc).to(d.dtype)


def _basis(d, offsets, coeffs, rc_rbf, basis, alpha, rbf_env, lower=0.0):
    if basis == "gaussian":
        z = d
    elif basis == "expnormal":
        z = torch.exp(alpha * (lower - d))
    else:
        raise ValueError(f"unknown basis {basis!r}")
    off = offsets.to(d.dtype)
    cf = coeffs.to(d.dtype)
    return torch.exp(cf * (z[:, None] - off) ** 2) * _envelope(d, rc_rbf, rbf_env)[:, None]


def flash_rbf_ref(pos, src, dst, offsets, coeffs, rc_rbf: float, basis: str = "gaussian", alpha: float = 0.0,
                  rbf_env: bool = True, basis_lower: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    p = pos.reshape(-1, 3)
    d = (p[dst.long()] - p[src.long()]).norm(dim=-1)
    return d, _basis(d, offsets, coeffs, rc_rbf, basis, alpha, rbf_env, basis_lower)


def _dense_pairs(pos: torch.Tensor, rc_graph: float):
    """Flattened (dst i, src j) of all ordered pairs i != j, same replica, d < rc_graph."""
    N = pos.shape[1]
    p = pos.detach()
    d = (p[:, :, None, :] - p[:, None, :, :]).norm(dim=-1)
    eye = torch.eye(N, dtype=torch.bool, device=p.device)
    r, i, j = ((d < rc_graph) & ~eye).nonzero(as_tuple=True)
    return r * N + i, r * N + j


def _weight(A, scale, dt):
    return A.to(dt) if scale is None else A.to(dt) * scale.to(dt)[:, None]


def _aggregate(pos, h, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env,
               lower=0.0, A1_scale=None, A2_scale=None):
    R, N, F = h.shape
    dst, src = _dense_pairs(pos, rc_graph)
    p = pos.reshape(-1, 3)
    d = (p[src] - p[dst]).norm(dim=-1)
    e = _basis(d, offsets, coeffs, rc_rbf, basis, alpha, rbf_env, lower)
    dt = pos.dtype
    W = torch.tanh(e @ _weight(A1, A1_scale, dt).T + a1.to(dt)) @ _weight(A2, A2_scale, dt).T
    W = W * _envelope(d, rc_f, filt_env)[:, None]
    hf = h.reshape(-1, F).to(dt)
    m = torch.zeros(R * N, F, dtype=dt, device=pos.device).index_add(0, dst, W * hf[src])
    return m.reshape(R, N, F)


def cfconv_fwd_ref(pos, h, pairs, row_ptr, col_perm, col_ptr, n_tiles: int, block: int, A1, a1, A2, offsets,
                   coeffs, rc_graph: float, rc_rbf: float, rc_f: float, basis: str = "gaussian",
                   alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
                   basis_lower: float = 0.0, A1_scale=None, A2_scale=None) -> torch.Tensor:
    with torch.no_grad():
        return _aggregate(pos, h, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env,
                          filt_env, basis_lower, A1_scale, A2_scale)


def cfconv_bwd_pos_ref(pos, h, gm, pairs, row_ptr, col_perm, col_ptr, n_tiles: int, block: int, A1, a1, A2,
                       offsets, coeffs, rc_graph: float, rc_rbf: float, rc_f: float, basis: str = "gaussian",
                       alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
                       basis_lower: float = 0.0, A1_scale=None, A2_scale=None) -> torch.Tensor:
    with torch.enable_grad():
        p = pos.detach().clone().requires_grad_(True)
        m = _aggregate(p, h.detach(), A1.detach(), a1.detach(), A2.detach(), offsets, coeffs, rc_graph, rc_rbf,
                       rc_f, basis, alpha, rbf_env, filt_env, basis_lower, A1_scale, A2_scale)
        (g,) = torch.autograd.grad((gm.detach().to(m.dtype) * m).sum(), p, allow_unused=True)
    return torch.zeros_like(pos) if g is None else g
