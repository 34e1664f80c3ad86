"""Fused Triton kernels of the continuous-filter convolution (CFConv) of CGSchNet: persistent programs over the
work list's items, forward and backward, for the tabulated filter (the default network) and the exact filter
network.

Only ``@triton.jit`` functions live here; what launches them is in :mod:`flashschnet.fused` (plans: cached padded
weights, :mod:`~flashschnet.fused.plans`; persistent buffers, :mod:`~flashschnet.fused.workspace`; grids and the
per-kernel ``num_warps``/``num_stages``, :mod:`~flashschnet.fused.launches`).

Work decomposition (:mod:`flashschnet.kernels.tiles`: tiles, slots, the work list, items, partials). A kernel runs
a fixed grid of persistent programs (about twice the multiprocessors); program ``p`` processes items ``p, p+G,
...`` of the device-side work list, an item being one active tile pair ``(r, I, J)`` -- its ``B x B`` bead pairs
at once, no walk over source beads, no triangular imbalance -- on one group of ``FC`` channels. It writes the
pair's row partial (tile I) and, off the diagonal, its column partial (tile J) into the pair's fixed slot; the
destination tiles' sums (:func:`~flashschnet.kernels.tiles._sum_partials`, in the reduce or node kernels) add
them in a fixed order. No atomics: bitwise repeatable, and independent of the number of programs.

* **Tables** (:func:`_cfconv_table_fwd_kernel`, :func:`_cfconv_table_bwd_kernel`): ``W`` and ``dW/dd`` [B, B, FC]
  looked up per pair (:mod:`flashschnet.kernels.filter_table`: a gather and a few FMAs per element, no matrix
  products); ``NCG = FP / FC`` channel groups per tile pair, a program keeping its group.
* **Exact filter** (:func:`_cfconv_fwd_kernel`, :func:`_cfconv_bwd_kernel`): the filter network needs every
  channel of its first layer for any output channel, so an item has all channels (``NCG = 1``) and runs the
  tile pair as ``B / JB`` chunks of ``PB = B * JB`` pairs (``JB`` source beads against the ``B`` destination
  beads): the basis ``[PB, KP]`` and the two products ``[PB, KP] x [KP, FP]`` and ``[PB, FP] x [FP, FP]`` with
  ``PB >= 64`` rows per ``tl.dot`` (warpgroup MMA on sm_90), the backward's ``dW/dd`` in forward mode (the
  basis tangent through the same products).

The backward kernels compute both gradients of a block's aggregation given ``gm = dE/dm``, each filter evaluated
once: ``gh_j = sum_i W_ij gm_i`` (partials of width FP) and ``dE/dr`` through the distance dependence of ``W``
with ``G_ij = gm_i h_j + gm_j h_i`` per pair (width-4 partials ``[x, y, z, 0]``; the tables' ``NP = NCG``
partials per slot, one per channel group, the exact filter's one).
"""
import triton
import triton.language as tl

from .filter_mlp import _basis, _cosine_env, _dot, _load_basis, _tanh
from .filter_table import _load_scalars, _load_scales, _table_filter
from .tiles import _col_slot, _item, _items, _load_beads, _load_rows


@triton.jit
def _pair_geometry(pos_ptr, r, I, J, j0, N, rc, B: tl.constexpr, JN: tl.constexpr):
    """The pairs of destination tile ``I`` (rows, ``B`` beads) against source beads ``J*B + j0 .. + JN - 1``
    (columns): bead indices and validity of both, ``r_j - r_i`` [B, JN], the pair mask (both real, ``i != j``,
    ``d < rc``) and ``d`` (1 where masked)."""
    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
    bj, vj, xj, yj, zj = _load_beads(pos_ptr, r, J * B + j0, N, JN)
    dx, dy, dz, d, mask = _geometry(bi, vi, xi, yi, zi, bj, vj, xj, yj, zj, rc)
    return bi, vi, bj, vj, dx, dy, dz, d, mask


@triton.jit
def _source_chunk(pos_ptr, h_ptr, gm_ptr, r, J, jc, N, h0, g0, ch, B: tl.constexpr, JB: tl.constexpr,
                  FP: tl.constexpr, GM: tl.constexpr):
    """Chunk ``jc`` of tile J's source beads: indices, validity, x, y, z [JB] and their feature rows ``h`` (and,
    with ``GM``, ``gm``; else ``h`` again) [JB, FC] -- what a table kernel loads for a chunk ahead of it, so the
    next chunk's loads are in flight while this one computes."""
    bj, vj, xj, yj, zj = _load_beads(pos_ptr, r, J * B + jc * JB, N, JB)
    hJ = _load_rows(h_ptr, h0, bj, vj, FP, ch)
    if GM:
        gJ = _load_rows(gm_ptr, g0, bj, vj, FP, ch)
    else:
        gJ = hJ
    return bj, vj, xj, yj, zj, hJ, gJ


@triton.jit
def _geometry(bi, vi, xi, yi, zi, bj, vj, xj, yj, zj, rc):
    """The pairs (rows: destination beads ``i``, columns: source beads ``j``): ``r_j - r_i`` [B, JN], the pair mask
    (both real, ``i != j``, ``d < rc``) and ``d`` (1 where masked)."""
    dx = xj[None, :] - xi[:, None]
    dy = yj[None, :] - yi[:, None]
    dz = zj[None, :] - zi[:, None]
    d = tl.sqrt(dx * dx + dy * dy + dz * dz)
    mask = vi[:, None] & vj[None, :] & (d < rc) & (bi[:, None] != bj[None, :])
    return dx, dy, dz, tl.where(mask, d, 1.0), mask


@triton.jit
def _store_rows(ptr, row0, n: tl.constexpr, W: tl.constexpr, c, val):
    """``val`` [n, C] into rows ``row0 .. row0+n-1`` of a row-major buffer of width ``W``, columns ``c``."""
    b = tl.arange(0, n)
    tl.store(ptr + (row0 + b.to(tl.int64))[:, None] * W + c[None, :], val)


@triton.jit
def _xyz0(ax, ay, az):
    """``[ax, ay, az, 0]`` [n, 4] of three [n] vectors (a width-4 position partial)."""
    k = tl.arange(0, 4)[None, :]
    return tl.where(k == 0, ax[:, None], tl.where(k == 1, ay[:, None], tl.where(k == 2, az[:, None], 0.0)))


# ------------------------------------------------------------------------------------------ tabulated filter


@triton.jit
def _table_item(w, list_ptr, sc_ptr, tab_ptr, S, T, knots, h_rs, rr, cnt, incl, c, B: tl.constexpr,
                FC: tl.constexpr, FP: tl.constexpr, NCG: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr):
    """A table kernel's item ``w``: ``(r, I, J, slot, group)`` (:func:`~flashschnet.kernels.tiles._item`), the
    group's channels, scales and table slice, the replica's first ``h`` row, and the pair's first row and column
    partial rows."""
    r, I, J, slot, cg = _item(w, list_ptr, S, T, rr, cnt, incl, NCG)
    ch = cg * FC + c
    s0, s1, s2 = _load_scales(sc_ptr, ch, FP, Q, SCALE)
    return (r, I, J, slot, cg, ch, s0, s1, s2, tab_ptr + cg * (knots * Q * FC), r.to(tl.int64) * h_rs,
            (r * S + slot) * B, _col_slot(r, I, slot, S, T) * B)          # partial rows in 32 bits: _col_slot


@triton.jit
def _cfconv_table_fwd_kernel(pos_ptr, h_ptr, list_ptr, counts_ptr, rowpart_ptr, colpart_ptr, tab_ptr, sc_ptr,
                             scal_ptr, R, N, T, S, h_rs, knots,
                             B: tl.constexpr, JB: tl.constexpr, FC: tl.constexpr, FP: tl.constexpr,
                             NCG: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr, RP: tl.constexpr):
    """``m_i = sum_j W_ij h_j`` with the tabulated filter: per item the row partial ``sum_j W_ij h_j`` [B, FC] of
    tile I and (``I < J``) the column partial ``sum_i W_ij h_i`` of tile J, the tile pair in chunks of ``JB``
    source beads (``[B, JB, FC]`` tensors). ``h`` rows: ``r * h_rs + bead`` (``h_rs = 0``: one row per bead shared
    by every replica). ``tab`` [NCG, knots, Q, FC], ``sc`` [Q, FP], ``scal`` ``[rc_graph, r_end, 1/h, knots -
    2]``."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    rc, inv_h, kmax = _load_scalars(scal_ptr)
    rr, cnt, incl, total = _items(counts_ptr, R, NCG, RP)
    c = tl.arange(0, FC)
    for w in range(pid, total, G):
        r, I, J, slot, cg, ch, s0, s1, s2, tab, h0, row0, col0 = _table_item(w, list_ptr, sc_ptr, tab_ptr, S, T,
                                                                            knots, h_rs, rr, cnt, incl, c, B, FC,
                                                                            FP, NCG, Q, SCALE)
        bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
        hI = _load_rows(h_ptr, h0, bi, vi, FP, ch)
        acc = tl.zeros((B, FC), dtype=hI.dtype)
        nbj, nvj, nxj, nyj, nzj, nhJ, ngJ = _source_chunk(pos_ptr, h_ptr, h_ptr, r, J, 0, N, h0, h0, ch, B, JB, FP,
                                                          False)
        for jc in range(0, B // JB):
            bj, vj, xj, yj, zj, hJ = nbj, nvj, nxj, nyj, nzj, nhJ
            # the next chunk's loads (the first again after the last: in L1), in flight while this one computes
            nbj, nvj, nxj, nyj, nzj, nhJ, ngJ = _source_chunk(pos_ptr, h_ptr, h_ptr, r, J, (jc + 1) % (B // JB), N,
                                                              h0, h0, ch, B, JB, FP, False)
            dx, dy, dz, d, mask = _geometry(bi, vi, xi, yi, zi, bj, vj, xj, yj, zj, rc)
            W, W2 = _table_filter(d, mask, tab, c, s0, s1, s2, inv_h, kmax, FC, Q, SCALE, False)
            acc += tl.sum(W * hJ[None, :, :], axis=1)
            if I != J:
                _store_rows(colpart_ptr, col0 + jc * JB, JB, FP, ch, tl.sum(W * hI[:, None, :], axis=0))
        _store_rows(rowpart_ptr, row0, B, FP, ch, acc)


@triton.jit
def _cfconv_table_bwd_kernel(pos_ptr, h_ptr, gm_ptr, list_ptr, counts_ptr, rowpart_ptr, colpart_ptr, prow_ptr,
                             pcol_ptr, tab_ptr, sc_ptr, scal_ptr, R, N, T, S, h_rs, knots,
                             B: tl.constexpr, JB: tl.constexpr, FC: tl.constexpr, FP: tl.constexpr,
                             NCG: tl.constexpr, Q: tl.constexpr, SCALE: tl.constexpr, RP: tl.constexpr):
    """Both gradients with the tabulated filter: per item the feature-gradient partials (``sum_j W_ij gm_j`` of
    tile I, ``sum_i W_ij gm_i`` of tile J) and the position-gradient partials of its channel group
    (``c_ij = sum_c G_ijc dW_ijc / d_ij``: ``-sum_j c_ij (r_j - r_i)`` for i, ``sum_i c_ij (r_j - r_i)`` for j;
    slot row ``(r*S + slot)*NCG + group``), in chunks of ``JB`` source beads."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    rc, inv_h, kmax = _load_scalars(scal_ptr)
    rr, cnt, incl, total = _items(counts_ptr, R, NCG, RP)
    c = tl.arange(0, FC)
    k4 = tl.arange(0, 4)
    for w in range(pid, total, G):
        r, I, J, slot, cg, ch, s0, s1, s2, tab, h0, row0, col0 = _table_item(w, list_ptr, sc_ptr, tab_ptr, S, T,
                                                                            knots, h_rs, rr, cnt, incl, c, B, FC,
                                                                            FP, NCG, Q, SCALE)
        g0 = r.to(tl.int64) * N
        prow0 = ((r.to(tl.int64) * S + slot) * NCG + cg) * B
        pcol0 = (_col_slot(r, I, slot, S, T) * NCG + cg) * B
        bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
        hI = _load_rows(h_ptr, h0, bi, vi, FP, ch)
        gI = _load_rows(gm_ptr, g0, bi, vi, FP, ch)
        acc = tl.zeros((B, FC), dtype=hI.dtype)
        ax = tl.zeros((B,), dtype=hI.dtype)
        ay = tl.zeros((B,), dtype=hI.dtype)
        az = tl.zeros((B,), dtype=hI.dtype)
        nbj, nvj, nxj, nyj, nzj, nhJ, ngJ = _source_chunk(pos_ptr, h_ptr, gm_ptr, r, J, 0, N, h0, g0, ch, B, JB, FP,
                                                          True)
        for jc in range(0, B // JB):
            bj, vj, xj, yj, zj, hJ, gJ = nbj, nvj, nxj, nyj, nzj, nhJ, ngJ
            nbj, nvj, nxj, nyj, nzj, nhJ, ngJ = _source_chunk(pos_ptr, h_ptr, gm_ptr, r, J, (jc + 1) % (B // JB), N,
                                                              h0, g0, ch, B, JB, FP, True)
            dx, dy, dz, d, mask = _geometry(bi, vi, xi, yi, zi, bj, vj, xj, yj, zj, rc)
            W, dW = _table_filter(d, mask, tab, c, s0, s1, s2, inv_h, kmax, FC, Q, SCALE, True)
            Gp = gI[:, None, :] * hJ[None, :, :] + gJ[None, :, :] * hI[:, None, :]  # W, dW are 0 where masked
            cc = tl.where(mask, tl.sum(Gp * dW, axis=2) / d, 0.0)                   # this group's dE/dd / d
            acc += tl.sum(W * gJ[None, :, :], axis=1)
            ax -= tl.sum(cc * dx, axis=1)
            ay -= tl.sum(cc * dy, axis=1)
            az -= tl.sum(cc * dz, axis=1)
            if I != J:
                _store_rows(colpart_ptr, col0 + jc * JB, JB, FP, ch, tl.sum(W * gI[:, None, :], axis=0))
                _store_rows(pcol_ptr, pcol0 + jc * JB, JB, 4, k4, _xyz0(tl.sum(cc * dx, axis=0),
                                                                       tl.sum(cc * dy, axis=0),
                                                                       tl.sum(cc * dz, axis=0)))
        _store_rows(rowpart_ptr, row0, B, FP, ch, acc)
        _store_rows(prow_ptr, prow0, B, 4, k4, _xyz0(ax, ay, az))


# ------------------------------------------------------------------------------------------ exact filter network


@triton.jit
def _input_half(e, de, A1T_c, a1_c, s1_c, A2T_cg, y, dy, QUANT: tl.constexpr, DOT: tl.constexpr,
                EMU: tl.constexpr, DERIV: tl.constexpr):
    """One half ``c`` of the first layer's output channels for ``PB`` pairs: ``s_c = tanh(e A1_c^T + a1_c)`` (and,
    with ``DERIV``, its forward-mode tangent ``ds_c = (1 - s_c^2) (de A1_c^T)``), added through the second layer's
    rows ``c`` of the program's channel group to ``y`` (and ``dy``) [PB, FC]. One input half at a time: its
    operands die before the other half's are made (what keeps 64-row products in an H100/H200's registers)."""
    u = _dot(e, A1T_c, DOT, EMU)
    if QUANT:
        u = u * s1_c[None, :]
    s = _tanh(u.to(e.dtype) + a1_c[None, :])
    y += _dot(s, A2T_cg, DOT, EMU)
    if DERIV:
        du = _dot(de, A1T_c, DOT, EMU)
        if QUANT:
            du = du * s1_c[None, :]
        dy += _dot(du.to(s.dtype) * (1.0 - s * s), A2T_cg, DOT, EMU)
    return y, dy


@triton.jit
def _exact_filter(d, mask, mu, cf, alpha, lower, rc_rbf, rc_f, wts, BASIS: tl.constexpr, RBF_ENV: tl.constexpr,
                  FILT_ENV: tl.constexpr, QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr,
                  DERIV: tl.constexpr, FC: tl.constexpr):
    """The filter ``W`` [PB, FC] of ``PB`` pairs (distances ``d`` [PB]; zero where not ``mask``) on the program's
    channel group, and with ``DERIV`` ``dW/dd`` in forward mode (else ``W``); ``wts`` from :func:`_load_filter`."""
    A1T_lo, A1T_hi, a1_lo, a1_hi, s1_lo, s1_hi, A2T_lo, A2T_hi, s2 = wts
    e, de = _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
    dmax = d * 0.0 + 1.0
    if DERIV and DOT == 3:
        # float16 operands: de spans many decades (far basis functions) and would underflow; the tangent is
        # linear in it, so carry it scaled to 1 per pair and scale back at the end
        dmax = tl.max(tl.abs(de), axis=1)
        dmax = tl.where(dmax > 0.0, dmax, 1.0)
        de = de / dmax[:, None]
    acc_t: tl.constexpr = tl.float64 if d.dtype == tl.float64 else tl.float32
    y = tl.zeros((d.shape[0], FC), dtype=acc_t)
    dy = tl.zeros((d.shape[0], FC), dtype=acc_t)
    y, dy = _input_half(e, de, A1T_lo, a1_lo, s1_lo, A2T_lo, y, dy, QUANT, DOT, EMU, DERIV)
    y, dy = _input_half(e, de, A1T_hi, a1_hi, s1_hi, A2T_hi, y, dy, QUANT, DOT, EMU, DERIV)
    if QUANT:
        y = y * s2[None, :]
        dy = dy * s2[None, :]
    y = y.to(d.dtype)
    cfv, dcf = _cosine_env(d, rc_f, FILT_ENV)
    W = tl.where(mask[:, None], y * cfv[:, None], 0.0)
    if DERIV:
        dy = dy.to(d.dtype) * dmax[:, None]
        dW = tl.where(mask[:, None], dy * cfv[:, None] + y * dcf[:, None], 0.0)
    else:
        dW = W
    return W, dW


@triton.jit
def _load_filter(A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, ch, KP: tl.constexpr, FP: tl.constexpr):
    """The filter network's weights, staged once per program, transposed as the products take them and in halves
    of the first layer's outputs: ``A1^T`` [KP, FP/2] x 2, ``a1``, ``s1`` [FP/2] x 2, and the program's channel
    group ``ch`` of the second layer, ``A2[ch, c]^T`` [FP/2, FC] x 2, and of ``s2`` [FC]."""
    FH: tl.constexpr = FP // 2
    kk = tl.arange(0, KP)
    lo = tl.arange(0, FH)
    hi = FH + lo
    return (tl.load(A1_ptr + lo[None, :] * KP + kk[:, None]), tl.load(A1_ptr + hi[None, :] * KP + kk[:, None]),
            tl.load(a1_ptr + lo), tl.load(a1_ptr + hi), tl.load(s1_ptr + lo), tl.load(s1_ptr + hi),
            tl.load(A2_ptr + ch[None, :] * FP + lo[:, None]), tl.load(A2_ptr + ch[None, :] * FP + hi[:, None]),
            tl.load(s2_ptr + ch))


@triton.jit
def _exact_setup(A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr, counts_ptr, R, KP: tl.constexpr,
                 FC: tl.constexpr, FP: tl.constexpr, NCG: tl.constexpr, RP: tl.constexpr):
    """An exact-filter program's prologue: its id and the grid, its channel group's channels (the grid is a
    multiple of ``NCG``), the filter's weights (:func:`_load_filter`), the basis and scalars
    (:func:`~flashschnet.kernels.filter_mlp._load_basis`) and the items (:func:`~flashschnet.kernels.tiles._items`)."""
    pid = tl.program_id(0)
    ch = (pid % NCG) * FC + tl.arange(0, FC)
    wts = _load_filter(A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, ch, KP, FP)
    bas = _load_basis(mu_ptr, cf_ptr, scal_ptr, tl.arange(0, KP))
    rr, cnt, incl, total = _items(counts_ptr, R, NCG, RP)
    return pid, tl.num_programs(0), ch, wts, bas, rr, cnt, incl, total


@triton.jit
def _cfconv_fwd_kernel(pos_ptr, h_ptr, list_ptr, counts_ptr, rowpart_ptr, colpart_ptr,
                       A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr, R, N, T, S, h_rs,
                       B: tl.constexpr, JB: tl.constexpr, KP: tl.constexpr, FC: tl.constexpr, FP: tl.constexpr,
                       NCG: tl.constexpr, BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr,
                       QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr, RP: tl.constexpr):
    """``m_i = sum_j W_ij h_j`` with the exact filter network (``scal``: ``[rc_graph, rc_rbf, rc_f, alpha,
    lower]``): per item the tile pair's ``FC`` output channels of the program's group (the grid is a multiple of
    ``NCG``), in chunks of ``JB`` source beads, ``B * JB`` pairs per product (the first layer, all channels, per
    item)."""
    PB: tl.constexpr = B * JB
    pid, G, ch, wts, bas, rr, cnt, incl, total = _exact_setup(A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr,
                                                              scal_ptr, counts_ptr, R, KP, FC, FP, NCG, RP)
    mu, cf, rc, rc_rbf, rc_f, alpha, lower = bas
    for w in range(pid, total, G):
        r, I, J, slot, cg = _item(w, list_ptr, S, T, rr, cnt, incl, NCG)
        h0 = r.to(tl.int64) * h_rs
        row0 = (r.to(tl.int64) * S + slot) * B
        col0 = _col_slot(r, I, slot, S, T) * B
        bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
        hI = _load_rows(h_ptr, h0, bi, vi, FP, ch)
        acc = tl.zeros((B, FC), dtype=hI.dtype)
        for jc in range(0, B // JB):
            bi, vi, bj, vj, dx, dy, dz, d, mask = _pair_geometry(pos_ptr, r, I, J, jc * JB, N, rc, B, JB)
            W, dW = _exact_filter(tl.reshape(d, [PB]), tl.reshape(mask, [PB]), mu, cf, alpha, lower, rc_rbf, rc_f,
                                  wts, BASIS, RBF_ENV, FILT_ENV, QUANT, DOT, EMU, False, FC)
            W3 = tl.reshape(W, [B, JB, FC])
            acc += tl.sum(W3 * _load_rows(h_ptr, h0, bj, vj, FP, ch)[None, :, :], axis=1)
            if I != J:
                _store_rows(colpart_ptr, col0 + jc * JB, JB, FP, ch, tl.sum(W3 * hI[:, None, :], axis=0))
        _store_rows(rowpart_ptr, row0, B, FP, ch, acc)


@triton.jit
def _cfconv_bwd_kernel(pos_ptr, h_ptr, gm_ptr, list_ptr, counts_ptr, rowpart_ptr, colpart_ptr, prow_ptr, pcol_ptr,
                       A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr, R, N, T, S, h_rs,
                       B: tl.constexpr, JB: tl.constexpr, KP: tl.constexpr, FC: tl.constexpr, FP: tl.constexpr,
                       NCG: tl.constexpr, BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr,
                       QUANT: tl.constexpr, DOT: tl.constexpr, EMU: tl.constexpr, RP: tl.constexpr):
    """Both gradients with the exact filter network, per item one channel group (position partials per slot and
    group, as the tables'), ``dW/dd`` in forward mode through the same products."""
    PB: tl.constexpr = B * JB
    k4 = tl.arange(0, 4)
    pid, G, ch, wts, bas, rr, cnt, incl, total = _exact_setup(A1_ptr, a1_ptr, A2_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr,
                                                              scal_ptr, counts_ptr, R, KP, FC, FP, NCG, RP)
    mu, cf, rc, rc_rbf, rc_f, alpha, lower = bas
    for w in range(pid, total, G):
        r, I, J, slot, cg = _item(w, list_ptr, S, T, rr, cnt, incl, NCG)
        h0 = r.to(tl.int64) * h_rs
        g0 = r.to(tl.int64) * N
        bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
        acc = tl.zeros((B, FC), dtype=xi.dtype)
        ax = tl.zeros((B,), dtype=xi.dtype)
        ay = tl.zeros((B,), dtype=xi.dtype)
        az = tl.zeros((B,), dtype=xi.dtype)
        for jc in range(0, B // JB):
            bi, vi, bj, vj, dx, dy, dz, d, mask = _pair_geometry(pos_ptr, r, I, J, jc * JB, N, rc, B, JB)
            W, dW = _exact_filter(tl.reshape(d, [PB]), tl.reshape(mask, [PB]), mu, cf, alpha, lower, rc_rbf, rc_f,
                                  wts, BASIS, RBF_ENV, FILT_ENV, QUANT, DOT, EMU, True, FC)
            gJ = _load_rows(gm_ptr, g0, bj, vj, FP, ch)
            gI = _load_rows(gm_ptr, g0, bi, vi, FP, ch)
            W3 = tl.reshape(W, [B, JB, FC])
            acc += tl.sum(W3 * gJ[None, :, :], axis=1)
            if I != J:      # the slots' rows computed where they are used: fewer registers live through the loop
                _store_rows(colpart_ptr, _col_slot(r, I, slot, S, T) * B + jc * JB, JB, FP, ch,
                            tl.sum(W3 * gI[:, None, :], axis=0))
            hJ = _load_rows(h_ptr, h0, bj, vj, FP, ch)
            hI = _load_rows(h_ptr, h0, bi, vi, FP, ch)
            Gp = gI[:, None, :] * hJ[None, :, :] + gJ[None, :, :] * hI[:, None, :]
            cc = tl.where(mask, tl.sum(Gp * tl.reshape(dW, [B, JB, FC]), axis=2) / d, 0.0)   # dE/dd / d [B, JB]
            ax -= tl.sum(cc * dx, axis=1)
            ay -= tl.sum(cc * dy, axis=1)
            az -= tl.sum(cc * dz, axis=1)
            if I != J:
                _store_rows(pcol_ptr, (_col_slot(r, I, slot, S, T) * NCG + cg) * B + jc * JB, JB, 4, k4,
                            _xyz0(tl.sum(cc * dx, axis=0), tl.sum(cc * dy, axis=0), tl.sum(cc * dz, axis=0)))
        _store_rows(rowpart_ptr, (r * S + slot) * B, B, FP, ch, acc)       # 32 bits: as _col_slot's
        _store_rows(prow_ptr, ((r * S + slot) * NCG + cg) * B, B, 4, k4, _xyz0(ax, ay, az))
