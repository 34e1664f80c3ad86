"""Shared inputs and comparisons of the Triton kernel tests (tests/model/kernels/): bead arrangements and the
NaN-aware closeness check."""
from __future__ import annotations

import torch

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
