"""Launchers of the fused Triton CFConv kernels (:mod:`flashschnet.kernels.cfconv`), as ``torch.library``
custom ops (with fake kernels, so they trace). :class:`~flashschnet.fused.triton_engine.TritonTileEngine` calls
them; the plain-PyTorch references they are tested against live beside the tests.

Design. Beads of each replica are cut into tiles of ``B`` consecutive beads (``T = ceil(N / B)`` tiles,
padding beads masked out), and :func:`flashschnet.neighbors.tile_pairs` lists the tile pairs ``(r, I, J)``,
``I <= J``, that can hold a bead pair within the graph cutoff, sorted by destination tile (CSR ``row_ptr``)
with the off-diagonal entries also sorted by source tile (the transposed CSR ``col_perm``/``col_ptr``).
One program per destination tile walks its CSR row; for each tile pair it computes the distances, the
radial basis, the filter MLP and the filter ``W`` [B*B, F] entirely in registers (no per-edge tensor is
ever written to memory) and uses each filter for both directions: the row side (``m_i += W_ij h_j``) is
accumulated in the program and written to a per-tile partial ``rowbuf[g]``, the column side
(``m_j += W_ij h_i``, off-diagonal tile pairs only) is written to a per-tile-pair partial ``colbuf[q]``.
A second kernel sums, per tile, its row partial and its column partials in the transposed-CSR order. All
sums have a fixed order and nothing uses atomics, so repeated runs agree bitwise. The position gradient
(``cfconv_bwd_pos``) has the same structure with width-3 partials; the feature gradient of the
aggregation is ``cfconv_fwd`` applied to ``dE/dm`` since ``W_ij = W_ji``.

Basis parameters, one form for both bases: ``e_k = exp(coeffs_k * (z - offsets_k)^2) * Crbf(d)`` with
``z = d`` for ``basis="gaussian"`` (``offsets`` = the centres, ``coeffs`` = ``coeff`` repeated K times) and
``z = exp(alpha (basis_lower - d))`` for ``basis="expnormal"`` (``offsets`` = ``means``, ``coeffs`` =
``-betas``); :func:`basis_coeffs` converts. The envelopes ignore ``basis_lower`` (``0.5 (cos(pi d/rc)+1)``).
``Crbf`` is the cosine envelope with radius ``rc_rbf`` if ``rbf_env`` else 1; the filter envelope ``Cf``
likewise with ``rc_f``/``filt_env``. Filter: ``W = tanh(e A1^T + a1) A2^T * Cf``.

Outputs and partial buffers come from :func:`_empty` (uninitialised memory); the tests replace it by a
NaN-filling version to prove that the kernels write every element.
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

import torch

_BASES = {"gaussian": 0, "expnormal": 1}


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_available() -> bool:
    """True when Triton imports and kernels can run: on a CUDA device, or anywhere under TRITON_INTERPRET=1."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return _interpret() or torch.cuda.is_available()


def _kernels():
    from ..kernels import cfconv  # imported late: TRITON_INTERPRET must be set before triton is imported

    return cfconv


def _pow2(n: int, least: int = 16) -> int:
    p = least
    while p < n:
        p *= 2
    return p


def _empty(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An uninitialised output or partial buffer (every element is written by a kernel)."""
    return torch.empty(shape, dtype=dtype or like.dtype, device=like.device)


def _check_device(t: torch.Tensor) -> None:
    if not triton_available():
        raise RuntimeError("flashschnet: Triton kernels need triton and a CUDA device (or TRITON_INTERPRET=1)")
    if not t.is_cuda and not _interpret():
        raise RuntimeError("flashschnet: Triton kernels run on CUDA tensors (CPU only under TRITON_INTERPRET=1)")


def _dtype(pos: torch.Tensor) -> torch.dtype:
    if pos.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"flashschnet: positions must be float32 or float64, got {pos.dtype}")
    return pos.dtype


def _basis_args(offsets, coeffs, basis: str, dtype, device) -> Tuple[torch.Tensor, torch.Tensor, int, int, int]:
    if basis not in _BASES:
        raise ValueError(f"flashschnet: unknown basis {basis!r} (known: {', '.join(_BASES)})")
    K = int(offsets.shape[0])
    if tuple(coeffs.shape) != (K,):
        raise ValueError(f"flashschnet: coeffs must have shape [{K}], got {tuple(coeffs.shape)}")
    KP = _pow2(K)
    mu = torch.zeros(KP, dtype=dtype, device=device)
    cf = torch.zeros(KP, dtype=dtype, device=device)
    mu[:K] = offsets.to(dtype)
    cf[:K] = coeffs.to(dtype)
    return mu, cf, K, KP, _BASES[basis]


def _scalars(rc_graph, rc_rbf, rc_f, alpha, lower, dtype, device) -> torch.Tensor:
    return torch.tensor([rc_graph, rc_rbf, rc_f, alpha, lower], dtype=dtype, device=device)


def _filter_args(A1, a1, A2, K, KP, dtype, A1_scale=None, A2_scale=None):
    """Zero-padded filter weights ``A1 [FP, KP]``, ``a1 [FP]``, ``A2 [FP, FP]`` and scales ``[FP]``.
    Unquantized: weights in the compute dtype, the scales a dummy. Quantized (scales given): ``A1``/``A2``
    stay 16-bit, the scales come in the compute dtype."""
    F = int(A1.shape[0])
    if tuple(A1.shape) != (F, K) or tuple(a1.shape) != (F,) or tuple(A2.shape) != (F, F):
        raise ValueError(f"flashschnet: filter weights must be A1 [F, K={K}], a1 [F], A2 [F, F]; got "
                         f"{tuple(A1.shape)}, {tuple(a1.shape)}, {tuple(A2.shape)}")
    quant = A1_scale is not None or A2_scale is not None
    if quant:
        if A1_scale is None or A2_scale is None:
            raise ValueError("flashschnet: quantized filter weights need both A1_scale and A2_scale")
        if A1.dtype not in (torch.float16, torch.bfloat16) or A2.dtype != A1.dtype:
            raise ValueError(f"flashschnet: quantized A1/A2 must both be float16 or bfloat16, got {A1.dtype}, {A2.dtype}")
        if tuple(A1_scale.shape) != (F,) or tuple(A2_scale.shape) != (F,):
            raise ValueError(f"flashschnet: A1_scale and A2_scale must have shape [F={F}]")
    wdtype = A1.dtype if quant else dtype
    FP = _pow2(F)
    A1p = torch.zeros(FP, KP, dtype=wdtype, device=A1.device)
    a1p = torch.zeros(FP, dtype=dtype, device=A1.device)
    A2p = torch.zeros(FP, FP, dtype=wdtype, device=A1.device)
    A1p[:F, :K] = A1.to(wdtype)
    a1p[:F] = a1.to(dtype)
    A2p[:F, :F] = A2.to(wdtype)
    if quant:
        s1 = torch.zeros(FP, dtype=dtype, device=A1.device)
        s2 = torch.zeros(FP, dtype=dtype, device=A1.device)
        s1[:F] = A1_scale.to(dtype)
        s2[:F] = A2_scale.to(dtype)
    else:
        s1 = s2 = a1p
    return A1p, a1p, A2p, s1, s2, F, FP, quant


def _check_tiles(pos, pairs, row_ptr, col_perm, col_ptr, n_tiles, block):
    R, N = int(pos.shape[0]), int(pos.shape[1])
    if pos.dim() != 3 or pos.shape[2] != 3:
        raise ValueError(f"flashschnet: positions must be [R, N, 3], got {tuple(pos.shape)}")
    if n_tiles != (N + block - 1) // block:
        raise ValueError(f"flashschnet: n_tiles={n_tiles} does not match N={N}, block={block}")
    if block < 1 or block & (block - 1):
        raise ValueError(f"flashschnet: block must be a power of two, got {block}")
    if tuple(row_ptr.shape) != (R * n_tiles + 1,) or tuple(col_ptr.shape) != (R * n_tiles + 1,):
        raise ValueError("flashschnet: row_ptr/col_ptr must have R*T+1 entries (tile list of other positions?)")
    if pairs.dim() != 2 or pairs.shape[1] != 3:
        raise ValueError(f"flashschnet: pairs must be [Q, 3], got {tuple(pairs.shape)}")
    return R, N


def basis_coeffs(kind: str, centers: torch.Tensor, widths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(offsets, coeffs)`` of the launchers from mlcg buffers: gaussian ``(offset [K], coeff [])``,
    expnormal ``(means [K], betas [K])``."""
    K = int(centers.shape[0])
    if kind == "gaussian":
        return centers, widths.reshape(-1).expand(K).clone() if widths.numel() == 1 else widths
    if kind == "expnormal":
        return centers, -widths
    raise ValueError(f"flashschnet: unknown basis {kind!r} (known: {', '.join(_BASES)})")


def tile_args(tiles) -> tuple:
    """``(pairs, row_ptr, col_perm, col_ptr, n_tiles, block)`` of a :class:`~flashschnet.neighbors.TileList`,
    in the order the launchers take them."""
    return (tiles.pairs, tiles.row_ptr, tiles.col_perm, tiles.col_ptr, int(tiles.n_tiles), int(tiles.block))


def _i32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int32).contiguous()


# ------------------------------------------------------------------------------------------ cfconv


def _reduce(k, rowbuf, colbuf, col_perm, col_ptr, out, N, T, B, W, n_prog):
    k._tile_reduce_kernel[(n_prog,)](rowbuf, colbuf, col_perm, col_ptr, out, N, T, B=B, W=W, WP=_pow2(W, 1))


def _tiled(kernel: str, width, pos, feats, pairs, row_ptr, col_perm, col_ptr, n_tiles, block, A1, a1, A2,
           offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env, basis_lower,
           A1_scale=None, A2_scale=None) -> torch.Tensor:
    """The common launcher of the tiled kernels: checks, padded weights, partial buffers, the kernel over
    destination tiles, then the fixed-order reduction. ``feats`` = [(name, tensor [R, N, F])]; the output
    has width ``width`` (None: F)."""
    dtype = _dtype(pos)
    _check_device(pos)
    k = _kernels()
    R, N = _check_tiles(pos, pairs, row_ptr, col_perm, col_ptr, n_tiles, block)
    T, B = int(n_tiles), int(block)
    mu, cf, K, KP, BASIS = _basis_args(offsets, coeffs, basis, dtype, pos.device)
    A1p, a1p, A2p, s1, s2, F, FP, quant = _filter_args(A1, a1, A2, K, KP, dtype, A1_scale, A2_scale)
    for name, t in feats:
        if tuple(t.shape) != (R, N, F):
            raise ValueError(f"flashschnet: {name} must be [R={R}, N={N}, F={F}], got {tuple(t.shape)}")
    scal = _scalars(rc_graph, rc_rbf, rc_f, alpha, basis_lower, dtype, pos.device)
    p = pos.contiguous()
    fs = [t.to(dtype).contiguous() for _, t in feats]
    W = F if width is None else int(width)
    Q = int(pairs.shape[0])
    out = _empty((R, N, W), p)
    rowbuf = _empty((R * T, B, W), p)
    colbuf = _empty((max(Q, 1), B, W), p)
    if R * T == 0:
        return out
    pr, rp, cp, cptr = _i32(pairs), _i32(row_ptr), _i32(col_perm), _i32(col_ptr)
    getattr(k, kernel)[(R * T,)](
        p, *fs, pr, rp, rowbuf, colbuf, A1p, a1p, A2p, s1, s2, mu, cf, scal, N, T,
        B=B, K=K, KP=KP, F=F, FP=FP, BASIS=BASIS, RBF_ENV=bool(rbf_env), FILT_ENV=bool(filt_env), QUANT=quant)
    _reduce(k, rowbuf, colbuf, cp, cptr, out, N, T, B, W, R * T)
    return out


@torch.library.custom_op("flashschnet::cfconv_fwd", mutates_args=())
def cfconv_fwd(pos: torch.Tensor, h: torch.Tensor, pairs: torch.Tensor, row_ptr: torch.Tensor,
               col_perm: torch.Tensor, col_ptr: torch.Tensor, n_tiles: int, block: int,
               A1: torch.Tensor, a1: torch.Tensor, A2: torch.Tensor, offsets: torch.Tensor, coeffs: torch.Tensor,
               rc_graph: float, rc_rbf: float, rc_f: float, basis: str = "gaussian", alpha: float = 0.0,
               rbf_env: bool = True, filt_env: bool = True, basis_lower: float = 0.0,
               A1_scale: Optional[torch.Tensor] = None, A2_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``m_i = sum_{j != i, d_ij < rc_graph, same replica} W(d_ij) * h_j`` -> m [R, N, F].

    pos [R, N, 3], h [R, N, F]; the tile list (built for these positions, or within its skin) as
    ``tile_args(tiles)``; A1 [F, K], a1 [F], A2 [F, F]; basis ``offsets``/``coeffs`` [K] (module docstring).
    Channel-wise 16-bit weights: A1, A2 float16/bfloat16 with ``A1_scale``, ``A2_scale`` [F] (float32); the
    weights used are ``A.to(dtype) * scale[:, None]`` (:mod:`flashschnet.nn.quant`).
    """
    return _tiled("_cfconv_fwd_kernel", None, pos, [("h", h)], pairs, row_ptr, col_perm, col_ptr, n_tiles, block,
                  A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env, basis_lower,
                  A1_scale, A2_scale)


@cfconv_fwd.register_fake
def _(pos, h, pairs, row_ptr, col_perm, col_ptr, n_tiles, block, A1, a1, A2, offsets, coeffs,
      rc_graph, rc_rbf, rc_f, basis="gaussian", alpha=0.0, rbf_env=True, filt_env=True, basis_lower=0.0,
      A1_scale=None, A2_scale=None):
    return pos.new_empty((pos.shape[0], pos.shape[1], A1.shape[0]))


@torch.library.custom_op("flashschnet::cfconv_bwd_pos", mutates_args=())
def cfconv_bwd_pos(pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor, pairs: torch.Tensor,
                   row_ptr: torch.Tensor, col_perm: torch.Tensor, col_ptr: torch.Tensor, n_tiles: int,
                   block: int, A1: torch.Tensor, a1: torch.Tensor, A2: torch.Tensor, offsets: torch.Tensor,
                   coeffs: torch.Tensor, rc_graph: float, rc_rbf: float, rc_f: float, basis: str = "gaussian",
                   alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
                   basis_lower: float = 0.0, A1_scale: Optional[torch.Tensor] = None,
                   A2_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``dE/dpos`` [R, N, 3] through the distance dependence of the filters, given ``gm = dE/dm``
    [R, N, F] (h and gm held fixed). Other arguments as :func:`cfconv_fwd`."""
    return _tiled("_cfconv_bwd_pos_kernel", 3, pos, [("h", h), ("gm", gm)], pairs, row_ptr, col_perm, col_ptr,
                  n_tiles, block, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env,
                  filt_env, basis_lower, A1_scale, A2_scale)


@cfconv_bwd_pos.register_fake
def _(pos, h, gm, pairs, row_ptr, col_perm, col_ptr, n_tiles, block, A1, a1, A2, offsets, coeffs,
      rc_graph, rc_rbf, rc_f, basis="gaussian", alpha=0.0, rbf_env=True, filt_env=True, basis_lower=0.0,
      A1_scale=None, A2_scale=None):
    return pos.new_empty(pos.shape)
