"""mlcg's radial bases and cutoff envelopes (module and buffer names as in mlcg, so state dicts load unchanged).

Lengths in the model's length unit. :func:`make_basis` and :func:`make_envelope` build them from the config's
``rbf`` and ``cutoff`` entries (:func:`flashschnet.config.normalize_config`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import torch
from torch import nn

from ..errors import InputError


class CosineCutoff(nn.Module):
    """mlcg ``CosineCutoff``: ``C(d) = 0.5 (cos(pi d / hi) + 1) [d < hi]`` for ``lo == 0``, else
    ``0.5 (cos(pi (2 (d - lo) / (hi - lo) + 1)) + 1)`` on ``(lo, hi)`` and 0 outside.

    ``d``: any shape, length unit of the model; returns the same shape.
    """

    def __init__(self, cutoff_lower: float, cutoff_upper: float):
        super().__init__()
        self.cutoff_lower = float(cutoff_lower)
        self.cutoff_upper = float(cutoff_upper)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        lo, hi = self.cutoff_lower, self.cutoff_upper
        if lo > 0.0:
            c = 0.5 * (torch.cos(math.pi * (2.0 * (d - lo) / (hi - lo) + 1.0)) + 1.0)
            return c * (d < hi).to(d.dtype) * (d > lo).to(d.dtype)
        return 0.5 * (torch.cos(d * (math.pi / hi)) + 1.0) * (d < hi).to(d.dtype)


class IdentityCutoff(nn.Module):
    """mlcg ``IdentityCutoff``: ``C(d) = 1`` (the graph radius still comes from ``cutoff_upper``)."""

    def __init__(self, cutoff_lower: float, cutoff_upper: float):
        super().__init__()
        self.cutoff_lower = float(cutoff_lower)
        self.cutoff_upper = float(cutoff_upper)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(d)


def make_envelope(spec: Dict[str, Any]) -> nn.Module:
    kind = spec.get("kind", "cosine")
    if kind == "cosine":
        return CosineCutoff(spec["cutoff_lower"], spec["cutoff_upper"])
    if kind == "identity":
        return IdentityCutoff(spec["cutoff_lower"], spec["cutoff_upper"])
    raise InputError(f"unknown cutoff kind {kind!r} in the model config (known: cosine, identity)")


class GaussianBasis(nn.Module):
    """mlcg ``GaussianBasis``: ``e_k(d) = exp(coeff (d - offset_k)^2) * envelope(d)``.

    Buffers ``offset`` [K] (``linspace(lo, hi, K)``) and ``coeff`` [] (``-0.5 / (offset_1 - offset_0)^2``)
    are part of the state dict; a loaded checkpoint's stored values are used, not recomputed ones.
    ``forward(d [E]) -> [E, K]``.
    """

    def __init__(self, num_rbf: int, cutoff: Dict[str, Any]):
        super().__init__()
        lo, hi = float(cutoff["cutoff_lower"]), float(cutoff["cutoff_upper"])
        offset = torch.linspace(lo, hi, num_rbf, dtype=torch.float64)
        self.register_buffer("offset", offset)
        self.register_buffer("coeff", torch.tensor(-0.5 / float(offset[1] - offset[0]) ** 2, dtype=torch.float64))
        self.num_rbf = int(num_rbf)
        self.cutoff = make_envelope(cutoff)

    def centers(self) -> torch.Tensor:
        return self.offset

    def widths(self) -> torch.Tensor:
        return self.coeff

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        e = torch.exp(self.coeff * (d.unsqueeze(-1) - self.offset) ** 2)
        return e * self.cutoff(d).unsqueeze(-1)


class ExpNormalBasis(nn.Module):
    """mlcg / TorchMD-Net ``ExpNormalBasis``:
    ``e_k(d) = envelope(d) * exp(-betas_k (exp(alpha (lo - d)) - means_k)^2)``, ``alpha = 5 / (hi - lo)``
    unless given. Buffers ``means`` [K], ``betas`` [K]. ``forward(d [E]) -> [E, K]``."""

    def __init__(self, num_rbf: int, cutoff: Dict[str, Any], alpha: Optional[float] = None):
        super().__init__()
        lo, hi = float(cutoff["cutoff_lower"]), float(cutoff["cutoff_upper"])
        start = math.exp(-(hi - lo))
        self.register_buffer("means", torch.linspace(start, 1.0, num_rbf, dtype=torch.float64))
        self.register_buffer(
            "betas", torch.full((num_rbf,), (2.0 / num_rbf * (1.0 - start)) ** -2, dtype=torch.float64)
        )
        self.alpha = float(alpha) if alpha is not None else 5.0 / (hi - lo)
        self.cutoff_lower = lo
        self.num_rbf = int(num_rbf)
        self.cutoff = make_envelope(cutoff)

    def centers(self) -> torch.Tensor:
        return self.means

    def widths(self) -> torch.Tensor:
        return self.betas

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        x = torch.exp(self.alpha * (self.cutoff_lower - d)).unsqueeze(-1)
        return self.cutoff(d).unsqueeze(-1) * torch.exp(-self.betas * (x - self.means) ** 2)


def make_basis(spec: Dict[str, Any]) -> nn.Module:
    kind = spec.get("kind", "gaussian")
    if kind == "gaussian":
        return GaussianBasis(spec["num_rbf"], spec["cutoff"])
    if kind == "expnormal":
        return ExpNormalBasis(spec["num_rbf"], spec["cutoff"], spec.get("alpha"))
    raise InputError(f"unknown radial basis {kind!r} in the model config (known: gaussian, expnormal)")
