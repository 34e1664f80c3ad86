"""A probe of the kernels' radial basis: a tiny Triton kernel that evaluates
:func:`flashschnet.kernels.filter_mlp._basis` (the function every exact CFConv kernel calls) on given bead pairs, so the
tests can compare the basis alone with the model's basis modules and :func:`cfconv_reference.flash_rbf_ref`.
Test code only: the package ships no per-pair basis op.
"""
import torch
import triton
import triton.language as tl

from flashschnet.fused import workspace
from flashschnet.fused.launches import check_device, compute_dtype
from flashschnet.fused.plans import plan_basis
from flashschnet.kernels.filter_mlp import _basis


@triton.jit
def _rbf_probe_kernel(pos_ptr, src_ptr, dst_ptr, mu_ptr, cf_ptr, scal_ptr, d_ptr, e_ptr, P,
                      K: tl.constexpr, KP: tl.constexpr, BLOCK_E: tl.constexpr,
                      BASIS: tl.constexpr, RBF_ENV: tl.constexpr):
    """Per pair ``p``: ``d_p = |pos[dst_p] - pos[src_p]|`` (once) and all ``K`` basis values in one pass."""
    pid = tl.program_id(0)
    p = pid.to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    pm = p < P
    s = tl.load(src_ptr + p, mask=pm, other=0).to(tl.int64)
    t = tl.load(dst_ptr + p, mask=pm, other=0).to(tl.int64)
    dx = tl.load(pos_ptr + t * 3 + 0, mask=pm, other=0.0) - tl.load(pos_ptr + s * 3 + 0, mask=pm, other=0.0)
    dy = tl.load(pos_ptr + t * 3 + 1, mask=pm, other=0.0) - tl.load(pos_ptr + s * 3 + 1, mask=pm, other=0.0)
    dz = tl.load(pos_ptr + t * 3 + 2, mask=pm, other=0.0) - tl.load(pos_ptr + s * 3 + 2, mask=pm, other=0.0)
    d = tl.sqrt(dx * dx + dy * dy + dz * dz)
    k = tl.arange(0, KP)
    mu = tl.load(mu_ptr + k)
    cf = tl.load(cf_ptr + k)
    rc_rbf = tl.load(scal_ptr + 1)
    alpha = tl.load(scal_ptr + 3)
    lower = tl.load(scal_ptr + 4)
    e, de = _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
    tl.store(d_ptr + p, d, mask=pm)
    tl.store(e_ptr + p[:, None] * K + k[None, :], e, mask=pm[:, None] & (k < K)[None, :])


def flash_rbf(pos, src, dst, offsets, coeffs, rc_rbf: float, basis: str = "gaussian", alpha: float = 0.0,
              rbf_env: bool = True, basis_lower: float = 0.0):
    """Distances ``d = |pos[dst] - pos[src]|`` [P] and basis ``e`` [P, K] (envelope included) of bead pairs
    through the kernels' ``_basis``; pos [M, 3] (or [..., 3]), src/dst [P]; in the dtype of pos."""
    dtype = compute_dtype(pos)
    check_device(pos)
    p = pos.reshape(-1, 3).contiguous()
    P = int(src.shape[0])
    bp = plan_basis(offsets, coeffs, basis, alpha, basis_lower, 0.0, rc_rbf, 0.0, rbf_env, False, dtype,
                    pos.device)
    mu, cf, K, KP, BASIS, scal = bp.mu, bp.cf, bp.K, bp.KP, bp.basis, bp.scal
    d = workspace._empty((P,), p)
    e = workspace._empty((P, K), p)
    if P:
        BLOCK_E = 32
        _rbf_probe_kernel[((P + BLOCK_E - 1) // BLOCK_E,)](
            p, src.to(torch.int64).contiguous(), dst.to(torch.int64).contiguous(), mu, cf, scal, d, e, P,
            K=K, KP=KP, BLOCK_E=BLOCK_E, BASIS=BASIS, RBF_ENV=bool(rbf_env))
    return d, e
