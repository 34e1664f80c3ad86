"""The tabulated filter of the CFConv kernels (filter compression, :mod:`flashschnet.nn.table`): a pair block's
filter and its derivative read from the table (only ``@triton.jit`` functions; the kernels that call them are in
:mod:`flashschnet.kernels.cfconv`).

The same items, partial buffers and outputs as the exact filter (:mod:`flashschnet.kernels.cfconv`); only the
filter ``W`` [B, B, FC] of an item (a tile pair's ``B x B`` pairs on one group of ``FC`` channels) differs: instead
of the basis and the filter network it is read from the table (:func:`_table_filter`). Per pair ``x = d / h``,
``k = min(floor(x), n - 2)`` (>= 0), ``t = x - k``; the ``2 Q`` table rows ``k`` and ``k + 1`` (FC channels each)
are gathered (converted to the compute dtype, times ``scale[q]``) and combined with the Hermite weights of ``t``:
``W = sum_q a_q(t) L_q + b_q(t) R_q`` and, in the backward, ``dW/dd = (1/h) sum_q a_q'(t) L_q + b_q'(t) R_q``
(the exact derivative of the interpolant, so forces are the gradient of the tabulated energy). No matrix
products (no ``tl.dot``): a table lookup is a gather and a few FMAs per element, in the compute dtype.

Conventions:

* the launcher pads the table's channels to ``FP`` (a power of two, zeros in the padding channels) and lays it
  out by channel group, ``[NCG, n, Q, FC]`` (``FP = NCG FC``): a pair's ``2 Q`` rows of one group are one
  contiguous run of ``2 Q FC`` values, and a group's slice (the working set of a program that keeps its group)
  is ``n Q FC`` values -- 96 KB for 256 quintic knots of 32 float32 channels, within an H100/H200
  multiprocessor's L1; the scales are ``[Q, FP]`` in the compute dtype; a table of float64 values is stored
  in the compute dtype;
  16-bit tables stay 16-bit (the pointer's dtype) and are converted as loaded;
* ``SCALE`` (constexpr): multiply by ``scale[q]`` -- off when every scale is 1 (float32/float64 tables), which
  changes nothing but saves the registers of the scale vectors;
* float scalars ``[rc_graph, r_end, 1/h, n - 2]`` come through a 4-element tensor of the compute dtype
  (``scal_ptr``). The pair cutoff is ``min(rc_graph, r_end)``: beyond ``r_end`` the filter is zero, so such
  pairs are masked like pairs beyond the graph cutoff (their table rows are not even loaded).
"""
import triton
import triton.language as tl


@triton.jit
def _hermite(t, Q: tl.constexpr, DERIV: tl.constexpr):
    """Hermite weights ``(a_0, b_0, a_1, b_1, a_2, b_2)`` of ``t`` [B] (``DERIV``: their ``d/dt``;
    ``a_2 = b_2 = 0`` for ``Q == 2``): the polynomials of :data:`flashschnet.nn.table.HERMITE` by Horner."""
    zero = t * 0.0
    if Q == 2:
        if DERIV:
            a0 = t * (6.0 * t - 6.0)
            a1 = 1.0 + t * (3.0 * t - 4.0)
            b1 = t * (3.0 * t - 2.0)
        else:
            a0 = 1.0 + t * t * (2.0 * t - 3.0)
            a1 = t * (1.0 + t * (t - 2.0))
            b1 = t * t * (t - 1.0)
        a2 = zero
        b2 = zero
    else:
        if DERIV:
            a0 = t * t * (-30.0 + t * (60.0 - 30.0 * t))
            a1 = 1.0 + t * t * (-18.0 + t * (32.0 - 15.0 * t))
            b1 = t * t * (-12.0 + t * (28.0 - 15.0 * t))
            a2 = t * (1.0 + t * (-4.5 + t * (6.0 - 2.5 * t)))
            b2 = t * t * (1.5 + t * (-4.0 + 2.5 * t))
        else:
            a0 = 1.0 + t * t * t * (-10.0 + t * (15.0 - 6.0 * t))
            a1 = t + t * t * t * (-6.0 + t * (8.0 - 3.0 * t))
            b1 = t * t * t * (-4.0 + t * (7.0 - 3.0 * t))
            a2 = t * t * (0.5 + t * (-1.5 + t * (1.5 - 0.5 * t)))
            b2 = t * t * t * (0.5 + t * (-1.0 + 0.5 * t))
    if DERIV:
        b0 = -a0                                            # b_0 = 1 - a_0
    else:
        b0 = 1.0 - a0
    return a0, b0, a1, b1, a2, b2


@triton.jit
def _load_scales(sc_ptr, c, FP: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr):
    """The scales ``scale[q]`` of channels ``c`` [FC] (``q < Q``; unused ones, and all without ``SCALE``, are
    dummies)."""
    if SCALE:
        s0 = tl.load(sc_ptr + c)
        s1 = tl.load(sc_ptr + FP + c)
        if Q == 3:
            s2 = tl.load(sc_ptr + 2 * FP + c)
        else:
            s2 = s1
    else:
        s0 = c
        s1 = c
        s2 = c
    return s0, s1, s2


@triton.jit
def _load_scalars(scal_ptr):
    """``(pair cutoff min(rc_graph, r_end), 1/h, n - 2)`` from the scalar tensor."""
    rc = tl.minimum(tl.load(scal_ptr + 0), tl.load(scal_ptr + 1))
    return rc, tl.load(scal_ptr + 2), tl.load(scal_ptr + 3)


@triton.jit
def _knot_rows(tab_ptr, rows, q, mask, s, FC: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr, like):
    """Entry ``q`` of the knots ``k`` and ``k + 1`` [B, B, FC] (``rows`` = ``k Q FC + channel`` offsets within the
    channel group's slice), in the dtype of ``like``, times ``scale[q]`` (zero where not ``mask``: nothing is
    loaded for those pairs)."""
    m = mask[:, :, None]
    L = tl.load(tab_ptr + rows + q * FC, mask=m, other=0.0).to(like.dtype)
    R = tl.load(tab_ptr + rows + (Q + q) * FC, mask=m, other=0.0).to(like.dtype)
    if SCALE:
        L = L * s[None, None, :]
        R = R * s[None, None, :]
    return L, R


@triton.jit
def _table_filter(d, mask, tab_ptr, c, s0, s1, s2, inv_h, kmax, FC: tl.constexpr, Q: tl.constexpr,
                  SCALE: tl.constexpr, DERIV: tl.constexpr):
    """The filter ``W`` [B, B, FC] of a tile pair's pairs (distances ``d`` [B, B], zero where not ``mask``) on the
    channel group whose table slice starts at ``tab_ptr`` (``c`` = 0 .. FC-1) and, with ``DERIV``, ``dW/dd``
    [B, B, FC] (else ``W`` again, unused)."""
    x = d * inv_h
    kf = tl.maximum(tl.minimum(tl.floor(x), kmax), 0.0)
    t = x - kf
    rows = (kf.to(tl.int32) * (Q * FC))[:, :, None] + c[None, None, :]
    a0, b0, a1, b1, a2, b2 = _hermite(t, Q, False)
    L, R = _knot_rows(tab_ptr, rows, 0, mask, s0, FC, Q, SCALE, d)
    # a_0 + b_0 = 1: the value part as L + b_0 (R - L), its derivative b_0' (R - L) -- no two large terms that
    # cancel (flashschnet.nn.table.hermite_matrix)
    R = R - L
    W = L + b0[:, :, None] * R
    if DERIV:
        c0, e0, c1, e1, c2, e2 = _hermite(t, Q, True)
        dW = e0[:, :, None] * R
    else:
        dW = W
    L, R = _knot_rows(tab_ptr, rows, 1, mask, s1, FC, Q, SCALE, d)
    W += a1[:, :, None] * L + b1[:, :, None] * R
    if DERIV:
        dW += c1[:, :, None] * L + e1[:, :, None] * R
    if Q == 3:
        L, R = _knot_rows(tab_ptr, rows, 2, mask, s2, FC, Q, SCALE, d)
        W += a2[:, :, None] * L + b2[:, :, None] * R
        if DERIV:
            dW += c2[:, :, None] * L + e2[:, :, None] * R
    if DERIV:
        dW = dW * inv_h
    return W, dW
