"""The pieces of the exact filter network of the CFConv kernels: radial basis, cosine envelopes, tanh and the
matrix product at the chosen precision (only ``@triton.jit`` functions; the kernels that assemble the filter
network from them -- per chunk of ``PB`` pairs the basis ``[PB, KP]``, the products ``[PB, KP] x [KP, FP/2]`` and
``[PB, FP/2] x [FP/2, FC]`` and their forward-mode tangents, entirely in registers -- are in
:mod:`flashschnet.kernels.cfconv`).

Conventions:

* ``KP``/``FP`` are the basis/filter widths padded to powers of two (KP >= 16, FP >= 32, so ``tl.dot`` is
  legal also on half the channels); the launcher pads ``A1`` [FP, KP], ``a1`` [FP], ``A2`` [FP, FP] and
  ``offsets``/``coeffs`` [KP] with zeros, so padded channels contribute exactly nothing.
* The basis has one form, ``e_k = exp(c_k (z - mu_k)^2) * Crbf(d)`` with ``z = d`` (gaussian, ``BASIS == 0``)
  or ``z = exp(alpha (lower - d))`` (expnormal, ``BASIS == 1``, ``c_k = -beta_k``).
* Float scalars (``rc_graph, rc_rbf, rc_f, alpha, lower``) come through a 5-element tensor of the compute
  dtype (``scal_ptr``), so float64 keeps its accuracy.
* The filter network's matrix products (:func:`_dot`) take their operand precision from ``DOT``: 0 = exact
  (``ieee``, the compute dtype: float64 or float32 FMA), 1 = tf32, 2/3 = bf16/fp16 operands (weights stored in
  that type, activations rounded to it). Products accumulate in float32 (or float64).
* Channel-wise quantized weights (``QUANT``): ``A1``/``A2`` hold the 16-bit values ``q`` and ``s1``/``s2`` the
  per-output-channel scales; since ``W = diag(s) q``, the scales multiply the products' outputs -- the same
  arithmetic as with the dequantized weights, up to rounding.
"""
import triton
import triton.language as tl

_PI = tl.constexpr(3.141592653589793)


@triton.jit
def _cosine_env(d, rc, ENV: tl.constexpr):
    """Cosine envelope ``0.5 (cos(pi d / rc) + 1) [d < rc]`` and its derivative (or 1 and 0 if not ENV)."""
    if ENV:
        x = d * (_PI / rc)
        inside = d < rc
        c = tl.where(inside, 0.5 * (tl.cos(x) + 1.0), 0.0)
        dc = tl.where(inside, (-0.5 * _PI / rc) * tl.sin(x), 0.0)
    else:
        c = d * 0.0 + 1.0
        dc = d * 0.0
    return c, dc


@triton.jit
def _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS: tl.constexpr, RBF_ENV: tl.constexpr):
    """Radial basis of distances ``d`` [P] with centres ``mu`` / coefficients ``cf`` [KP]: ``e`` [P, KP]
    (envelope included) and ``de/dd`` [P, KP]."""
    if BASIS == 0:
        z = d
        dz = d * 0.0 + 1.0
    else:
        z = tl.exp(alpha * (lower - d))
        dz = -alpha * z
    t = z[:, None] - mu[None, :]
    g = tl.exp(cf[None, :] * t * t)
    c, dc = _cosine_env(d, rc_rbf, RBF_ENV)
    e = g * c[:, None]
    de = g * ((2.0 * cf[None, :]) * t * (dz * c)[:, None] + dc[:, None])
    return e, de


@triton.jit
def _tanh(u):
    t = tl.exp(-2.0 * tl.abs(u))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(u >= 0, r, -r)


@triton.jit
def _round_bf16(x):
    """float32 -> the nearest bfloat16 value (ties to even), kept as float32 (finite inputs)."""
    b = x.to(tl.int32, bitcast=True)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & -65536
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _dot(a, w, DOT: tl.constexpr, EMU: tl.constexpr):
    """``a @ w`` with the operand precision ``DOT`` (module docstring); ``a`` in the compute dtype, ``w`` a
    weight matrix as stored (compute dtype, or 16-bit).

    ``EMU`` (set by the launcher only under ``TRITON_INTERPRET=1``): Triton's CPU interpreter multiplies
    bfloat16 matrices wrongly (raw bits) and converts float32 -> bfloat16 by truncation, so there the bf16
    product is computed as the GPU does it -- operands rounded to nearest bf16, exact products, float32 sums --
    by an exact float32 product of the rounded operands."""
    if DOT == 0:
        return tl.dot(a, w.to(a.dtype), input_precision="ieee")
    elif DOT == 1:
        return tl.dot(a, w.to(a.dtype), input_precision="tf32")
    elif DOT == 2 and EMU:
        return tl.dot(_round_bf16(a.to(tl.float32)), w.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a.to(w.dtype), w, out_dtype=tl.float32)


@triton.jit
def _load_basis(mu_ptr, cf_ptr, scal_ptr, kk):
    """Basis centres and coefficients [KP] and the scalars ``rc_graph, rc_rbf, rc_f, alpha, lower``."""
    return (tl.load(mu_ptr + kk), tl.load(cf_ptr + kk), tl.load(scal_ptr + 0), tl.load(scal_ptr + 1),
            tl.load(scal_ptr + 2), tl.load(scal_ptr + 3), tl.load(scal_ptr + 4))
