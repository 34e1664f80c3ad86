"""Fused Triton kernels of the CFConv with a tabulated filter (filter compression, :mod:`flashschnet.nn.table`).

Only ``@triton.jit`` functions live here; the launchers are in :mod:`flashschnet.fused.triton_table_ops`.

The same tiles, tile-pair slots, pair blocks (``B`` destination beads x one source bead), row/column partial
buffers and outputs as the exact kernels of :mod:`flashschnet.kernels.cfconv` (whose helpers, reduce and flag
kernels are reused unchanged); only the filter ``W`` [B, FP] of a pair block differs: instead of the basis and
the filter network it is read from the table. Per row of the pair block ``x = d / h``,
``k = min(floor(x), n - 2)`` (>= 0), ``t = x - k``; the ``2 Q`` table rows ``k`` and ``k + 1`` [B, FP] are
gathered (converted to the compute dtype, times ``scale[q]``) and combined with the Hermite weights of ``t``:
``W = sum_q a_q(t) L_q + b_q(t) R_q`` and, in the backward, ``dW/dd = (1/h) sum_q a_q'(t) L_q + b_q'(t) R_q``
(the exact derivative of the interpolant, so forces are the gradient of the tabulated energy). No matrix
products (no ``tl.dot``): a table lookup is a gather and a few FMAs per element, in the compute dtype.

Conventions:

* the launcher pads the table to ``[n, Q, FP]`` (zeros in the padding channels, ``FP`` a power of two) and the
  scales to ``[Q, FP]`` in the compute dtype; a table of float64 values is stored in the compute dtype;
  16-bit tables stay 16-bit (the pointer's dtype) and are converted as loaded;
* ``SCALE`` (constexpr): multiply by ``scale[q]`` -- off when every scale is 1 (float32/float64 tables), which
  changes nothing but saves the registers of the scale vectors;
* float scalars ``[rc_graph, r_end, 1/h, n - 2]`` come through a 4-element tensor of the compute dtype
  (``scal_ptr``). The pair cutoff is ``min(rc_graph, r_end)``: beyond ``r_end`` the filter is zero, so such
  pairs are masked like pairs beyond the graph cutoff (their table rows are not even loaded).
"""
import triton
import triton.language as tl

from .cfconv import _column_geometry, _load_beads, _load_feat, _load_row, _slot_rows


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
def _load_scales(sc_ptr, ff, FP: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr):
    """The scales ``scale[q]`` [FP] (``q < Q``; unused ones, and all without ``SCALE``, are dummies)."""
    if SCALE:
        s0 = tl.load(sc_ptr + ff)
        s1 = tl.load(sc_ptr + FP + ff)
        if Q == 3:
            s2 = tl.load(sc_ptr + 2 * FP + ff)
        else:
            s2 = s1
    else:
        s0 = ff
        s1 = ff
        s2 = ff
    return s0, s1, s2


@triton.jit
def _load_scalars(scal_ptr):
    """``(pair cutoff min(rc_graph, r_end), 1/h, n - 2)`` from the scalar tensor."""
    rc = tl.minimum(tl.load(scal_ptr + 0), tl.load(scal_ptr + 1))
    return rc, tl.load(scal_ptr + 2), tl.load(scal_ptr + 3)


@triton.jit
def _knot_rows(tab_ptr, rows, q, mask, s, FP: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr, like):
    """Entry ``q`` of the knots ``k`` and ``k + 1`` [B, FP] (``rows`` = ``k Q FP + channel`` offsets), in the
    dtype of ``like``, times ``scale[q]`` (zero where not ``mask``: nothing is loaded for those rows)."""
    m = mask[:, None]
    L = tl.load(tab_ptr + rows + q * FP, mask=m, other=0.0).to(like.dtype)
    R = tl.load(tab_ptr + rows + (Q + q) * FP, mask=m, other=0.0).to(like.dtype)
    if SCALE:
        L = L * s[None, :]
        R = R * s[None, :]
    return L, R


@triton.jit
def _table_filter(d, mask, tab_ptr, ff, s0, s1, s2, inv_h, kmax, FP: tl.constexpr, Q: tl.constexpr,
                  SCALE: tl.constexpr, DERIV: tl.constexpr):
    """The filter ``W`` [B, FP] of a pair block (distances ``d`` [B], zero where not ``mask``) and, with
    ``DERIV``, ``dW/dd`` [B, FP] (else ``W`` again, unused)."""
    x = d * inv_h
    kf = tl.maximum(tl.minimum(tl.floor(x), kmax), 0.0)
    t = x - kf
    rows = (kf.to(tl.int32) * (Q * FP))[:, None] + ff[None, :]
    a0, b0, a1, b1, a2, b2 = _hermite(t, Q, False)
    L, R = _knot_rows(tab_ptr, rows, 0, mask, s0, FP, Q, SCALE, d)
    # a_0 + b_0 = 1: the value part as L + b_0 (R - L), its derivative b_0' (R - L) -- no two large terms that
    # cancel (flashschnet.nn.table.hermite_matrix)
    R = R - L
    W = L + b0[:, None] * R
    if DERIV:
        c0, e0, c1, e1, c2, e2 = _hermite(t, Q, True)
        dW = e0[:, None] * R
    else:
        dW = W
    L, R = _knot_rows(tab_ptr, rows, 1, mask, s1, FP, Q, SCALE, d)
    W += a1[:, None] * L + b1[:, None] * R
    if DERIV:
        dW += c1[:, None] * L + e1[:, None] * R
    if Q == 3:
        L, R = _knot_rows(tab_ptr, rows, 2, mask, s2, FP, Q, SCALE, d)
        W += a2[:, None] * L + b2[:, None] * R
        if DERIV:
            dW += c2[:, None] * L + e2[:, None] * R
    if DERIV:
        dW = dW * inv_h
    return W, dW


@triton.jit
def _cfconv_table_fwd_kernel(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr,
                             tab_ptr, sc_ptr, scal_ptr,
                             N, T, S, SO,
                             B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, Q: tl.constexpr,
                             SCALE: tl.constexpr):
    """``m_i = sum_j W(d_ij) h_j`` with the tabulated filter: the outputs of
    :func:`~flashschnet.kernels.cfconv._cfconv_fwd_kernel` (row partial ``rowbuf[g]`` [B, F], per active
    off-diagonal tile pair the column partials ``colbuf[row]`` [B, F])."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    ff = tl.arange(0, FP)
    rc, inv_h, kmax = _load_scalars(scal_ptr)
    s0, s1, s2 = _load_scales(sc_ptr, ff, FP, Q, SCALE)

    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
    hI = _load_feat(h_ptr, r, bi, vi, N, F, 0, FP)
    acc = tl.zeros((B, FP), dtype=hI.dtype)
    fm = ff < F
    slot, offrow = _slot_rows(r, I, T, S, SO)
    for J in range(I, T):
        if tl.load(flags_ptr + slot + J) != 0:
            for jj in range(0, tl.minimum(N - J * B, B)):     # the real beads of tile J (a runtime bound)
                j = J * B + jj
                dx, dy, dz, d, mask, vj = _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc)
                hj = _load_row(h_ptr, r, j, vj, N, F, 0, FP)
                W, _ = _table_filter(d, mask, tab_ptr, ff, s0, s1, s2, inv_h, kmax, FP, Q, SCALE, False)
                acc += W * hj[None, :]
                if J > I:
                    col = tl.sum(W * hI, axis=0)                                # [FP]
                    tl.store(colbuf_ptr + ((offrow + J).to(tl.int64) * B + jj) * F + ff, col, mask=fm)
    bl = tl.arange(0, B)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
    tl.store(rowbuf_ptr + off, acc, mask=fm[None, :])


@triton.jit
def _cfconv_table_bwd_kernel(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr,
                             tab_ptr, sc_ptr, scal_ptr,
                             N, T, S, SO,
                             B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, Q: tl.constexpr,
                             SCALE: tl.constexpr):
    """Both gradients of a block's aggregation given ``gm = dE/dm``, the tabulated filter and its derivative
    looked up once per pair block: the outputs of :func:`~flashschnet.kernels.cfconv._cfconv_bwd_kernel` --
    ``gh_j = sum_i W_ij gm_i`` (partials ``rowbuf``/``colbuf``, width F) and ``dE/dr`` through ``dW/dd`` with
    ``G_ij = gm_i h_j + gm_j h_i`` per unordered pair (partials ``prow``/``pcol``, width 3). All channels at
    once (no halves: without weight matrices in registers the whole width fits, ``tools/gpu_fit.py``)."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    ff = tl.arange(0, FP)
    fm = ff < F
    rc, inv_h, kmax = _load_scalars(scal_ptr)
    s0, s1, s2 = _load_scales(sc_ptr, ff, FP, Q, SCALE)

    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
    hI = _load_feat(h_ptr, r, bi, vi, N, F, 0, FP)
    gI = _load_feat(gm_ptr, r, bi, vi, N, F, 0, FP)
    acc = tl.zeros((B, FP), dtype=hI.dtype)
    ax = tl.zeros((B,), dtype=xi.dtype)
    ay = tl.zeros((B,), dtype=xi.dtype)
    az = tl.zeros((B,), dtype=xi.dtype)
    slot, offrow = _slot_rows(r, I, T, S, SO)
    for J in range(I, T):
        if tl.load(flags_ptr + slot + J) != 0:
            for jj in range(0, tl.minimum(N - J * B, B)):     # the real beads of tile J (a runtime bound)
                j = J * B + jj
                dx, dy, dz, d, mask, vj = _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc)
                W, dW = _table_filter(d, mask, tab_ptr, ff, s0, s1, s2, inv_h, kmax, FP, Q, SCALE, True)
                hj = _load_row(h_ptr, r, j, vj, N, F, 0, FP)
                gj = _load_row(gm_ptr, r, j, vj, N, F, 0, FP)
                acc += W * gj[None, :]
                G = gI * hj[None, :] + gj[None, :] * hI                          # W, dW are 0 where masked
                c = tl.where(mask, tl.sum(G * dW, axis=1) / d, 0.0)              # dE/dd / d
                ax -= c * dx                                                    # member i: -c (r_j - r_i)
                ay -= c * dy
                az -= c * dz
                if J > I:
                    row = (offrow + J).to(tl.int64) * B + jj
                    tl.store(colbuf_ptr + row * F + ff, tl.sum(W * gI, axis=0), mask=fm)
                    tl.store(pcol_ptr + row * 3 + 0, tl.sum(c * dx, axis=0))
                    tl.store(pcol_ptr + row * 3 + 1, tl.sum(c * dy, axis=0))
                    tl.store(pcol_ptr + row * 3 + 2, tl.sum(c * dz, axis=0))
    bl = tl.arange(0, B)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
    tl.store(rowbuf_ptr + off, acc, mask=fm[None, :])
    base = prow_ptr + g.to(tl.int64) * (B * 3) + bl * 3
    tl.store(base + 0, ax)
    tl.store(base + 1, ay)
    tl.store(base + 2, az)
