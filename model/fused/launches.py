"""Launches of the triton engine's kernels, and every launch a step can make.

A :class:`Launch` is one kernel call: the ``@triton.jit`` kernel itself (of :mod:`flashschnet.kernels.cfconv` or
:mod:`flashschnet.kernels.tiles`), its grid, its arguments in the kernel's order and its constexprs; its
launch options (``num_warps``, ``num_stages``, ``maxnreg``) are :data:`KERNEL_CONFIGS`' entry for the kernel. One
function per kernel builds its launch from plans (:mod:`flashschnet.fused.plans`) and a
:class:`~flashschnet.fused.workspace.Workspace`; :func:`run` runs it -- nothing allocated, nothing read back to
the host. :func:`step_launches` and :func:`table_step_launches` enumerate the launches a float32 step (and a
compressed model's float64 step) can make; ``tools/gpu_fit.py`` compiles exactly these ahead of time, so what
is checked offline is what runs.

The kernels are imported at the first launch (:func:`kernels`), not with this module: ``TRITON_INTERPRET`` must
be set before triton is imported, and the torch engine never needs triton.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, NamedTuple, Tuple

import torch

from .plans import BasisPlan, FilterPlan, TablePlan, plan_basis, plan_filter, plan_table, pow2
from .workspace import Workspace

#: launch options per kernel, chosen with ``tools/gpu_fit.py`` (registers, spills, shared memory, sm_80 and
#: sm_90, every basis / envelope / matmul variant). Forward: ``maxnreg`` lets ptxas use all 255 registers (left
#: alone it caps some variants at 168 for occupancy and spills a few dozen bytes). Backward: 8 warps (255
#: registers x 256 threads just fit the 64K register file), and ``num_stages=2``, with which no variant spills
#: (with 1, the tf32 variants without envelopes spill 12 bytes). Table kernels (no weight matrices): 8 warps and
#: ``maxnreg`` (with 4 warps the float32 quintic backward and the float64 quintic forward spill; with 8 and
#: ptxas's own cap the float32 cubic forward does)
KERNEL_CONFIGS = {
    "_cfconv_fwd_kernel": {"num_warps": 4, "num_stages": 1, "maxnreg": 255},
    "_cfconv_bwd_kernel": {"num_warps": 8, "num_stages": 2},
    "_cfconv_table_fwd_kernel": {"num_warps": 8, "num_stages": 1, "maxnreg": 255},
    "_cfconv_table_bwd_kernel": {"num_warps": 8, "num_stages": 1, "maxnreg": 255},
    "_tile_reduce_kernel": {"num_warps": 4, "num_stages": 1},
    "_tile_flags_kernel": {"num_warps": 4, "num_stages": 1},
}


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (the kernels run on CPU tensors in Triton's interpreter: no GPU, slowly)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_available() -> bool:
    """True when Triton imports and kernels can run: on a CUDA device, or anywhere under TRITON_INTERPRET=1."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return interpreting() or torch.cuda.is_available()


def check_device(t: torch.Tensor) -> None:
    """Raise unless kernels can run on ``t``'s device here."""
    if not triton_available():
        raise RuntimeError("flashschnet: Triton kernels need triton and a CUDA device (or TRITON_INTERPRET=1)")
    if not t.is_cuda and not interpreting():
        raise RuntimeError("flashschnet: Triton kernels run on CUDA tensors (CPU only under TRITON_INTERPRET=1)")


def compute_dtype(pos: torch.Tensor) -> torch.dtype:
    """The kernels' compute dtype: that of the positions (float32 or float64; else a TypeError)."""
    if pos.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"flashschnet: positions must be float32 or float64, got {pos.dtype}")
    return pos.dtype


@functools.lru_cache(maxsize=None)
def kernels():
    """``(cfconv, tiles)``, the kernel modules, imported (and, when interpreting, the interpreter patched) once, at
    the first launch."""
    from ..kernels import cfconv, tiles  # imported late: TRITON_INTERPRET must be set before triton is

    if interpreting():
        from ..kernels import interpreter

        interpreter.install()     # Triton 3.6's interpreter under numpy >= 2.4 (that module says why)
    return cfconv, tiles


class Launch(NamedTuple):
    """One kernel call: ``kernel[grid](*args, **meta, **options)``."""

    kernel: Any
    grid: Tuple[int, ...]
    args: Tuple[Any, ...]
    meta: Dict[str, Any]

    @property
    def name(self) -> str:
        return self.kernel.__name__

    @property
    def options(self) -> Dict[str, int]:
        return KERNEL_CONFIGS[self.name]


def run(launch: Launch) -> None:
    """Run ``launch`` with its kernel's launch options."""
    launch.kernel[launch.grid](*launch.args, **launch.meta, **launch.options)


# ------------------------------------------------------------------------------------------ one per kernel


def flags_launch(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float) -> Launch:
    return Launch(kernels()[1]._tile_flags_kernel, (ws.R,),
                  (pos, ws.ref, ws.flags, ws.builds, float(cutoff + skin), float((0.5 * skin) ** 2), ws.N, ws.T,
                   ws.S), dict(B=ws.block, TP=pow2(ws.T, 1)))


def reduce_launch(ws: Workspace, rowbuf, colbuf, out, W: int) -> Launch:
    return Launch(kernels()[1]._tile_reduce_kernel, (ws.R * ws.T,),
                  (rowbuf, colbuf, ws.flags, out, ws.N, ws.T, ws.S, ws.SO), dict(B=ws.block, W=W, WP=pow2(W, 1)))


def _meta(ws: Workspace, fp: FilterPlan, bp: BasisPlan) -> dict:
    return dict(B=ws.block, KP=bp.KP, F=fp.F, FP=fp.FP, BASIS=bp.basis, RBF_ENV=bp.rbf_env, FILT_ENV=bp.filt_env,
                QUANT=fp.quant, DOT=fp.dot, EMU=interpreting())


def fwd_launch(ws: Workspace, pos, h, fp: FilterPlan, bp: BasisPlan) -> Launch:
    return Launch(kernels()[0]._cfconv_fwd_kernel, (ws.R * ws.T,),
                  (pos, h, ws.flags, ws.rowbuf, ws.colbuf, fp.A1T, fp.a1, fp.A2T, fp.s1, fp.s2, bp.mu, bp.cf,
                   bp.scal, ws.N, ws.T, ws.S, ws.SO), _meta(ws, fp, bp))


def bwd_launch(ws: Workspace, pos, h, gm, fp: FilterPlan, bp: BasisPlan) -> Launch:
    return Launch(kernels()[0]._cfconv_bwd_kernel, (ws.R * ws.T,),
                  (pos, h, gm, ws.flags, ws.rowbuf, ws.colbuf, ws.prow, ws.pcol, fp.A1T, fp.a1, fp.A2T, fp.s1,
                   fp.s2, bp.mu, bp.cf, bp.scal, ws.N, ws.T, ws.S, ws.SO), _meta(ws, fp, bp))


def _table_meta(ws: Workspace, tp: TablePlan) -> dict:
    return dict(B=ws.block, F=tp.F, FP=tp.FP, Q=tp.Q, SCALE=tp.scaled)


def table_fwd_launch(ws: Workspace, pos, h, tp: TablePlan) -> Launch:
    return Launch(kernels()[0]._cfconv_table_fwd_kernel, (ws.R * ws.T,),
                  (pos, h, ws.flags, ws.rowbuf, ws.colbuf, tp.tab, tp.scale, tp.scal, ws.N, ws.T, ws.S, ws.SO),
                  _table_meta(ws, tp))


def table_bwd_launch(ws: Workspace, pos, h, gm, tp: TablePlan) -> Launch:
    return Launch(kernels()[0]._cfconv_table_bwd_kernel, (ws.R * ws.T,),
                  (pos, h, gm, ws.flags, ws.rowbuf, ws.colbuf, ws.prow, ws.pcol, tp.tab, tp.scale, tp.scal, ws.N,
                   ws.T, ws.S, ws.SO), _table_meta(ws, tp))


# ------------------------------------------------------------------------------------------ every launch of a step


def step_launches(F: int = 128, K: int = 50, basis: str = "gaussian", rbf_env: bool = True, filt_env: bool = True,
                  N: int = 284, device="cpu"):
    """Every launch a float32 step of the triton engine can make on a GPU, for a model of filter width ``F``,
    ``K`` basis functions, that basis and those envelopes: ``[(variant, launch)]`` (``tools/gpu_fit.py``
    compiles them). Variants: matmul tf32 / bf16 / fp16 with float32 weights; channel-wise 16-bit weights with
    products of their own type (with tf32 they are dequantized first: the tf32 kernels), and exact products are
    not launched on a GPU (:func:`~flashschnet.fused.plans.exact_on_cuda`). The tabulated-filter kernels'
    launches are :func:`table_step_launches`."""
    dtype = torch.float32
    bp = plan_basis(torch.linspace(0.0, 10.0, K), -torch.ones(K), basis, 1.0, 0.0, 10.0, 10.0, 10.0, rbf_env,
                    filt_env, dtype, device)
    ws = Workspace(1, N, F, dtype, device)
    pos = torch.zeros(1, N, 3, dtype=dtype, device=device)
    h = torch.zeros(1, N, F, dtype=dtype, device=device)
    A1, a1, A2 = torch.zeros(F, K), torch.zeros(F), torch.zeros(F, F)
    out = [("", flags_launch(ws, pos, 10.0, 1.0)), (f"W={F}", reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.m, F)),
           ("W=3", reduce_launch(ws, ws.prow, ws.pcol, ws.gpos, 3))]
    cases = [("tf32", None), ("bf16", None), ("fp16", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
    for dot, qdt in cases:
        if qdt is None:
            fp, name = plan_filter(A1, a1, A2, bp.KP, dtype, dot), dot
        else:
            fp = plan_filter(A1.to(qdt), a1, A2.to(qdt), bp.KP, dtype, dot, torch.ones(F), torch.ones(F))
            name = f"{dot}-weights"
        out.append((name, fwd_launch(ws, pos, h, fp, bp)))
        out.append((name, bwd_launch(ws, pos, h, h, fp, bp)))
    return out


#: table variants compiled by ``tools/gpu_fit.py``: (variant name, Q, storage dtype, compute dtype) -- float32
#: steps, and float64 ones (``/f64``: on a GPU a compressed model runs these kernels in float64 too)
TABLE_VARIANTS = [(f"{kind}-{short}{tag}", Q, tdt, cdt)
                  for tag, cdt in (("", torch.float32), ("/f64", torch.float64))
                  for kind, Q in (("cubic", 2), ("quintic", 3))
                  for short, tdt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16))]


def table_step_launches(F: int = 128, N: int = 284, device="cpu", knots: int = 256):
    """``[(variant, launch)]``: the forward and backward launches of every :data:`TABLE_VARIANTS` entry for a
    model of filter width ``F`` and ``N`` beads (``tools/gpu_fit.py`` compiles them, next to
    :func:`step_launches`)."""
    out = []
    for name, Q, tdt, cdt in TABLE_VARIANTS:
        p = torch.zeros(1, N, 3, dtype=cdt, device=device)
        hh = torch.zeros(1, N, F, dtype=cdt, device=device)
        tp = plan_table(torch.zeros(knots, Q, F, dtype=tdt), torch.ones(Q, F), 10.0, F, cdt, device, 10.0)
        w = Workspace(1, N, F, cdt, device)
        out.append((name, table_fwd_launch(w, p, hh, tp)))
        out.append((name, table_bwd_launch(w, p, hh, hh, tp)))
    return out
