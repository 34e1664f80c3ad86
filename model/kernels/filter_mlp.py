"""The exact filter network of the CFConv kernels in registers: radial basis, cosine envelopes, the two layers and
their forward-mode tangents, at the chosen matrix-product precision (only ``@triton.jit`` functions; the kernels
that call them are in :mod:`flashschnet.kernels.cfconv`).

Per pair block (``B`` destination beads x one source bead, :mod:`flashschnet.kernels.tiles`): distances, basis,
the filter network and the filter ``W`` [B, FP] entirely in registers (no per-edge tensor is written; every tensor
2-D, the products ``[B, KP] x [KP, FP]`` and ``[B, FP] x [FP, FP]`` on tensor cores).

Conventions:

* ``KP``/``FP`` are the basis/filter widths padded to powers of two (KP >= 16, FP >= 32, so ``tl.dot`` is
  legal also on half the channels); the
  launcher pads ``A1T`` [KP, FP], ``a1`` [FP], ``A2T`` [FP, FP] and ``offsets``/``coeffs`` [KP] with zeros, so
  padded channels contribute exactly nothing.
* The basis has one form, ``e_k = exp(c_k (z - mu_k)^2) * Crbf(d)`` with ``z = d`` (gaussian, ``BASIS == 0``)
  or ``z = exp(alpha (lower - d))`` (expnormal, ``BASIS == 1``, ``c_k = -beta_k``).
* Float scalars (``rc_graph, rc_rbf, rc_f, alpha, lower``) come through a 5-element tensor of the compute
  dtype (``scal_ptr``), so float64 keeps its accuracy.
* The filter network's matrix products (:func:`_dot`) take their operand precision from ``DOT``: 0 = exact
  (``ieee``, the compute dtype: float64 or float32 FMA), 1 = tf32, 2/3 = bf16/fp16 operands (weights stored in
  that type, activations rounded to it). Products accumulate in float32 (or float64).
* Channel-wise quantized weights (``QUANT``): ``A1T``/``A2T`` hold the 16-bit values ``q`` and ``s1``/``s2`` the
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
def _basis_t(d, mu, cf, alpha, lower, rc_rbf, BASIS: tl.constexpr, RBF_ENV: tl.constexpr):
    """:func:`_basis` transposed: ``e^T`` and ``de^T/dd`` [KP, P] (basis functions along the rows, pairs along
    the columns: the right operand of a ``weights x activations^T`` product)."""
    if BASIS == 0:
        z = d
        dz = d * 0.0 + 1.0
    else:
        z = tl.exp(alpha * (lower - d))
        dz = -alpha * z
    t = z[None, :] - mu[:, None]
    g = tl.exp(cf[:, None] * t * t)
    c, dc = _cosine_env(d, rc_rbf, RBF_ENV)
    e = g * c[None, :]
    de = g * ((2.0 * cf[:, None]) * t * (dz * c)[None, :] + dc[None, :])
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
def _wdot(w, x, DOT: tl.constexpr, EMU: tl.constexpr):
    """``w @ x`` for a weight matrix ``w`` as stored (compute dtype, or 16-bit) on the left and activations ``x``
    in the compute dtype on the right, at the operand precision ``DOT`` (as :func:`_dot`, whose ``EMU`` note
    applies)."""
    if DOT == 0:
        return tl.dot(w.to(x.dtype), x, input_precision="ieee")
    elif DOT == 1:
        return tl.dot(w.to(x.dtype), x, input_precision="tf32")
    elif DOT == 2 and EMU:
        return tl.dot(w.to(tl.float32), _round_bf16(x.to(tl.float32)), input_precision="ieee")
    else:
        return tl.dot(w, x.to(w.dtype), out_dtype=tl.float32)


@triton.jit
def _first_layer(e, A1T, a1, s1, QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr):
    """``s = tanh(e A1^T + a1)`` [B, FC] of the basis ``e`` [B, KP] (FC: the columns of ``A1T`` given)."""
    u = _dot(e, A1T, DOT, EMU)
    if QUANT:
        u = u * s1[None, :]
    return _tanh(u.to(e.dtype) + a1[None, :])


@triton.jit
def _second_layer(s, A2T, s2, QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr):
    """``y = s A2^T`` [B, FP]."""
    y = _dot(s, A2T, DOT, EMU)
    if QUANT:
        y = y * s2[None, :]
    return y.to(s.dtype)


@triton.jit
def _load_basis(mu_ptr, cf_ptr, scal_ptr, kk):
    """Basis centres and coefficients [KP] and the scalars ``rc_graph, rc_rbf, rc_f, alpha, lower``."""
    return (tl.load(mu_ptr + kk), tl.load(cf_ptr + kk), tl.load(scal_ptr + 0), tl.load(scal_ptr + 1),
            tl.load(scal_ptr + 2), tl.load(scal_ptr + 3), tl.load(scal_ptr + 4))


@triton.jit
def _first_half(e, den, A1T_c, a1_c, s1_c, QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr):
    """Half of the first layer's output channels: ``s = tanh(e A1^T + a1)`` [B, FC] and its tangent
    ``ds = (1 - s^2) (de A1^T)`` (``den`` = ``de``, or ``de`` scaled per pair for float16)."""
    # not _first_layer then a product: the two products with A1T_c back to back keep the tf32 backward's
    # registers in budget (the other order spills up to 60 bytes: tools/gpu_fit.py)
    u = _dot(e, A1T_c, DOT, EMU)
    ds = _dot(den, A1T_c, DOT, EMU)
    if QUANT:
        u = u * s1_c[None, :]
        ds = ds * s1_c[None, :]
    s = _tanh(u.to(e.dtype) + a1_c[None, :])
    return s, ds.to(s.dtype) * (1.0 - s * s)


@triton.jit
def _second_from_half(s_c, ds_c, A2T_to_lo, A2T_to_hi, DOT: tl.constexpr, EMU: tl.constexpr):
    """The contributions of one half of the second layer's input channels (``s_c``, its tangent ``ds_c``
    [B, FC]) to ``y`` and ``dy/dd`` in both output halves: four [B, FC] products sharing their A operands."""
    return (_dot(s_c, A2T_to_lo, DOT, EMU), _dot(s_c, A2T_to_hi, DOT, EMU), _dot(ds_c, A2T_to_lo, DOT, EMU),
            _dot(ds_c, A2T_to_hi, DOT, EMU))


@triton.jit
def _bwd_half(y, yd, s2_c, dmax, cfv, dcf, mask, hI_c, gI_c, hj_c, gj_c, QUANT: tl.constexpr, DOT: tl.constexpr):
    """One half of the filter's output channels, given its ``y`` and ``dy/dd`` products [B, FC]: returns the
    row part of the feature gradient ``W gm_j`` [B, FC], the half's share of ``dE/dd`` [B] and the column
    part ``sum_i W gm_i`` [FC]."""
    if QUANT:
        y = y * s2_c[None, :]
        yd = yd * s2_c[None, :]
    y = y.to(hI_c.dtype)
    yd = yd.to(hI_c.dtype)
    if DOT == 3:
        yd = yd * dmax[:, None]
    W = tl.where(mask[:, None], y * cfv[:, None], 0.0)
    G = tl.where(mask[:, None], gI_c * hj_c[None, :] + gj_c[None, :] * hI_c, 0.0)
    ddv = tl.sum(G * (yd * cfv[:, None] + y * dcf[:, None]), axis=1)
    return W * gj_c[None, :], ddv, tl.sum(W * gI_c, axis=0)
