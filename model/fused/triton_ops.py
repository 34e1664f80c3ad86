"""Launchers of the fused Triton CFConv kernels (:mod:`flashschnet.kernels.cfconv`).

Three layers, as in the kernels' own module docstring:

* **plans** -- what a kernel needs that does not change from step to step: :func:`plan_basis` (basis centres
  and coefficients padded to ``KP``, the float scalars as a device tensor) and :func:`plan_filter` (the filter
  weights padded, transposed and stored in the operand type of the chosen matrix-product precision, with the
  per-channel scales). An engine builds them once; nothing is rebuilt per step.
* a :class:`Workspace` -- persistent buffers sized by the replica count and bead count: tile-pair flags, the
  reference positions of the Verlet check, the row/column partial buffers and the outputs.
* **launches** -- :func:`update_tiles`, :func:`launch_fwd`, :func:`launch_bwd`: kernel grids and launch options
  from :data:`KERNEL_CONFIGS` (the offline fit check ``tools/gpu_fit.py`` compiles exactly these). A launch
  allocates nothing and reads nothing back to the host, so a whole step can be captured in a CUDA graph.

The custom ops :func:`cfconv_fwd` / :func:`cfconv_bwd` (with fake kernels, so they trace) wrap one call of
each for tests and standalone use; they build plans and a workspace per call. The tabulated-filter kernels of
compressed models have their plans, launches and ops in :mod:`flashschnet.fused.triton_table_ops` (same
workspace, flags, reductions and :func:`_run`).

Matrix-product precision (``dot``): ``"ieee"`` (exact, the compute dtype: float64, or float32 by FMA),
``"tf32"``, ``"bf16"``, ``"fp16"`` (tensor cores; float32 accumulation). :func:`resolve_dot` turns ``"auto"``
into a choice: float64 -> ieee; channel-wise 16-bit weights -> their own 16-bit type; float32 -> tf32. On a
GPU only the tensor-core precisions are launched (:func:`exact_on_cuda` says when an engine must use the
``torch`` backend's engine instead: the exact kernels do not fit an H200's registers).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from ..nn.quant import dequantize_weight

_BASES = {"gaussian": 0, "expnormal": 1}
#: matrix-product precision name -> the kernels' ``DOT`` code
DOTS = {"ieee": 0, "tf32": 1, "bf16": 2, "fp16": 3}
_DOT_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: beads per tile (destination tiles, and the granularity of the tile-pair flags)
BLOCK = 16
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


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_available() -> bool:
    """True when Triton imports and kernels can run: on a CUDA device, or anywhere under TRITON_INTERPRET=1."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return _interpret() or torch.cuda.is_available()


@functools.lru_cache(maxsize=None)
def _kernels():
    """:mod:`flashschnet.kernels.cfconv`, imported (and, when interpreting, the interpreter patched) once, at the
    first launch: every launch asks for its kernel here."""
    from ..kernels import cfconv  # imported late: TRITON_INTERPRET must be set before triton is imported

    if _interpret():
        from ..kernels import interpreter

        interpreter.install()     # Triton 3.6's interpreter under numpy >= 2.4 (that module says why)
    return cfconv


def _kernel(name: str):
    """The ``@triton.jit`` kernel ``name``: of :mod:`flashschnet.kernels.cfconv`, or a tabulated-filter kernel
    (:mod:`flashschnet.kernels.cfconv_table`)."""
    k = _kernels()
    if hasattr(k, name):
        return getattr(k, name)
    from ..kernels import cfconv_table

    return getattr(cfconv_table, name)


def pow2(n: int, least: int = 16) -> int:
    """The smallest power of two >= max(n, least)."""
    p = least
    while p < n:
        p *= 2
    return p


def _empty(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An uninitialised output or partial buffer (every element read is written by a kernel first)."""
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


def tile_counts(N: int, block: int = BLOCK) -> Tuple[int, int, int]:
    """``(T, S, SO)``: tiles per replica, tile-pair slots (``I <= J``) and off-diagonal slots (``I < J``)."""
    T = (int(N) + block - 1) // block
    return T, T * (T + 1) // 2, T * (T - 1) // 2


# ------------------------------------------------------------------------------------------ plans


def resolve_dot(dot: Optional[str], dtype: torch.dtype, weight_dtype: Optional[torch.dtype] = None) -> str:
    """The matrix-product precision for ``dot`` ("auto"/None or a name of :data:`DOTS`), the compute dtype and
    the storage dtype of quantized weights (None when unquantized)."""
    if dot in (None, "auto"):
        if dtype == torch.float64:
            return "ieee"
        if weight_dtype in (torch.float16, torch.bfloat16):
            return "fp16" if weight_dtype == torch.float16 else "bf16"
        return "tf32"
    if dot not in DOTS:
        raise ValueError(f"flashschnet: unknown matmul precision {dot!r} (known: auto, {', '.join(DOTS)})")
    if dtype == torch.float64 and dot != "ieee":
        raise ValueError(f"flashschnet: float64 computes its matrix products exactly; matmul={dot!r} is for float32")
    if weight_dtype is not None and dot in _DOT_DTYPES and _DOT_DTYPES[dot] != weight_dtype:
        raise ValueError(f"flashschnet: weights stored as {weight_dtype} cannot feed {dot} products; "
                         f"use matmul='auto', 'tf32' or 'ieee'")
    return dot


def exact_on_cuda(dot: str) -> bool:
    """True when ``dot`` asks for exact products, which the Triton kernels do not run on a GPU (their FMA
    variant spills registers on an H200: ``tools/gpu_fit.py``)."""
    return dot == "ieee"


@dataclass
class BasisPlan:
    """Basis centres/coefficients [KP] and the scalars ``[rc_graph, rc_rbf, rc_f, alpha, lower]`` (compute
    dtype, on the device), and the basis/envelope switches."""

    mu: torch.Tensor
    cf: torch.Tensor
    scal: torch.Tensor
    K: int
    KP: int
    basis: int
    rbf_env: bool
    filt_env: bool


@dataclass
class FilterPlan:
    """One block's filter weights as the kernels read them: ``A1T`` [KP, FP] and ``A2T`` [FP, FP] (transposed,
    zero-padded, in the operand type), ``a1`` [FP] and the scales ``s1``/``s2`` [FP] (compute dtype; ones
    when unquantized -- the kernels skip them then)."""

    A1T: torch.Tensor
    a1: torch.Tensor
    A2T: torch.Tensor
    s1: torch.Tensor
    s2: torch.Tensor
    F: int
    FP: int
    quant: bool
    dot: int


def plan_basis(offsets, coeffs, basis: str, alpha: float, lower: float, rc_graph: float, rc_rbf: float,
               rc_f: float, rbf_env: bool, filt_env: bool, dtype, device) -> BasisPlan:
    if basis not in _BASES:
        raise ValueError(f"flashschnet: unknown basis {basis!r} (known: {', '.join(_BASES)})")
    K = int(offsets.shape[0])
    if tuple(coeffs.shape) != (K,):
        raise ValueError(f"flashschnet: coeffs must have shape [{K}], got {tuple(coeffs.shape)}")
    KP = pow2(K)
    mu = torch.zeros(KP, dtype=dtype, device=device)
    cf = torch.zeros(KP, dtype=dtype, device=device)
    mu[:K] = offsets.to(device, dtype)
    cf[:K] = coeffs.to(device, dtype)
    scal = torch.tensor([rc_graph, rc_rbf, rc_f, alpha, lower], dtype=dtype).to(device)
    return BasisPlan(mu, cf, scal, K, KP, _BASES[basis], bool(rbf_env), bool(filt_env))


def plan_filter(A1, a1, A2, KP: int, dtype, dot: str, A1_scale=None, A2_scale=None) -> FilterPlan:
    """Padded, transposed weights in the operand type of ``dot`` (a name of :data:`DOTS`, already resolved):
    16-bit for bf16/fp16 products, else the compute dtype. Quantized (scales given): ``A1``/``A2`` are the 16-bit
    values; with 16-bit products of their own type (:func:`resolve_dot` refuses the other one) they go to the
    kernels unchanged with the scales separately, with tf32 / exact products dequantized here."""
    F = int(A1.shape[0])
    K = int(A1.shape[1]) if A1.dim() == 2 else -1
    if A1.dim() != 2 or K > KP or tuple(a1.shape) != (F,) or tuple(A2.shape) != (F, F):
        raise ValueError(f"flashschnet: filter weights must be A1 [F, K<={KP}], a1 [F], A2 [F, F]; got "
                         f"{tuple(A1.shape)}, {tuple(a1.shape)}, {tuple(A2.shape)}")
    quant = A1_scale is not None or A2_scale is not None
    if quant:
        if A1_scale is None or A2_scale is None:
            raise ValueError("flashschnet: quantized filter weights need both A1_scale and A2_scale")
        if A1.dtype not in (torch.float16, torch.bfloat16) or A2.dtype != A1.dtype:
            raise ValueError(f"flashschnet: quantized A1/A2 must both be float16 or bfloat16, got {A1.dtype}, {A2.dtype}")
        if tuple(A1_scale.shape) != (F,) or tuple(A2_scale.shape) != (F,):
            raise ValueError(f"flashschnet: A1_scale and A2_scale must have shape [F={F}]")
    wdtype = _DOT_DTYPES.get(dot, dtype)
    if quant and dot not in _DOT_DTYPES:
        # tf32 / exact products take the weights in the compute dtype: dequantize here (q * s, as the reference
        # backend does), and the kernels need no scales -- converting in the kernel would cost registers in every
        # iteration (and spill: tools/gpu_fit.py)
        A1, A2 = dequantize_weight(A1, A1_scale, dtype), dequantize_weight(A2, A2_scale, dtype)
        quant = False
    FP = pow2(F, 32)           # >= 32: the backward kernel works in two halves of >= 16 channels
    dev = A1.device
    A1T = torch.zeros(KP, FP, dtype=wdtype, device=dev)
    A2T = torch.zeros(FP, FP, dtype=wdtype, device=dev)
    A1T[:K, :F] = A1.t().to(wdtype)
    A2T[:F, :F] = A2.t().to(wdtype)
    a1p = torch.zeros(FP, dtype=dtype, device=dev)
    a1p[:F] = a1.to(dtype)
    s1 = torch.ones(FP, dtype=dtype, device=dev)
    s2 = torch.ones(FP, dtype=dtype, device=dev)
    if quant:
        s1[:F] = A1_scale.to(dtype)
        s2[:F] = A2_scale.to(dtype)
    return FilterPlan(A1T, a1p, A2T, s1, s2, F, FP, quant, DOTS[dot])


def basis_coeffs(kind: str, centers: torch.Tensor, widths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(offsets, coeffs)`` of the launchers from mlcg buffers: gaussian ``(offset [K], coeff [])``,
    expnormal ``(means [K], betas [K])``."""
    K = int(centers.shape[0])
    if kind == "gaussian":
        return centers, widths.reshape(-1).expand(K).clone() if widths.numel() == 1 else widths
    if kind == "expnormal":
        return centers, -widths
    raise ValueError(f"flashschnet: unknown basis {kind!r} (known: {', '.join(_BASES)})")


# ------------------------------------------------------------------------------------------ workspace


class Workspace:
    """Persistent buffers of one engine for positions ``[R, N, 3]`` and filter width ``F``.

    ``flags`` int8 [R*S] (tile-pair slots, all active until the first :func:`update_tiles`), ``ref`` [R, N, 3]
    (positions at each replica's last flag build; NaN: never built), ``builds`` int32 [R] (flag builds per
    replica, counted on the device), row/column partial buffers of width F and 3, and the outputs ``m``,
    ``gh`` [R, N, F] and ``gpos`` [R, N, 3].
    """

    def __init__(self, R: int, N: int, F: int, dtype, device, block: int = BLOCK):
        self.R, self.N, self.F, self.block = int(R), int(N), int(F), int(block)
        T, S, SO = tile_counts(N, block)
        self.T, self.S, self.SO = T, S, SO
        like = torch.empty(0, dtype=dtype, device=device)
        self.flags = torch.ones(max(R * S, 1), dtype=torch.int8, device=device)
        self.ref = torch.full((R, N, 3), float("nan"), dtype=dtype, device=device)
        self.builds = torch.zeros(max(R, 1), dtype=torch.int32, device=device)
        self.rowbuf = _empty((max(R * T, 1), block, F), like)
        self.colbuf = _empty((max(R * SO, 1), block, F), like)
        self.prow = _empty((max(R * T, 1), block, 3), like)
        self.pcol = _empty((max(R * SO, 1), block, 3), like)
        self.m = _empty((R, N, F), like)
        self.gh = _empty((R, N, F), like)
        self.gpos = _empty((R, N, 3), like)

    def matches(self, pos: torch.Tensor, F: int) -> bool:
        return (tuple(pos.shape[:2]) == (self.R, self.N) and self.F == F and pos.dtype == self.ref.dtype
                and pos.device == self.ref.device)


# ------------------------------------------------------------------------------------------ launches


# A launch is ``(kernel name, grid, args, meta)``: the arguments in the kernel's order and its constexprs.
# :func:`_run` adds the kernel's launch options (:data:`KERNEL_CONFIGS`); ``tools/gpu_fit.py`` compiles the
# same tuples ahead of time, so what is checked offline is what runs.


def _run(launch) -> None:
    name, grid, args, meta = launch
    _kernel(name)[grid](*args, **meta, **KERNEL_CONFIGS[name])


def flags_launch(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float):
    return ("_tile_flags_kernel", (ws.R,),
            (pos, ws.ref, ws.flags, ws.builds, float(cutoff + skin), float((0.5 * skin) ** 2), ws.N, ws.T, ws.S),
            dict(B=ws.block, TP=pow2(ws.T, 1)))


def _meta(ws: Workspace, fp: FilterPlan, bp: BasisPlan) -> dict:
    return dict(B=ws.block, KP=bp.KP, F=fp.F, FP=fp.FP, BASIS=bp.basis, RBF_ENV=bp.rbf_env, FILT_ENV=bp.filt_env,
                QUANT=fp.quant, DOT=fp.dot, EMU=_interpret())


def reduce_launch(ws: Workspace, rowbuf, colbuf, out, W: int):
    return ("_tile_reduce_kernel", (ws.R * ws.T,), (rowbuf, colbuf, ws.flags, out, ws.N, ws.T, ws.S, ws.SO),
            dict(B=ws.block, W=W, WP=pow2(W, 1)))


def fwd_launch(ws: Workspace, pos, h, fp: FilterPlan, bp: BasisPlan):
    return ("_cfconv_fwd_kernel", (ws.R * ws.T,),
            (pos, h, ws.flags, ws.rowbuf, ws.colbuf, fp.A1T, fp.a1, fp.A2T, fp.s1, fp.s2, bp.mu, bp.cf, bp.scal,
             ws.N, ws.T, ws.S, ws.SO), _meta(ws, fp, bp))


def bwd_launch(ws: Workspace, pos, h, gm, fp: FilterPlan, bp: BasisPlan):
    return ("_cfconv_bwd_kernel", (ws.R * ws.T,),
            (pos, h, gm, ws.flags, ws.rowbuf, ws.colbuf, ws.prow, ws.pcol, fp.A1T, fp.a1, fp.A2T, fp.s1, fp.s2,
             bp.mu, bp.cf, bp.scal, ws.N, ws.T, ws.S, ws.SO), _meta(ws, fp, bp))


#: the flag kernel holds a replica's [T, T] sphere tests in one program: above this many tiles (2,048 beads)
#: the same decision is made by PyTorch ops on the device (:func:`update_tiles_torch`)
MAX_FLAG_KERNEL_TILES = 128


def update_tiles(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float) -> None:
    """Rebuild, on the device, the flags of every replica some bead of which moved more than ``skin / 2``
    since its last build (``ws.ref``); other replicas keep theirs. No host synchronisation."""
    if ws.R * ws.N == 0:
        return
    if ws.T > MAX_FLAG_KERNEL_TILES:
        update_tiles_torch(ws, pos, cutoff, skin)
    else:
        _run(flags_launch(ws, pos, cutoff, skin))


def update_tiles_torch(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float) -> None:
    """:func:`update_tiles` in PyTorch ops (for many tiles): the same sphere tests, staleness (NaN included) and
    per-replica commit by ``torch.where`` -- still no host synchronisation, at O(R T^2) memory."""
    R, N, T, B = ws.R, ws.N, ws.T, ws.block
    p = pos.detach()
    stale = ~(((p - ws.ref) ** 2).sum(-1) <= 0.25 * skin * skin).all(dim=1)             # [R]; NaN -> stale
    pad = T * B - N
    valid = torch.ones(R, T * B, dtype=p.dtype, device=p.device)
    if pad:
        p = torch.cat([p, p[:, -1:, :].expand(R, pad, 3)], dim=1)
        valid[:, N:] = 0.0
    tiles = p.reshape(R, T, B, 3)
    vm = valid.reshape(R, T, B, 1)
    center = (tiles * vm).sum(2) / vm.sum(2)                                               # [R, T, 3]
    radius = (((tiles - center[:, :, None, :]) ** 2).sum(-1).sqrt() * vm[..., 0]).amax(2)  # [R, T]
    dc = (center[:, :, None, :] - center[:, None, :, :]).norm(dim=-1)
    near = (dc - radius[:, :, None] - radius[:, None, :] < cutoff + skin) | torch.isnan(dc)
    I, J = torch.triu_indices(T, T, device=p.device)                                       # slot order
    flags = ws.flags[:R * ws.S].view(R, ws.S)
    flags.copy_(torch.where(stale[:, None], near[:, I, J].to(torch.int8), flags))
    ws.ref.copy_(torch.where(stale[:, None, None], pos.detach(), ws.ref))
    ws.builds[:R] += stale.to(torch.int32)


def launch_fwd(ws: Workspace, pos: torch.Tensor, h: torch.Tensor, fp: FilterPlan, bp: BasisPlan) -> torch.Tensor:
    """``m = cfconv(pos, h)`` into ``ws.m`` [R, N, F] (returned). ``pos``/``h`` contiguous, compute dtype."""
    if ws.R * ws.N:
        _run(fwd_launch(ws, pos, h, fp, bp))
        _run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.m, fp.F))
    return ws.m


def launch_bwd(ws: Workspace, pos: torch.Tensor, h: torch.Tensor, gm: torch.Tensor, fp: FilterPlan,
               bp: BasisPlan) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(gh, dE/dpos)`` into ``ws.gh`` [R, N, F] and ``ws.gpos`` [R, N, 3] (returned), given ``gm = dE/dm``."""
    if ws.R * ws.N:
        _run(bwd_launch(ws, pos, h, gm, fp, bp))
        _run(reduce_launch(ws, ws.rowbuf, ws.colbuf, ws.gh, fp.F))
        _run(reduce_launch(ws, ws.prow, ws.pcol, ws.gpos, 3))
    return ws.gh, ws.gpos


def step_launches(F: int = 128, K: int = 50, basis: str = "gaussian", rbf_env: bool = True, filt_env: bool = True,
                  N: int = 284, device="cpu"):
    """Every launch a float32 step of the triton engine can make on a GPU, for a model of filter width ``F``,
    ``K`` basis functions, that basis and those envelopes: ``[(variant, launch)]`` (``tools/gpu_fit.py``
    compiles them). Variants: matmul tf32 / bf16 / fp16 with float32 weights; channel-wise 16-bit weights with
    products of their own type (with tf32 they are dequantized first: the tf32 kernels), and exact products are
    not launched on a GPU (:func:`exact_on_cuda`). The tabulated-filter kernels' launches are
    :func:`flashschnet.fused.triton_table_ops.table_step_launches` (that module builds on this one)."""
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


# ------------------------------------------------------------------------------------------ custom ops


def _standalone(pos, feats, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis, alpha, rbf_env, filt_env,
                basis_lower, dot, A1_scale, A2_scale, skin):
    dtype = _dtype(pos)
    _check_device(pos)
    if pos.dim() != 3 or pos.shape[2] != 3:
        raise ValueError(f"flashschnet: positions must be [R, N, 3], got {tuple(pos.shape)}")
    R, N = int(pos.shape[0]), int(pos.shape[1])
    bp = plan_basis(offsets, coeffs, basis, alpha, basis_lower, rc_graph, rc_rbf, rc_f, rbf_env, filt_env, dtype,
                    pos.device)
    quant_dtype = A1.dtype if A1_scale is not None else None
    fp = plan_filter(A1, a1, A2, bp.KP, dtype, resolve_dot(dot, dtype, quant_dtype), A1_scale, A2_scale)
    for name, t in feats:
        if tuple(t.shape) != (R, N, fp.F):
            raise ValueError(f"flashschnet: {name} must be [R={R}, N={N}, F={fp.F}], got {tuple(t.shape)}")
    if not (math.isfinite(skin) and skin >= 0.0):
        raise ValueError(f"flashschnet: skin must be a finite length >= 0, got {skin}")
    ws = Workspace(R, N, fp.F, dtype, pos.device)
    p = pos.contiguous()
    update_tiles(ws, p, rc_graph, skin)
    return ws, p, [t.to(dtype).contiguous() for _, t in feats], fp, bp


@torch.library.custom_op("flashschnet::cfconv_fwd", mutates_args=())
def cfconv_fwd(pos: torch.Tensor, h: torch.Tensor, A1: torch.Tensor, a1: torch.Tensor, A2: torch.Tensor,
               offsets: torch.Tensor, coeffs: torch.Tensor, rc_graph: float, rc_rbf: float, rc_f: float,
               basis: str = "gaussian", alpha: float = 0.0, rbf_env: bool = True, filt_env: bool = True,
               basis_lower: float = 0.0, dot: str = "auto", A1_scale: Optional[torch.Tensor] = None,
               A2_scale: Optional[torch.Tensor] = None, skin: float = 0.0) -> torch.Tensor:
    """``m_i = sum_{j != i, d_ij < rc_graph, same replica} W(d_ij) * h_j`` -> m [R, N, F].

    pos [R, N, 3], h [R, N, F]; A1 [F, K], a1 [F], A2 [F, F]; basis ``offsets``/``coeffs`` [K] (see
    :func:`basis_coeffs`); ``dot`` the matrix-product precision (module docstring). Channel-wise 16-bit weights:
    A1, A2 float16/bfloat16 with ``A1_scale``, ``A2_scale`` [F]; the weights used are
    ``A.to(dtype) * scale[:, None]`` (:mod:`flashschnet.nn.quant`). ``skin`` widens the tile culling radius
    (results do not depend on it).
    """
    ws, p, (hh,), fp, bp = _standalone(pos, [("h", h)], A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis,
                                       alpha, rbf_env, filt_env, basis_lower, dot, A1_scale, A2_scale, skin)
    return launch_fwd(ws, p, hh, fp, bp)


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
    ws, p, (hh, gg), fp, bp = _standalone(pos, [("h", h), ("gm", gm)], A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf,
                                          rc_f, basis, alpha, rbf_env, filt_env, basis_lower, dot, A1_scale,
                                          A2_scale, skin)
    gh, gp = launch_bwd(ws, p, hh, gg, fp, bp)
    return gh, gp


@cfconv_bwd.register_fake
def _(pos, h, gm, A1, a1, A2, offsets, coeffs, rc_graph, rc_rbf, rc_f, basis="gaussian", alpha=0.0, rbf_env=True,
      filt_env=True, basis_lower=0.0, dot="auto", A1_scale=None, A2_scale=None, skin=0.0):
    return pos.new_empty((pos.shape[0], pos.shape[1], A1.shape[0])), pos.new_empty(pos.shape)


def tile_flags(pos: torch.Tensor, cutoff: float, block: int = BLOCK) -> torch.Tensor:
    """The tile-pair flags ``int8 [R, S]`` of positions ``[R, N, 3]`` for radius ``cutoff`` (a fresh build)."""
    _check_device(pos)
    R, N = int(pos.shape[0]), int(pos.shape[1])
    ws = Workspace(R, N, 1, _dtype(pos), pos.device, block)
    update_tiles(ws, pos.contiguous(), cutoff, 0.0)
    return ws.flags[:R * ws.S].reshape(R, ws.S)
