"""Plans of the triton engine's kernels: what a kernel reads that does not change from step to step, built once
per engine (nothing is rebuilt per step).

* :func:`plan_basis` -- basis centres and coefficients padded to ``KP``, the float scalars as a device tensor;
* :func:`plan_filter` -- one block's filter network, padded, transposed and stored in the operand type of the
  chosen matrix-product precision, with the per-channel scales (the exact filter);
* :func:`plan_table` -- one block's filter table padded to ``FP`` channels in its storage dtype and laid out by
  channel group (``[NCG, n, Q, FC]``, :data:`TABLE_GROUP` channels a group), its scales and the float scalars
  (the tabulated filter of a compressed model: :mod:`flashschnet.nn.table`).

Matrix-product precision (``dot``): ``"ieee"`` (exact, the compute dtype: float64, or float32 by FMA),
``"tf32"``, ``"bf16"``, ``"fp16"`` (tensor cores; float32 accumulation). :func:`resolve_dot` turns ``"auto"``
into a choice: float64 -> ieee; channel-wise 16-bit weights -> their own 16-bit type; float32 -> tf32. On a
GPU only the tensor-core precisions are launched (:func:`exact_on_cuda`: the exact kernels do not fit an H200's
registers, so :mod:`flashschnet.fused.engine` runs the torch engine there). Tables have no matrix products:
``dot`` does not apply to them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from ..nn.quant import dequantize_weight

_BASES = {"gaussian": 0, "expnormal": 1}
#: matrix-product precision name -> the kernels' ``DOT`` code
DOTS = {"ieee": 0, "tf32": 1, "bf16": 2, "fp16": 3}
_DOT_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: table storage dtypes the kernels load (float64 values are stored in the compute dtype by :func:`plan_table`)
_STORED = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_SIXTEEN = (torch.float16, torch.bfloat16)
#: channels of a table kernel's item (its channel group): a group's table slice (256 quintic float32 knots: 96 KB)
#: stays in one multiprocessor's L1, and a pair's row of one knot and entry is one 128-byte line. Fixed, not a
#: launch option: a model's results never depend on how its channels were grouped
TABLE_GROUP = 32


def pow2(n: int, least: int = 16) -> int:
    """The smallest power of two >= max(n, least)."""
    p = least
    while p < n:
        p *= 2
    return p


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
    variant spills registers on an H200: ``tools/device/gpu_fit.py``)."""
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
    """One block's filter weights as the kernels read them: ``A1`` [FP, KP] and ``A2`` [FP, FP] (``[out, in]`` as
    stored, zero-padded, in the operand type: the kernels' products are ``weights x activations^T``, the weights
    the left operand), ``a1`` [FP] and the scales ``s1``/``s2`` [FP] (compute dtype; ones when unquantized --
    the kernels skip them then)."""

    A1: torch.Tensor
    a1: torch.Tensor
    A2: torch.Tensor
    s1: torch.Tensor
    s2: torch.Tensor
    F: int
    FP: int
    quant: bool
    dot: int


@dataclass
class TablePlan:
    """One block's table as the kernels read it: ``tab`` [NCG, n, Q, FC] (channels zero-padded to ``FP = NCG FC``,
    grouped by :data:`TABLE_GROUP`; float16/bfloat16 as stored, else the compute dtype or float32), ``scale``
    [Q, FP] and ``scal`` ``[rc_graph, r_end, 1/h, n-2]`` (compute dtype, on the device); ``scaled``: some scale
    is not 1 (the kernels' ``SCALE``); ``cutoff``: the pair cutoff ``min(rc_graph, r_end)`` (the tile flags'
    radius: the filter is zero beyond ``r_end``)."""

    tab: torch.Tensor
    scale: torch.Tensor
    scal: torch.Tensor
    F: int
    FP: int
    Q: int
    n: int
    scaled: bool
    cutoff: float
    FC: int = TABLE_GROUP
    NCG: int = 1


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
    """Padded weights (as stored: ``[out, in]``) in the operand type of ``dot`` (a name of :data:`DOTS`, already resolved):
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
        # iteration (and spill: tools/device/gpu_fit.py)
        A1, A2 = dequantize_weight(A1, A1_scale, dtype), dequantize_weight(A2, A2_scale, dtype)
        quant = False
    FP = pow2(F, 32)           # >= 32: the kernels work on halves of >= 16 channels (tl.dot's least)
    dev = A1.device
    A1p = torch.zeros(FP, KP, dtype=wdtype, device=dev)
    A2p = torch.zeros(FP, FP, dtype=wdtype, device=dev)
    A1p[:F, :K] = A1.to(wdtype)
    A2p[:F, :F] = A2.to(wdtype)
    a1p = torch.zeros(FP, dtype=dtype, device=dev)
    a1p[:F] = a1.to(dtype)
    s1 = torch.ones(FP, dtype=dtype, device=dev)
    s2 = torch.ones(FP, dtype=dtype, device=dev)
    if quant:
        s1[:F] = A1_scale.to(dtype)
        s2[:F] = A2_scale.to(dtype)
    return FilterPlan(A1p, a1p, A2p, s1, s2, F, FP, quant, DOTS[dot])


def basis_coeffs(kind: str, centers: torch.Tensor, widths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(offsets, coeffs)`` of the launchers from mlcg buffers: gaussian ``(offset [K], coeff [])``,
    expnormal ``(means [K], betas [K])``."""
    K = int(centers.shape[0])
    if kind == "gaussian":
        return centers, widths.reshape(-1).expand(K).clone() if widths.numel() == 1 else widths
    if kind == "expnormal":
        return centers, -widths
    raise ValueError(f"flashschnet: unknown basis {kind!r} (known: {', '.join(_BASES)})")


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
    FP = pow2(F, 32)           # >= 32: the node kernels' products work in 32 x 32 blocks
    FC = min(FP, TABLE_GROUP)
    NCG = FP // FC
    padded = torch.zeros(n, Q, FP, dtype=sdtype, device=device)
    padded[:, :, :F] = table.to(device, sdtype)
    tab = padded.reshape(n, Q, NCG, FC).permute(2, 0, 1, 3).contiguous()       # [NCG, n, Q, FC]
    sc = torch.ones(Q, FP, dtype=dtype, device=device)
    sc[:, :F] = scale.to(device, dtype)
    scaled = table.dtype in _SIXTEEN or bool((scale != 1).any())
    h = r_end / (n - 1)
    scal = torch.tensor([rc_graph, r_end, 1.0 / h, float(n - 2)], dtype=dtype).to(device)
    return TablePlan(tab, sc, scal, int(F), FP, Q, n, scaled, min(rc_graph, r_end), FC, NCG)
