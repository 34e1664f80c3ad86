"""Channel-wise 16-bit weights (the fourth FlashSchNet technique): the storage format and :class:`QuantLinear`.

A leaf module (torch only): the network (:mod:`flashschnet.nn.schnet`), the fused layout
(:mod:`flashschnet.nn.layout`) and the model-level transform :func:`flashschnet.quantize`
(:mod:`flashschnet.transforms`) build on it.

A weight matrix ``W [out, in]`` is stored as 16-bit values ``q [out, in]`` (float16 or bfloat16) and one
float32 scale per output channel ``s [out]``, with ``W ~= s[:, None] * q``. The scale of channel ``c`` is
chosen from that channel's range, ``s_c = max_k |W_ck| / TARGET[dtype]``, so the channel's largest weight
lands on ``TARGET`` (float16: 2^14, leaving 2^28 of normal range below it before float16 subnormals start;
bfloat16: 1, its exponent range is float32's). Without per-channel scales (``per_channel=False``, the plain
cast of the paper's public code) ``s = 1``.

Every backend computes with the *dequantized* weight ``q.to(compute dtype) * s`` (one multiplication per
weight, exact in float64 and correctly rounded in float32, so all backends see bit-identical weights) and
accumulates in the compute dtype (float32 or float64): the reference backend through :class:`QuantLinear`,
the fused torch path through :func:`flashschnet.nn.layout.unpack_params`, the Triton kernels in registers
after loading ``q`` (16 bits) and ``s`` from memory.

Which weights: the filter networks (``A1 [F, K]``, ``A2 [F, F]`` of every interaction block) and the output
network (every Linear of ``output_network``). Biases, the embedding and ``lin1``/``lin2``/``lin`` stay in the
model's dtype.

Storage: ``QuantLinear`` keeps ``q`` in a 16-bit buffer ``weight_q`` and ``s`` in a float32 buffer
``weight_scale`` (``model.to(dtype)`` converts neither); the checkpoint's config records
``quantization = {"dtype": "float16" | "bfloat16", "per_channel": bool}``.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import nn

from ..config import quant_dtype_name
from ..errors import InputError

#: 16-bit storage dtypes by config name
QDTYPES: Dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16}

#: where a channel's largest |weight| lands after per-channel scaling
TARGET: Dict[str, float] = {"float16": 2.0 ** 14, "bfloat16": 1.0}

def dtype_name(dtype) -> str:
    """The config name of a 16-bit storage dtype (:func:`flashschnet.config.quant_dtype_name`)."""
    return quant_dtype_name(dtype)


def quantize_weight(w: torch.Tensor, dtype=torch.float16, per_channel: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Quantize one weight matrix.

    Parameters
    ----------
    w : Tensor, [out, in], floating point
    dtype : torch.float16 or torch.bfloat16 (or their names)
    per_channel : bool
        One scale per output channel from its range (True) or the plain cast, scale 1 (False).

    Returns
    -------
    q : Tensor, [out, in], ``dtype``
    scale : Tensor, [out], float32. ``w ~= scale[:, None] * q``; an all-zero channel gets scale 1.
    """
    name = dtype_name(dtype)
    if w.dim() != 2:
        raise ValueError(f"quantize_weight expects a [out, in] matrix, got shape {tuple(w.shape)}")
    w64 = w.detach().to(torch.float64)
    if not bool(torch.isfinite(w64).all()):
        raise InputError("cannot quantize a weight matrix holding NaN or infinite values")
    if per_channel:
        amax = w64.abs().amax(dim=1)
        scale = torch.where(amax > 0, amax / TARGET[name], torch.ones_like(amax)).to(torch.float32)
    else:
        scale = torch.ones(w.shape[0], dtype=torch.float32)
    q = (w64 / scale.to(torch.float64).unsqueeze(1)).to(QDTYPES[name])
    if not bool(torch.isfinite(q.to(torch.float32)).all()):
        raise InputError(f"a weight does not fit {name} without per-channel scales (max |w| = "
                         f"{float(w64.abs().max()):.3g}); quantize with per_channel=True")
    return q.to(w.device), scale.to(w.device)


def dequantize_weight(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``q.to(dtype) * scale.to(dtype)[:, None]`` -- the weight every backend computes with."""
    return q.to(dtype) * scale.to(dtype).unsqueeze(1)


class QuantLinear(nn.Module):
    """A Linear layer whose weight is stored as 16-bit values with per-output-channel float32 scales.

    ``forward(x [..., in]) -> [..., out] = x W^T + b`` with ``W = q.to(x.dtype) * s[:, None]`` (accumulation
    in x's dtype). Buffers: ``weight_q`` [out, in] float16/bfloat16, ``weight_scale`` [out] float32; ``bias``
    [out] a parameter in the model's dtype (or None). Moving the module (``.to(dtype/device)``, ``.double()``)
    keeps ``weight_q`` 16-bit and ``weight_scale`` float32.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool, qdtype: str):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.qdtype = dtype_name(qdtype)
        self.register_buffer("weight_q", torch.zeros(out_features, in_features, dtype=QDTYPES[self.qdtype]))
        self.register_buffer("weight_scale", torch.ones(out_features, dtype=torch.float32))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        # a dtype conversion of the whole model must not touch the stored format (converting back is exact:
        # every 16-bit value is representable in float32/float64)
        self.weight_q = self.weight_q.to(QDTYPES[self.qdtype])
        self.weight_scale = self.weight_scale.to(torch.float32)
        return self

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        return self.weight_q.to(dtype) * self.weight_scale.to(dtype).unsqueeze(1)

    def set_from(self, linear: nn.Linear, per_channel: bool) -> "QuantLinear":
        q, s = quantize_weight(linear.weight, QDTYPES[self.qdtype], per_channel)
        self.weight_q.copy_(q)
        self.weight_scale.copy_(s)
        if self.bias is not None:
            with torch.no_grad():
                self.bias.data = linear.bias.detach().clone()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.dequantized(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, " \
               f"qdtype={self.qdtype}"
