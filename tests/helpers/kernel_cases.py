"""Shared inputs and comparisons of the Triton kernel tests (tests/model/kernels/): bead arrangements, the
compute dtypes, radial-basis parameters and the NaN-aware closeness check."""
from __future__ import annotations

import math

import torch

#: the compute dtypes of the kernel tests (ids "f32", "f64")
DTYPES = [torch.float32, torch.float64]

#: relative tolerances of kernel-vs-reference comparisons per compute dtype
TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def close(out, expected, dtype, tol=None):
    """``out`` has no NaN (every poisoned element was written) and matches ``expected`` to ``tol`` relative to
    its largest magnitude."""
    assert not torch.isnan(out).any(), "an output element was never written"
    tol = tol or TOL[dtype]
    scale = max(float(expected.abs().max()), 1e-30)
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol * scale)


def chain(R, N, dtype, step=3.8, seed=0):
    """``[R, N, 3]``: random walks of ``step`` (a protein-like chain of beads)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(R, N, 3, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=-1, keepdim=True) * step
    v[:, 0] = 0.0
    return v.cumsum(1).to(dtype)


def blob(R, N, dtype, sigma=4.0, seed=0):
    """``[R, N, 3]``: a Gaussian cloud of width ``sigma``."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(R, N, 3, generator=g, dtype=torch.float64) * sigma).to(dtype)


def basis_params(basis, K, rc, dtype):
    """``(offsets, coeffs, alpha)`` of ``K`` radial basis functions (``gaussian`` or ``expnormal``) up to ``rc``."""
    if basis == "gaussian":
        offsets = torch.linspace(0.0, rc, K, dtype=torch.float64)
        coeffs = torch.full((K,), -0.5 / float(offsets[1] - offsets[0]) ** 2, dtype=torch.float64)
        alpha = 0.0
    else:
        start = math.exp(-rc)
        offsets = torch.linspace(start, 1.0, K, dtype=torch.float64)
        coeffs = -torch.full((K,), (2.0 / K * (1.0 - start)) ** -2, dtype=torch.float64)
        alpha = 5.0 / rc
    return offsets.to(dtype), coeffs.to(dtype), alpha
