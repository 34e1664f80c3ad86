"""Launchers of the tabulated-filter CFConv kernels (:mod:`flashschnet.kernels.cfconv_table`; filter
compression, :mod:`flashschnet.nn.table`).

The same three layers as :mod:`flashschnet.fused.triton_ops`, whose :class:`~flashschnet.fused.triton_ops.
Workspace`, tile flags, reduce launches and :func:`~flashschnet.fused.triton_ops._run` are shared:

* a :class:`TablePlan` (:func:`plan_table`) -- one block's table padded to ``FP`` channels in its storage
  dtype (16-bit tables stay 16-bit), its scales and the float scalars as device tensors, built once per engine;
* launches -- :func:`table_fwd_launch` / :func:`table_bwd_launch` (tuples run by ``_run``, compiled ahead of
  time by ``tools/gpu_fit.py`` through :func:`table_step_launches`) and :func:`launch_table_fwd` /
  :func:`launch_table_bwd`, which write the workspace's outputs like :func:`~flashschnet.fused.triton_ops.
  launch_fwd` / :func:`~flashschnet.fused.triton_ops.launch_bwd`: nothing is allocated and nothing read back
  to the host;
* the custom ops :func:`cfconv_table_fwd` / :func:`cfconv_table_bwd` (with fake kernels) for tests and
  standalone use; they build a plan and a workspace per call.

No matrix products: the matmul precision (``dot``) does not apply, and the kernels run in the compute dtype,
float32 or float64, on a GPU as well.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .triton_ops import Workspace, _check_device, _dtype, _run, pow2, reduce_launch, update_tiles

#: table storage dtypes the kernels load (float64 values are stored in the compute dtype by :func:`plan_table`)
_STORED = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_SIXTEEN = (torch.float16, torch.bfloat16)


@dataclass
class TablePlan:
    """One block's table as the kernels read it: ``tab`` [n, Q, FP] (zero-padded channels; float16/bfloat16 as
    stored, else the compute dtype or float32), ``scale`` [Q, FP] and ``scal`` ``[rc_graph, r_end, 1/h, n-2]``
    (compute dtype, on the device); ``scaled``: some scale is not 1 (the kernels' ``SCALE``); ``cutoff``: the
    pair cutoff ``min(rc_graph, r_end)`` (the tile flags' radius: the filter is zero beyond ``r_end``)."""

    tab: torch.Tensor
    scale: torch.Tensor
    scal: torch.Tensor
    F: int
    FP: int
    Q: int
    n: int
    scaled: bool
    cutoff: float


def plan_table(table: torch.Tensor, scale: torch.Tensor, r_end: float, F: int, dtype, device,
               rc_graph: Optional[float] = None) -> TablePlan:
    """The kernels' view of a table ``[n, Q, F]`` (format of :mod:`flashschnet.nn.table`) for compute dtype
    ``dtype`` on ``device``; ``rc_graph`` the graph cutoff (None: ``r_end``). Reads the scales back once, to
    decide ``scaled`` (an engine plans once; a step does not)."""
    if table.dim() != 3 or int(table.shape[1]) not in (2, 3) or int(table.shape[0]) < 2 or int(table.shape[2]) != F:
        raise ValueError(f"flashschnet: a filter table must be [n >= 2, Q = 2 or 3, F = {F}], got {tuple(table.shape)}")
    n, Q = int(table.shape[0]), int(table.shape[1])
    if tuple(scale.shape) != (Q, F):
        raise ValueError(f"flashschnet: the table's scale must be [Q={Q}, F={F}], got {tuple(scale.shape)}")
    if table.dtype not in _STORED:
        raise ValueError(f"flashschnet: a filter table must be float64, float32, float16 or bfloat16, "
                         f"got {table.dtype}")
    r_end = float(r_end)
    rc_graph = r_end if rc_graph is None else float(rc_graph)
    if not (math.isfinite(r_end) and r_end > 0.0) or not rc_graph > 0.0:
        raise ValueError(f"flashschnet: r_end and rc_graph must be positive lengths, got {r_end}, {rc_graph}")
    sdtype = dtype if table.dtype == torch.float64 else table.dtype   # float64 values: rounded as loaded would be
    FP = pow2(F, 16)
    tab = torch.zeros(n, Q, FP, dtype=sdtype, device=device)
    tab[:, :, :F] = table.to(device, sdtype)
    sc = torch.ones(Q, FP, dtype=dtype, device=device)
    sc[:, :F] = scale.to(device, dtype)
    scaled = table.dtype in _SIXTEEN or bool((scale != 1).any())
    h = r_end / (n - 1)
    scal = torch.tensor([rc_graph, r_end, 1.0 / h, float(n - 2)], dtype=dtype).to(device)
    return TablePlan(tab, sc, scal, int(F), FP, Q, n, scaled, min(rc_graph, r_end))


# ------------------------------------------------------------------------------------------ launches


def _meta(ws: Workspace, tp: TablePlan) -> dict:
    return dict(B=ws.block, F=tp.F, FP=tp.FP, Q=tp.Q, SCALE=tp.scaled)


def table_fwd_launch(ws: Workspace, pos, h, tp: TablePlan):
    return ("_cfconv_table_fwd_kernel", (ws.R * ws.T,),
            (pos, h, ws.flags, ws.rowbuf, ws.colbuf, tp.tab, tp.scale, tp.scal, ws.N, ws.T, ws.S, ws.SO),
            _meta(ws, tp))


def table_bwd_launch(ws: Workspace, pos, h, gm, tp: TablePlan):
    return ("_cfconv_table_bwd_kernel", (ws.R * ws.T,),
            (pos, h, gm, ws.flags, ws.rowbuf, ws.colbuf, ws.prow, ws.pcol, tp.tab, tp.scale, tp.scal, ws.N, ws.T,
             ws.S, ws.SO), _meta(ws, tp))


def launch_table_fwd(ws: Workspace, pos: torch.Tensor, h: torch.Tensor, tp: TablePlan) -> torch.Tensor:
    """``m = cfconv(pos, h)`` with the tabulated filter into ``ws.m`` [R, N, F] (returned). ``pos``/``h``
    contiguous, compute dtype; the flags built for a radius >= ``tp.cutoff``."""
    if ws.R * ws.N:
        _run(table_fwd_launch(ws, pos, h, tp))
        _run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.m, tp.F))
    return ws.m


def launch_table_bwd(ws: Workspace, pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor,
                     tp: TablePlan) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh, dE/dpos)`` into ``ws.gh`` [R, N, F] and ``ws.gpos`` [R, N, 3] (returned), given ``gm = dE/dm``."""
    if ws.R * ws.N:
        _run(table_bwd_launch(ws, pos, h, gm, tp))
        _run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.gh, tp.F))
        _run(reduce_launch(ws, ws.prow, ws.pcol, ws.gpos, 3))
    return ws.gh, ws.gpos


#: table variants compiled by ``tools/gpu_fit.py``: (variant name, Q, storage dtype, compute dtype) -- float32
#: steps, and float64 ones (``/f64``: on a GPU a compressed model runs these kernels in float64 too)
TABLE_VARIANTS = [(f"{kind}-{short}{tag}", Q, tdt, cdt)
                  for tag, cdt in (("", torch.float32), ("/f64", torch.float64))
                  for kind, Q in (("cubic", 2), ("quintic", 3))
                  for short, tdt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16))]


def table_step_launches(F: int = 128, N: int = 284, device="cpu", knots: int = 256):
    """``[(variant, launch)]``: the forward and backward launches of every :data:`TABLE_VARIANTS` entry for a
    model of filter width ``F`` and ``N`` beads (``tools/gpu_fit.py`` compiles them, next to
    :func:`~flashschnet.fused.triton_ops.step_launches`)."""
    out = []
    for name, Q, tdt, cdt in TABLE_VARIANTS:
        p = torch.zeros(1, N, 3, dtype=cdt, device=device)
        hh = torch.zeros(1, N, F, dtype=cdt, device=device)
        tp = plan_table(torch.zeros(knots, Q, F, dtype=tdt), torch.ones(Q, F), 10.0, F, cdt, device, 10.0)
        w = Workspace(1, N, F, cdt, device)
        out.append((name, table_fwd_launch(w, p, hh, tp)))
        out.append((name, table_bwd_launch(w, p, hh, hh, tp)))
    return out


# ------------------------------------------------------------------------------------------ custom ops


def _standalone(pos, feats, table, scale, r_end, rc_graph, skin):
    dtype = _dtype(pos)
    _check_device(pos)
    if pos.dim() != 3 or pos.shape[2] != 3:
        raise ValueError(f"flashschnet: positions must be [R, N, 3], got {tuple(pos.shape)}")
    R, N = int(pos.shape[0]), int(pos.shape[1])
    F = int(table.shape[-1]) if table.dim() == 3 else -1
    tp = plan_table(table, scale, r_end, F, dtype, pos.device, rc_graph)
    for name, t in feats:
        if tuple(t.shape) != (R, N, F):
            raise ValueError(f"flashschnet: {name} must be [R={R}, N={N}, F={F}], got {tuple(t.shape)}")
    if not (math.isfinite(skin) and skin >= 0.0):
        raise ValueError(f"flashschnet: skin must be a finite length >= 0, got {skin}")
    ws = Workspace(R, N, F, dtype, pos.device)
    p = pos.contiguous()
    update_tiles(ws, p, tp.cutoff, skin)
    return ws, p, [t.to(dtype).contiguous() for _, t in feats], tp


@torch.library.custom_op("flashschnet::cfconv_table_fwd", mutates_args=())
def cfconv_table_fwd(pos: torch.Tensor, h: torch.Tensor, table: torch.Tensor, scale: torch.Tensor, r_end: float,
                     rc_graph: float, skin: float = 0.0) -> torch.Tensor:
    """``m_i = sum_{j != i, d_ij < rc_graph, same replica} W(d_ij) * h_j`` -> m [R, N, F] with the tabulated filter
    ``W`` (:func:`flashschnet.nn.table.table_lookup`: zero for ``d >= r_end``).

    pos [R, N, 3], h [R, N, F]; ``table`` [n, Q, F] (float64/float32/float16/bfloat16), ``scale`` [Q, F];
    ``r_end`` the last knot; ``skin`` widens the tile culling radius (results do not depend on it)."""
    ws, p, (hh,), tp = _standalone(pos, [("h", h)], table, scale, r_end, rc_graph, skin)
    return launch_table_fwd(ws, p, hh, tp)


@cfconv_table_fwd.register_fake
def _(pos, h, table, scale, r_end, rc_graph, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], table.shape[-1]))


@torch.library.custom_op("flashschnet::cfconv_table_bwd", mutates_args=())
def cfconv_table_bwd(pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor, table: torch.Tensor, scale: torch.Tensor,
                     r_end: float, rc_graph: float, skin: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh [R, N, F], dE/dpos [R, N, 3])`` of ``E = sum(gm * cfconv_table_fwd(pos, h))`` with ``gm`` held
    fixed. Other arguments as :func:`cfconv_table_fwd`."""
    ws, p, (hh, gg), tp = _standalone(pos, [("h", h), ("gm", gm)], table, scale, r_end, rc_graph, skin)
    gh, gp = launch_table_bwd(ws, p, hh, gg, tp)
    return gh, gp


@cfconv_table_bwd.register_fake
def _(pos, h, gm, table, scale, r_end, rc_graph, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], table.shape[-1])), pos.new_empty(pos.shape)
