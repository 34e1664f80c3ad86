"""Test-only custom ops around one call of each CFConv kernel pair: ``flashschnet::cfconv_fwd`` /
``cfconv_bwd`` (the exact filter network, :mod:`flashschnet.kernels.cfconv`) and ``flashschnet::cfconv_table_fwd``
/ ``cfconv_table_bwd`` (the tabulated filter, :mod:`flashschnet.kernels.cfconv_table`), with fake kernels so they
trace, and :func:`tile_flags` (a fresh flag build: flags and work list). Each call builds its plans and a
workspace (:mod:`flashschnet.fused.plans`, :mod:`flashschnet.fused.workspace`) and runs one CFConv kernel and the
plain reductions of the triton engine's unfused path (:func:`flashschnet.fused.triton_engine.aggregate`,
:func:`~flashschnet.fused.triton_engine.backward`, on the filter strategies
:class:`~flashschnet.fused.triton_engine.ExactTileFilter`, :class:`~flashschnet.fused.triton_engine.TableTileFilter`);
the package registers none of them (an engine plans once and launches per step). ``programs`` (a module
variable, None: the launchers' default) sets the CFConv kernels' persistent grid.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from flashschnet.fused.launches import check_device, compute_dtype
from flashschnet.fused.plans import plan_basis, plan_filter, plan_table, resolve_dot
from flashschnet.fused.tile_flags import update_tiles
from flashschnet.fused.triton_engine import ExactTileFilter, TableTileFilter, aggregate, backward, padded
from flashschnet.fused.workspace import BLOCK, Workspace

#: the CFConv kernels' persistent programs in these ops (None: the launchers' default; tests set it)
programs = None


def _positions(pos):
    dtype = compute_dtype(pos)
    check_device(pos)
    if pos.dim() != 3 or pos.shape[2] != 3:
        raise ValueError(f"flashschnet: positions must be [R, N, 3], got {tuple(pos.shape)}")
    return dtype, int(pos.shape[0]), int(pos.shape[1])


def _features(feats, R, N, F, FP, dtype):
    for name, t in feats:
        if tuple(t.shape) != (R, N, F):
            raise ValueError(f"flashschnet: {name} must be [R={R}, N={N}, F={F}], got {tuple(t.shape)}")
    return [padded(t.to(dtype), R, N, FP) for _, t in feats]


def _workspace(pos, R, N, filt, dtype, radius, skin):
    if not (math.isfinite(skin) and skin >= 0.0):
        raise ValueError(f"flashschnet: skin must be a finite length >= 0, got {skin}")
    ws = Workspace(R, N, filt.FP, dtype, pos.device, NP=filt.NP)
    update_tiles(ws, pos.contiguous(), radius, skin)
    return ws


def _exact(pos, feats, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env,
           basis_lower, dot, A1_scale, A2_scale, skin):
    dtype, R, N = _positions(pos)
    bp = plan_basis(offsets, coeffs, basis, alpha, basis_lower, rc_graph, rc_rbf, rc_f, rbf_env, filt_env, dtype,
                    pos.device)
    quant_dtype = A1.dtype if A1_scale is not None else None
    fp = plan_filter(A1, a1, A2, bp.KP, dtype, resolve_dot(dot, dtype, quant_dtype), A1_scale, A2_scale)
    filt = ExactTileFilter(fp, bp)
    return filt, _workspace(pos, R, N, filt, dtype, rc_graph, skin), _features(feats, R, N, fp.F, fp.FP, dtype)


@torch.library.custom_op("flashschnet::cfconv_fwd", mutates_args=())
def cfconv_fwd(pos: torch.Tensor, h: torch.Tensor, A1: torch.Tensor, a1: torch.Tensor, A2: torch.Tensor,
               offsets: torch.Tensor, coeffs: torch.Tensor, rc_graph: float, rc_rbf: float, rc_f: float,
               basis: str = "gaussian", alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
               basis_lower: float = 0.0, dot: str = "auto", A1_scale: Optional[torch.Tensor] = None,
               A2_scale: Optional[torch.Tensor] = None, skin: float = 0.0) -> torch.Tensor:
    """``m_i = sum_{j != i, d_ij < rc_graph, same replica} W(d_ij) * h_j`` -> m [R, N, F].

    pos [R, N, 3], h [R, N, F]; A1 [F, K], a1 [F], A2 [F, F]; basis ``offsets``/``coeffs`` [K] (see
    :func:`flashschnet.fused.plans.basis_coeffs`); ``dot`` the matrix-product precision
    (:mod:`flashschnet.fused.plans`). Channel-wise 16-bit weights: A1, A2 float16/bfloat16 with ``A1_scale``,
    ``A2_scale`` [F]; the weights used are ``A.to(dtype) * scale[:, None]`` (:mod:`flashschnet.nn.quant`).
    ``skin`` widens the tile culling radius (results do not depend on it).
    """
    filt, ws, (hh,) = _exact(pos, [("h", h)], A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha,
                             rbf_env, filt_env, basis_lower, dot, A1_scale, A2_scale, skin)
    return aggregate(filt, ws, hh, programs).clone()


@cfconv_fwd.register_fake
def _(pos, h, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis="gaussian", alpha=0.0, rbf_env=True,
      filt_env=True, basis_lower=0.0, dot="auto", A1_scale=None, A2_scale=None, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], A1.shape[0]))


@torch.library.custom_op("flashschnet::cfconv_bwd", mutates_args=())
def cfconv_bwd(pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor, A1: torch.Tensor, a1: torch.Tensor,
               A2: torch.Tensor, offsets: torch.Tensor, coeffs: torch.Tensor, rc_graph: float, rc_rbf: float,
               rc_f: float, basis: str = "gaussian", alpha: float = 0.0, rbf_env: bool = True,
               filt_env: bool = True, basis_lower: float = 0.0, dot: str = "auto",
               A1_scale: Optional[torch.Tensor] = None, A2_scale: Optional[torch.Tensor] = None,
               skin: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh [R, N, F], dE/dpos [R, N, 3])`` of ``E = sum(gm * cfconv_fwd(pos, h))`` with ``gm`` held fixed:
    ``gh = dE/dh`` and the position gradient through the distance dependence of the filters. Other arguments as
    :func:`cfconv_fwd`."""
    filt, ws, (hh, gg) = _exact(pos, [("h", h), ("gm", gm)], A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f,
                                basis, alpha, rbf_env, filt_env, basis_lower, dot, A1_scale, A2_scale, skin)
    gh, gp = backward(filt, ws, hh, gg, programs)
    return gh.clone(), gp.clone()


@cfconv_bwd.register_fake
def _(pos, h, gm, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis="gaussian", alpha=0.0, rbf_env=True,
      filt_env=True, basis_lower=0.0, dot="auto", A1_scale=None, A2_scale=None, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], A1.shape[0])), pos.new_empty(pos.shape)


def _table(pos, feats, table, scale, r_end, rc_graph, skin):
    dtype, R, N = _positions(pos)
    F = int(table.shape[-1]) if table.dim() == 3 else -1
    tp = plan_table(table, scale, r_end, F, dtype, pos.device, rc_graph)
    filt = TableTileFilter(tp)
    return filt, _workspace(pos, R, N, filt, dtype, tp.cutoff, skin), _features(feats, R, N, F, tp.FP, dtype)


@torch.library.custom_op("flashschnet::cfconv_table_fwd", mutates_args=())
def cfconv_table_fwd(pos: torch.Tensor, h: torch.Tensor, table: torch.Tensor, scale: torch.Tensor, r_end: float,
                     rc_graph: float, skin: float = 0.0) -> torch.Tensor:
    """``m_i = sum_{j != i, d_ij < rc_graph, same replica} W(d_ij) * h_j`` -> m [R, N, F] with the tabulated filter
    ``W`` (:func:`flashschnet.nn.table.table_lookup`: zero for ``d >= r_end``).

    pos [R, N, 3], h [R, N, F]; ``table`` [n, Q, F] (float64/float32/float16/bfloat16), ``scale`` [Q, F];
    ``r_end`` the last knot; ``skin`` widens the tile culling radius (results do not depend on it)."""
    filt, ws, (hh,) = _table(pos, [("h", h)], table, scale, r_end, rc_graph, skin)
    return aggregate(filt, ws, hh, programs).clone()


@cfconv_table_fwd.register_fake
def _(pos, h, table, scale, r_end, rc_graph, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], table.shape[-1]))


@torch.library.custom_op("flashschnet::cfconv_table_bwd", mutates_args=())
def cfconv_table_bwd(pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor, table: torch.Tensor, scale: torch.Tensor,
                     r_end: float, rc_graph: float, skin: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh [R, N, F], dE/dpos [R, N, 3])`` of ``E = sum(gm * cfconv_table_fwd(pos, h))`` with ``gm`` held
    fixed. Other arguments as :func:`cfconv_table_fwd`."""
    filt, ws, (hh, gg) = _table(pos, [("h", h), ("gm", gm)], table, scale, r_end, rc_graph, skin)
    gh, gp = backward(filt, ws, hh, gg, programs)
    return gh.clone(), gp.clone()


@cfconv_table_bwd.register_fake
def _(pos, h, gm, table, scale, r_end, rc_graph, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], table.shape[-1])), pos.new_empty(pos.shape)


def tile_flags(pos: torch.Tensor, cutoff: float, block: int = BLOCK) -> torch.Tensor:
    """The tile-pair flags ``int8 [R, S]`` of positions ``[R, N, 3]`` for radius ``cutoff`` (a fresh build)."""
    return work_list(pos, cutoff, block)[0]


def work_list(pos: torch.Tensor, cutoff: float, block: int = BLOCK):
    """``(flags int8 [R, S], work list int32 [R, S], counts int32 [R])`` of a fresh build for radius ``cutoff``."""
    check_device(pos)
    R, N = int(pos.shape[0]), int(pos.shape[1])
    ws = Workspace(R, N, 32, compute_dtype(pos), pos.device, block)
    update_tiles(ws, pos.contiguous(), cutoff, 0.0)
    return (ws.flags[:R * ws.S].reshape(R, ws.S), ws.worklist[:R * ws.S].reshape(R, ws.S), ws.counts[:R])
