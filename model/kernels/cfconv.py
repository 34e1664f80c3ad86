"""Fused Triton kernels of the continuous-filter convolution (CFConv) of CGSchNet: one tile-pair walk per pass,
the filter variant a constexpr.

Only ``@triton.jit`` functions live here; what launches them is in :mod:`flashschnet.fused` (plans: cached padded
weights, :mod:`~flashschnet.fused.plans`; persistent buffers, :mod:`~flashschnet.fused.workspace`; grids and the
per-kernel ``num_warps``/``num_stages``, :mod:`~flashschnet.fused.launches`).

A program walks the active tile pairs of its destination tile one pair block at a time (tiles, slots, pair blocks
and the reduce kernel: :mod:`flashschnet.kernels.tiles`): :func:`_fwd_walk` (``m_i = sum_j W_ij h_j``) and
:func:`_bwd_walk` (the feature and position gradients together, each filter evaluated once). What differs
between the two filter variants is only how a pair block's filter ``W`` [B, FP] (and ``dW/dd``) is made --
``TABLE`` (constexpr) chooses, and a branch on a constexpr is compiled away:

* ``TABLE=False`` -- the exact filter network in registers (:mod:`flashschnet.kernels.filter_mlp`: basis,
  envelopes, two layers on tensor cores; the backward on halves of the channels);
* ``TABLE=True`` -- the tabulated filter of a compressed model (:mod:`flashschnet.kernels.filter_table`: a
  gather and a few FMAs per element, no matrix products; the backward on all channels at once).

The four kernels -- :func:`_cfconv_fwd_kernel`, :func:`_cfconv_bwd_kernel` (exact) and
:func:`_cfconv_table_fwd_kernel`, :func:`_cfconv_table_bwd_kernel` (tables) -- are the walks with their filter's
arguments (the other variant's pointers and constexprs are unused placeholders). Sharing the walk changed no
binary's fit: ``tools/gpu_fit.py`` gives every kernel and variant the same registers, spill bytes (0), shared
memory and stack as the four kernels written out separately did (sm_90, Triton 3.6.0).
"""
import triton
import triton.language as tl

from .filter_mlp import (_basis, _bwd_half, _cosine_env, _first_half, _first_layer, _load_basis,
                         _second_from_half, _second_layer)
from .filter_table import _load_scalars, _load_scales, _table_filter
from .tiles import _column_geometry, _load_beads, _load_feat, _load_row, _slot_rows


@triton.jit
def _fwd_walk(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr,
              A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, tab_ptr, sc_ptr, scal_ptr,
              N, T, S, SO,
              B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, TABLE: tl.constexpr,
              KP: tl.constexpr, BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr,
              QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr):
    """``m_i = sum_j W_ij h_j``: program ``g = r*T + I`` writes its row partial ``rowbuf[g]`` [B, F] and, per
    active off-diagonal tile pair, the column partial ``colbuf[row]`` [B, F]. A pair block is the B beads of
    tile I against one source bead j (all 2-D: [B, KP] / [B, FP] products)."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    # the filter's weights and scalars, staged once per program
    if TABLE:
        ff = tl.arange(0, FP)
        rc, inv_h, kmax = _load_scalars(scal_ptr)
        q0, q1, q2 = _load_scales(sc_ptr, ff, FP, Q, SCALE)
    else:
        kk = tl.arange(0, KP)
        ff = tl.arange(0, FP)
        A1T = tl.load(A1T_ptr + kk[:, None] * FP + ff[None, :])
        A2T = tl.load(A2T_ptr + ff[:, None] * FP + ff[None, :])
        a1 = tl.load(a1_ptr + ff)
        s1 = tl.load(s1_ptr + ff)
        s2 = tl.load(s2_ptr + ff)
        mu, cf, rc, rc_rbf, rc_f, alpha, lower = _load_basis(mu_ptr, cf_ptr, scal_ptr, kk)

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
                if TABLE:
                    W, _ = _table_filter(d, mask, tab_ptr, ff, q0, q1, q2, inv_h, kmax, FP, Q, SCALE, False)
                else:
                    e, de = _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
                    s = _first_layer(e, A1T, a1, s1, QUANT, DOT, EMU)
                    y = _second_layer(s, A2T, s2, QUANT, DOT, EMU)
                    cfv, dcf = _cosine_env(d, rc_f, FILT_ENV)
                    W = tl.where(mask[:, None], y * cfv[:, None], 0.0)         # [B, FP]
                acc += W * hj[None, :]
                if J > I:
                    col = tl.sum(W * hI, axis=0)                                # [FP]
                    tl.store(colbuf_ptr + ((offrow + J).to(tl.int64) * B + jj) * F + ff, col, mask=fm)
    bl = tl.arange(0, B)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
    tl.store(rowbuf_ptr + off, acc, mask=fm[None, :])


@triton.jit
def _bwd_walk(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr,
              A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, tab_ptr, sc_ptr, scal_ptr,
              N, T, S, SO,
              B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, TABLE: tl.constexpr,
              KP: tl.constexpr, BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr,
              QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr):
    """Both gradients of a block's aggregation given ``gm = dE/dm``, each filter evaluated once:
    ``gh_j = sum_i W_ij gm_i`` (partials ``rowbuf``/``colbuf``, width F) and ``dE/dr`` through the distance
    dependence of ``W`` with ``G_ij = gm_i h_j + gm_j h_i`` per unordered pair (partials ``prow``/``pcol``,
    width 3). The exact filter's ``dW/dd`` is computed in forward mode (the tangent of the basis through the same
    products), every product on halves of the filter channels (weights staged as [KP, FP/2] and [FP/2, FP/2]
    blocks: :func:`~flashschnet.kernels.filter_mlp._first_half`, ``_second_from_half``, ``_bwd_half``), one
    input half at a time, so the operands held in registers stay few enough for an H100/H200
    (``tools/gpu_fit.py``). The table's ``W`` and ``dW/dd`` are looked up once per pair block, all channels at
    once (without weight matrices in registers the whole width fits)."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    # the filter's weights and scalars, staged once per program (exact: in blocks of half the channels)
    if TABLE:
        ff = tl.arange(0, FP)
        fm = ff < F
        rc, inv_h, kmax = _load_scalars(scal_ptr)
        q0, q1, q2 = _load_scales(sc_ptr, ff, FP, Q, SCALE)
    else:
        FC: tl.constexpr = FP // 2
        kk = tl.arange(0, KP)
        fh = tl.arange(0, FC)
        A1T_lo = tl.load(A1T_ptr + kk[:, None] * FP + fh[None, :])              # [KP, FC]
        A1T_hi = tl.load(A1T_ptr + kk[:, None] * FP + FC + fh[None, :])
        A2T_ll = tl.load(A2T_ptr + fh[:, None] * FP + fh[None, :])              # in low  -> out low
        A2T_hl = tl.load(A2T_ptr + (FC + fh)[:, None] * FP + fh[None, :])       # in high -> out low
        A2T_lh = tl.load(A2T_ptr + fh[:, None] * FP + FC + fh[None, :])         # in low  -> out high
        A2T_hh = tl.load(A2T_ptr + (FC + fh)[:, None] * FP + FC + fh[None, :])  # in high -> out high
        a1_lo = tl.load(a1_ptr + fh)
        a1_hi = tl.load(a1_ptr + FC + fh)
        s1_lo = tl.load(s1_ptr + fh)
        s1_hi = tl.load(s1_ptr + FC + fh)
        s2_lo = tl.load(s2_ptr + fh)
        s2_hi = tl.load(s2_ptr + FC + fh)
        mu, cf, rc, rc_rbf, rc_f, alpha, lower = _load_basis(mu_ptr, cf_ptr, scal_ptr, kk)

    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
    if TABLE:
        hI = _load_feat(h_ptr, r, bi, vi, N, F, 0, FP)
        gI = _load_feat(gm_ptr, r, bi, vi, N, F, 0, FP)
        acc = tl.zeros((B, FP), dtype=hI.dtype)
    else:
        hI_lo = _load_feat(h_ptr, r, bi, vi, N, F, 0, FC)
        hI_hi = _load_feat(h_ptr, r, bi, vi, N, F, FC, FC)
        gI_lo = _load_feat(gm_ptr, r, bi, vi, N, F, 0, FC)
        gI_hi = _load_feat(gm_ptr, r, bi, vi, N, F, FC, FC)
        acc_lo = tl.zeros((B, FC), dtype=hI_lo.dtype)
        acc_hi = tl.zeros((B, FC), dtype=hI_lo.dtype)
    ax = tl.zeros((B,), dtype=xi.dtype)
    ay = tl.zeros((B,), dtype=xi.dtype)
    az = tl.zeros((B,), dtype=xi.dtype)
    slot, offrow = _slot_rows(r, I, T, S, SO)
    for J in range(I, T):
        if tl.load(flags_ptr + slot + J) != 0:
            for jj in range(0, tl.minimum(N - J * B, B)):     # the real beads of tile J (a runtime bound)
                j = J * B + jj
                dx, dy, dz, d, mask, vj = _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc)
                if TABLE:
                    W, dW = _table_filter(d, mask, tab_ptr, ff, q0, q1, q2, inv_h, kmax, FP, Q, SCALE, True)
                    hj = _load_row(h_ptr, r, j, vj, N, F, 0, FP)
                    gj = _load_row(gm_ptr, r, j, vj, N, F, 0, FP)
                    acc += W * gj[None, :]
                    G = gI * hj[None, :] + gj[None, :] * hI                      # W, dW are 0 where masked
                    c = tl.where(mask, tl.sum(G * dW, axis=1) / d, 0.0)          # dE/dd / d
                else:
                    e, de = _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
                    if DOT == 3:
                        # float16 operands: de spans many decades (far basis functions) and would underflow;
                        # the tangent is linear in it, so carry it scaled to 1 per pair and scale back at the end
                        dmax = tl.max(tl.abs(de), axis=1)
                        dmax = tl.where(dmax > 0.0, dmax, 1.0)
                        den = de / dmax[:, None]
                    else:
                        dmax = d
                        den = de
                    # one input half at a time: its A operands die before the other half's are made
                    s_c, ds_c = _first_half(e, den, A1T_lo, a1_lo, s1_lo, QUANT, DOT, EMU)
                    y_lo, y_hi, yd_lo, yd_hi = _second_from_half(s_c, ds_c, A2T_ll, A2T_lh, DOT, EMU)
                    s_c, ds_c = _first_half(e, den, A1T_hi, a1_hi, s1_hi, QUANT, DOT, EMU)
                    p_lo, p_hi, pd_lo, pd_hi = _second_from_half(s_c, ds_c, A2T_hl, A2T_hh, DOT, EMU)
                    cfv, dcf = _cosine_env(d, rc_f, FILT_ENV)
                    hj = _load_row(h_ptr, r, j, vj, N, F, 0, FC)
                    gj = _load_row(gm_ptr, r, j, vj, N, F, 0, FC)
                    row_lo, dd_lo, col_lo = _bwd_half(y_lo + p_lo, yd_lo + pd_lo, s2_lo, dmax, cfv, dcf, mask,
                                                      hI_lo, gI_lo, hj, gj, QUANT, DOT)
                    acc_lo += row_lo
                    hj = _load_row(h_ptr, r, j, vj, N, F, FC, FC)
                    gj = _load_row(gm_ptr, r, j, vj, N, F, FC, FC)
                    row_hi, dd_hi, col_hi = _bwd_half(y_hi + p_hi, yd_hi + pd_hi, s2_hi, dmax, cfv, dcf, mask,
                                                      hI_hi, gI_hi, hj, gj, QUANT, DOT)
                    acc_hi += row_hi
                    c = tl.where(mask, (dd_lo + dd_hi) / d, 0.0)                  # dE/dd / d
                ax -= c * dx                                                    # member i: -c (r_j - r_i)
                ay -= c * dy
                az -= c * dz
                if J > I:
                    row = (offrow + J).to(tl.int64) * B + jj
                    if TABLE:
                        tl.store(colbuf_ptr + row * F + ff, tl.sum(W * gI, axis=0), mask=fm)
                    else:
                        tl.store(colbuf_ptr + row * F + fh, col_lo, mask=fh < F)
                        tl.store(colbuf_ptr + row * F + FC + fh, col_hi, mask=FC + fh < F)
                    tl.store(pcol_ptr + row * 3 + 0, tl.sum(c * dx, axis=0))
                    tl.store(pcol_ptr + row * 3 + 1, tl.sum(c * dy, axis=0))
                    tl.store(pcol_ptr + row * 3 + 2, tl.sum(c * dz, axis=0))
    bl = tl.arange(0, B)
    if TABLE:
        off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
        tl.store(rowbuf_ptr + off, acc, mask=fm[None, :])
    else:
        off = g.to(tl.int64) * (B * F) + bl[:, None] * F + fh[None, :]
        tl.store(rowbuf_ptr + off, acc_lo, mask=(fh < F)[None, :])
        tl.store(rowbuf_ptr + off + FC, acc_hi, mask=(FC + fh < F)[None, :])
    base = prow_ptr + g.to(tl.int64) * (B * 3) + bl * 3
    tl.store(base + 0, ax)
    tl.store(base + 1, ay)
    tl.store(base + 2, az)


@triton.jit
def _cfconv_fwd_kernel(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr,
                       A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr,
                       N, T, S, SO,
                       B: tl.constexpr, KP: tl.constexpr, F: tl.constexpr, FP: tl.constexpr,
                       BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr, QUANT: tl.constexpr,
                       DOT: tl.constexpr, EMU: tl.constexpr):
    """:func:`_fwd_walk` with the exact filter network (``scal``: ``[rc_graph, rc_rbf, rc_f, alpha, lower]``)."""
    _fwd_walk(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr,
              cf_ptr, scal_ptr, scal_ptr, scal_ptr, N, T, S, SO, B, F, FP, False, KP, BASIS, RBF_ENV, FILT_ENV,
              QUANT, DOT, EMU, 2, False)


@triton.jit
def _cfconv_bwd_kernel(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr,
                       A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr,
                       N, T, S, SO,
                       B: tl.constexpr, KP: tl.constexpr, F: tl.constexpr, FP: tl.constexpr,
                       BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr, QUANT: tl.constexpr,
                       DOT: tl.constexpr, EMU: tl.constexpr):
    """:func:`_bwd_walk` with the exact filter network."""
    _bwd_walk(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr, A1T_ptr, a1_ptr,
              A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr, scal_ptr, scal_ptr, N, T, S, SO, B, F, FP, False,
              KP, BASIS, RBF_ENV, FILT_ENV, QUANT, DOT, EMU, 2, False)


@triton.jit
def _cfconv_table_fwd_kernel(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr,
                             tab_ptr, sc_ptr, scal_ptr,
                             N, T, S, SO,
                             B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, Q: tl.constexpr,
                             SCALE: tl.constexpr):
    """:func:`_fwd_walk` with the tabulated filter (``tab`` [n, Q, FP], ``sc`` [Q, FP], ``scal``:
    ``[rc_graph, r_end, 1/h, n - 2]``)."""
    _fwd_walk(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, tab_ptr, tab_ptr, tab_ptr, sc_ptr, sc_ptr, sc_ptr,
              sc_ptr, tab_ptr, sc_ptr, scal_ptr, N, T, S, SO, B, F, FP, True, 16, 0, False, False, False, 0, False,
              Q, SCALE)


@triton.jit
def _cfconv_table_bwd_kernel(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr,
                             tab_ptr, sc_ptr, scal_ptr,
                             N, T, S, SO,
                             B: tl.constexpr, F: tl.constexpr, FP: tl.constexpr, Q: tl.constexpr,
                             SCALE: tl.constexpr):
    """:func:`_bwd_walk` with the tabulated filter."""
    _bwd_walk(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr, tab_ptr, tab_ptr,
              tab_ptr, sc_ptr, sc_ptr, sc_ptr, sc_ptr, tab_ptr, sc_ptr, scal_ptr, N, T, S, SO, B, F, FP, True, 16, 0,
              False, False, False, 0, False, Q, SCALE)
