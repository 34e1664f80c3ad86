"""Plain-PyTorch references of the fused CFConv kernels (same signatures as the test-only custom ops of
:mod:`helpers.standalone_ops`), the oracle of the kernel tests.

Dense and simple: all ordered bead pairs of each replica with ``d < rc_graph`` are built from the positions
(so the kernels' tile culling is checked too), the basis and the filter are materialised per pair, and
messages are summed with ``index_add``. The gradients are taken by autograd of ``sum(gm * m)`` -- an
independent check of the hand-derived backward kernel.

``dot`` emulates the kernels' matrix-product precision the way plain PyTorch would do the same products:
"ieee" exact in the compute dtype; "bf16"/"fp16" operands rounded to the 16-bit type and products accumulated
in float32; "tf32" operands rounded to tf32's 10-bit mantissa. :func:`tile_flags_ref` is the reference of the
tile-flag kernel. :func:`cfconv_table_fwd_ref` / :func:`cfconv_table_bwd_ref` are those of the tabulated-filter
ops (:mod:`helpers.standalone_ops`), on :func:`flashschnet.nn.table.table_lookup`.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch

_D16 = {"bf16": torch.bfloat16, "fp16": torch.float16}


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


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest tf32 value (10 explicit mantissa bits), as float32."""
    x = x.float().contiguous()
    i = (x.view(torch.int32) + 0x1000) & ~0x1FFF
    return torch.where(torch.isfinite(x), i.view(torch.float32), x)     # inf and NaN stay what they are


def matmul(a: torch.Tensor, w: torch.Tensor, dot: str = "ieee") -> torch.Tensor:
    """``a @ w`` at the precision ``dot`` (module docstring); the result in ``a``'s dtype."""
    if dot == "ieee":
        return a @ w.to(a.dtype)
    if dot == "tf32":
        return (round_tf32(a) @ round_tf32(w)).to(a.dtype)
    d16 = _D16[dot]
    return (a.to(d16).float() @ w.to(d16).float()).to(a.dtype)


def _dense_pairs(pos: torch.Tensor, rc_graph: float):
    """Flattened (dst i, src j) of all ordered pairs i != j, same replica, d < rc_graph."""
    N = pos.shape[1]
    p = pos.detach()
    d = (p[:, :, None, :] - p[:, None, :, :]).norm(dim=-1)
    eye = torch.eye(N, dtype=torch.bool, device=p.device)
    r, i, j = ((d < rc_graph) & ~eye).nonzero(as_tuple=True)
    return r * N + i, r * N + j


def _weights(A, scale, dt):
    """The weight matrix as the products see it: quantized -> the 16-bit values (the scale is applied to
    the product's output, as the kernels do); else the weight itself."""
    if scale is None:
        return A.to(dt), None
    return A, scale.to(dt)


def _aggregate(pos, h, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env,
               lower=0.0, dot="ieee", A1_scale=None, A2_scale=None):
    R, N, F = h.shape
    dst, src = _dense_pairs(pos, rc_graph)
    p = pos.reshape(-1, 3)
    d = (p[src] - p[dst]).norm(dim=-1)
    e = _basis(d, offsets, coeffs, rc_rbf, basis, alpha, rbf_env, lower)
    dt = pos.dtype
    W1, s1 = _weights(A1, A1_scale, dt)
    W2, s2 = _weights(A2, A2_scale, dt)
    u = matmul(e, W1.T, dot)
    if s1 is not None:
        u = u * s1
    y = matmul(torch.tanh(u + a1.to(dt)), W2.T, dot)
    if s2 is not None:
        y = y * s2
    W = y * _envelope(d, rc_f, filt_env)[:, None]
    hf = h.reshape(-1, F).to(dt)
    m = torch.zeros(R * N, F, dtype=dt, device=pos.device).index_add(0, dst, W * hf[src])
    return m.reshape(R, N, F)


def cfconv_fwd_ref(pos, h, A1, a1, A2, offsets, coeffs, rc_graph: float, rc_rbf: float, rc_f: float,
                   basis: str = "gaussian", alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
                   basis_lower: float = 0.0, dot: str = "ieee", A1_scale=None, A2_scale=None,
                   skin: float = 0.0) -> torch.Tensor:
    with torch.no_grad():
        return _aggregate(pos, h, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env,
                          filt_env, basis_lower, "ieee" if dot == "auto" else dot, A1_scale, A2_scale)


def cfconv_bwd_ref(pos, h, gm, A1, a1, A2, offsets, coeffs, rc_graph: float, rc_rbf: float, rc_f: float,
                   basis: str = "gaussian", alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
                   basis_lower: float = 0.0, dot: str = "ieee", A1_scale=None, A2_scale=None,
                   skin: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(dE/dh, dE/dpos)`` of ``E = sum(gm * cfconv_fwd(pos, h))`` by autograd."""
    with torch.enable_grad():
        p = pos.detach().clone().requires_grad_(True)
        hh = h.detach().clone().requires_grad_(True)
        m = _aggregate(p, hh, A1.detach(), a1.detach(), A2.detach(), offsets, coeffs, rc_graph, rc_rbf, rc_f, basis,
                       alpha, rbf_env, filt_env, basis_lower, "ieee" if dot == "auto" else dot, A1_scale, A2_scale)
        gh, g = torch.autograd.grad((gm.detach().to(m.dtype) * m).sum(), (hh, p), allow_unused=True)
    return (torch.zeros_like(h) if gh is None else gh), (torch.zeros_like(pos) if g is None else g)


def _aggregate_table(pos, h, table, scale, r_end, rc_graph):
    from flashschnet.nn.table import table_lookup

    R, N, F = h.shape
    dst, src = _dense_pairs(pos, rc_graph)
    p = pos.reshape(-1, 3)
    d = (p[src] - p[dst]).norm(dim=-1)
    W, _ = table_lookup(d, table, scale, r_end, need_derivative=False)
    hf = h.reshape(-1, F).to(pos.dtype)
    m = torch.zeros(R * N, F, dtype=pos.dtype, device=pos.device).index_add(0, dst, W * hf[src])
    return m.reshape(R, N, F)


def cfconv_table_fwd_ref(pos, h, table, scale, r_end: float, rc_graph: float, skin: float = 0.0) -> torch.Tensor:
    """``m_i = sum_j W(d_ij) h_j`` over every ordered pair ``i != j`` of a replica with ``d < rc_graph``, ``W``
    from :func:`~flashschnet.nn.table.table_lookup` (zero for ``d >= r_end``)."""
    with torch.no_grad():
        return _aggregate_table(pos, h, table, scale, r_end, rc_graph)


def cfconv_table_bwd_ref(pos, h, gm, table, scale, r_end: float, rc_graph: float,
                         skin: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(dE/dh, dE/dpos)`` of ``E = sum(gm * cfconv_table_fwd(pos, h))`` by autograd (through the Hermite
    polynomials' ``t``: independent of the kernels' hand-written ``dW/dd``)."""
    with torch.enable_grad():
        p = pos.detach().clone().requires_grad_(True)
        hh = h.detach().clone().requires_grad_(True)
        m = _aggregate_table(p, hh, table, scale, r_end, rc_graph)
        gh, g = torch.autograd.grad((gm.detach().to(m.dtype) * m).sum(), (hh, p), allow_unused=True)
    return (torch.zeros_like(h) if gh is None else gh), (torch.zeros_like(pos) if g is None else g)


def tile_flags_ref(pos: torch.Tensor, radius: float, block: int) -> torch.Tensor:
    """``int8 [R, S]``: slot ``I*T - I*(I-1)/2 + (J - I)`` of tile pair ``I <= J`` is 1 when the tiles'
    bounding spheres (centre = mean of the tile's beads) come within ``radius``."""
    R, N = pos.shape[0], pos.shape[1]
    T = (N + block - 1) // block
    flags = torch.zeros(R, T * (T + 1) // 2, dtype=torch.int8)
    for r in range(R):
        tiles = [pos[r, I * block:(I + 1) * block].double() for I in range(T)]
        cen = [t.mean(0) for t in tiles]
        rad = [(t - c).norm(dim=-1).max() for t, c in zip(tiles, cen)]
        for I in range(T):
            for J in range(I, T):
                gap = (cen[I] - cen[J]).norm() - rad[I] - rad[J]
                flags[r, I * T - I * (I - 1) // 2 + (J - I)] = int(bool(gap < radius))
    return flags


def work_list_ref(flags: torch.Tensor, T: int) -> Tuple[list, list]:
    """The work list of tile-pair flags ``[R, S]``: per replica the active slots' ``I * 65536 + J`` in slot order,
    and their counts (the reference of the flag kernel's compaction)."""
    pairs = [(I, J) for I in range(T) for J in range(I, T)]           # slot order
    lists = [[I * 65536 + J for (I, J), f in zip(pairs, row.tolist()) if f] for row in flags]
    return lists, [len(x) for x in lists]
