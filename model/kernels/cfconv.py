"""Fused Triton kernels of the continuous-filter convolution (CFConv) of CGSchNet.

Only ``@triton.jit`` functions live here; the launchers (argument checks, cached padded weights, persistent
buffers, grids, the per-kernel ``num_warps``/``num_stages``) are in :mod:`flashschnet.fused.triton_ops`.

Layout. Beads of replica ``r`` are cut into tiles of ``B`` consecutive beads (``T`` tiles). The tile pairs
``(I, J)``, ``I <= J``, of a replica have fixed *slots* (no compaction, no sorting): slot
``r*S + I*T - I*(I-1)/2 + (J - I)`` (``S = T(T+1)/2``) holds a flag, 1 when the two tiles' bounding spheres
come within ``cutoff + skin`` (:func:`_tile_flags_kernel`); the off-diagonal pairs (``I < J``) also have a
partial-buffer row ``r*SO + I*(T-1) - I*(I-1)/2 + (J - I - 1)`` (``SO = T(T-1)/2``). One program per
destination tile ``g = r*T + I`` walks ``J = I .. T-1``, skips inactive slots, and processes an active tile
pair one source bead ``j`` at a time: the ``B`` pairs (i in tile I, j) are a *pair block* -- distances, radial
basis, the filter network and the filter ``W`` [B, FP] entirely in registers (no per-edge tensor is written;
every tensor 2-D, the products ``[B, KP] x [KP, FP]`` and ``[B, FP] x [FP, FP]`` on tensor cores), each filter
used for both directions: the row side (``m_i += W_ij h_j``) accumulated in the program, the column side
(``m_j += sum_i W_ij h_i``) stored once per (tile pair, j) into the partial buffer. A reduce kernel adds, per
tile, its row partial and its column partials in a fixed order. No atomics: results repeat bitwise, and do
not depend on the flags (an inactive slot would only have added exact zeros).

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
def _load_beads(pos_ptr, r, b0, N, n: tl.constexpr):
    """Beads ``b0 .. b0+n-1`` of replica ``r``: indices, validity, x, y, z."""
    b = b0 + tl.arange(0, n)
    v = b < N
    row = (r.to(tl.int64) * N + b) * 3
    x = tl.load(pos_ptr + row + 0, mask=v, other=0.0)
    y = tl.load(pos_ptr + row + 1, mask=v, other=0.0)
    z = tl.load(pos_ptr + row + 2, mask=v, other=0.0)
    return b, v, x, y, z


@triton.jit
def _load_feat(ptr, r, b, v, N, F: tl.constexpr, C0: tl.constexpr, FC: tl.constexpr):
    """Channels ``C0 .. C0+FC-1`` of the feature rows of beads ``b`` [n, FC] (zero where not ``v`` or in the
    padding channels)."""
    f = C0 + tl.arange(0, FC)
    off = (r.to(tl.int64) * N + b)[:, None] * F + f[None, :]
    return tl.load(ptr + off, mask=v[:, None] & (f < F)[None, :], other=0.0)


@triton.jit
def _load_row(ptr, r, j, vj, N, F: tl.constexpr, C0: tl.constexpr, FC: tl.constexpr):
    """Channels ``C0 .. C0+FC-1`` of the feature row of bead ``j`` [FC]."""
    f = C0 + tl.arange(0, FC)
    return tl.load(ptr + (r.to(tl.int64) * N + j) * F + f, mask=(f < F) & vj, other=0.0)


@triton.jit
def _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc_graph):
    """Geometry of the pairs (i in the destination tile, source bead ``j``): ``r_j - r_i`` components [B],
    the pair mask, ``d`` [B] (1 where masked), and whether ``j`` is a real bead."""
    vj = j < N
    base = (r.to(tl.int64) * N + j) * 3
    xj = tl.load(pos_ptr + base + 0, mask=vj, other=0.0)
    yj = tl.load(pos_ptr + base + 1, mask=vj, other=0.0)
    zj = tl.load(pos_ptr + base + 2, mask=vj, other=0.0)
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    d = tl.sqrt(dx * dx + dy * dy + dz * dz)
    mask = vi & vj & (d < rc_graph) & (bi != j)
    d = tl.where(mask, d, 1.0)
    return dx, dy, dz, d, mask, vj


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
def _slot_rows(r, I, T, S, SO):
    """Bases such that tile pair ``(I, J)`` of replica ``r`` has flag ``slot + J`` and (``J > I``) partial row
    ``offrow + J``."""
    tri = (I * (I - 1)) // 2
    slot = r * S + I * T - tri - I
    offrow = r * SO + I * (T - 1) - tri - I - 1
    return slot, offrow


@triton.jit
def _cfconv_fwd_kernel(pos_ptr, h_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr,
                       A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr,
                       N, T, S, SO,
                       B: tl.constexpr, KP: tl.constexpr, F: tl.constexpr, FP: tl.constexpr,
                       BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr, QUANT: tl.constexpr,
                       DOT: tl.constexpr, EMU: tl.constexpr):
    """``m_i = sum_j W_ij h_j``: program ``g = r*T + I`` writes its row partial ``rowbuf[g]`` [B, F] and, per
    active off-diagonal tile pair, the column partial ``colbuf[row]`` [B, F]. A pair block is the B beads of
    tile I against one source bead j (all 2-D: [B, KP] / [B, FP] products)."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    kk = tl.arange(0, KP)
    ff = tl.arange(0, FP)
    # weights and scalars, staged once per program
    A1T = tl.load(A1T_ptr + kk[:, None] * FP + ff[None, :])
    A2T = tl.load(A2T_ptr + ff[:, None] * FP + ff[None, :])
    a1 = tl.load(a1_ptr + ff)
    s1 = tl.load(s1_ptr + ff)
    s2 = tl.load(s2_ptr + ff)
    mu, cf, rc_graph, rc_rbf, rc_f, alpha, lower = _load_basis(mu_ptr, cf_ptr, scal_ptr, kk)

    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
    hI = _load_feat(h_ptr, r, bi, vi, N, F, 0, FP)
    acc = tl.zeros((B, FP), dtype=hI.dtype)
    fm = ff < F
    slot, offrow = _slot_rows(r, I, T, S, SO)
    for J in range(I, T):
        if tl.load(flags_ptr + slot + J) != 0:
            for jj in range(0, tl.minimum(N - J * B, B)):     # the real beads of tile J (a runtime bound)
                j = J * B + jj
                dx, dy, dz, d, mask, vj = _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc_graph)
                hj = _load_row(h_ptr, r, j, vj, N, F, 0, FP)
                e, de = _basis(d, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
                s = _first_layer(e, A1T, a1, s1, QUANT, DOT, EMU)
                y = _second_layer(s, A2T, s2, QUANT, DOT, EMU)
                cfv, dcf = _cosine_env(d, rc_f, FILT_ENV)
                W = tl.where(mask[:, None], y * cfv[:, None], 0.0)             # [B, FP]
                acc += W * hj[None, :]
                if J > I:
                    col = tl.sum(W * hI, axis=0)                                # [FP]
                    tl.store(colbuf_ptr + ((offrow + J).to(tl.int64) * B + jj) * F + ff, col, mask=fm)
    bl = tl.arange(0, B)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
    tl.store(rowbuf_ptr + off, acc, mask=fm[None, :])


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


@triton.jit
def _cfconv_bwd_kernel(pos_ptr, h_ptr, gm_ptr, flags_ptr, rowbuf_ptr, colbuf_ptr, prow_ptr, pcol_ptr,
                       A1T_ptr, a1_ptr, A2T_ptr, s1_ptr, s2_ptr, mu_ptr, cf_ptr, scal_ptr,
                       N, T, S, SO,
                       B: tl.constexpr, KP: tl.constexpr, F: tl.constexpr, FP: tl.constexpr,
                       BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr, QUANT: tl.constexpr,
                       DOT: tl.constexpr, EMU: tl.constexpr):
    """Both gradients of a block's aggregation given ``gm = dE/dm``, each filter evaluated once:
    ``gh_j = sum_i W_ij gm_i`` (partials ``rowbuf``/``colbuf``, width F) and ``dE/dr`` through the distance
    dependence of ``W`` with ``G_ij = gm_i h_j + gm_j h_i`` per unordered pair (partials ``prow``/``pcol``,
    width 3). ``dW/dd`` is computed in forward mode (the tangent of the basis through the same products).
    Every product works on halves of the filter channels (weights staged as [KP, FP/2] and [FP/2, FP/2]
    blocks: :func:`_first_half`, :func:`_second_from_half`, :func:`_bwd_half`), one input half at a time, so
    the operands held in registers stay few enough for an H100/H200 (``tools/gpu_fit.py``)."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    FC: tl.constexpr = FP // 2
    kk = tl.arange(0, KP)
    fh = tl.arange(0, FC)
    # weights and scalars, staged once per program, in blocks of half the channels
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
    mu, cf, rc_graph, rc_rbf, rc_f, alpha, lower = _load_basis(mu_ptr, cf_ptr, scal_ptr, kk)

    bi, vi, xi, yi, zi = _load_beads(pos_ptr, r, I * B, N, B)
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
                dx, dy, dz, d, mask, vj = _column_geometry(pos_ptr, r, j, N, xi, yi, zi, bi, vi, rc_graph)
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
                row_lo, dd_lo, col_lo = _bwd_half(y_lo + p_lo, yd_lo + pd_lo, s2_lo, dmax, cfv, dcf, mask, hI_lo,
                                                  gI_lo, hj, gj, QUANT, DOT)
                acc_lo += row_lo
                hj = _load_row(h_ptr, r, j, vj, N, F, FC, FC)
                gj = _load_row(gm_ptr, r, j, vj, N, F, FC, FC)
                row_hi, dd_hi, col_hi = _bwd_half(y_hi + p_hi, yd_hi + pd_hi, s2_hi, dmax, cfv, dcf, mask, hI_hi,
                                                  gI_hi, hj, gj, QUANT, DOT)
                acc_hi += row_hi
                c = tl.where(mask, (dd_lo + dd_hi) / d, 0.0)                      # dE/dd / d
                ax -= c * dx                                                    # member i: -c (r_j - r_i)
                ay -= c * dy
                az -= c * dz
                if J > I:
                    row = (offrow + J).to(tl.int64) * B + jj
                    tl.store(colbuf_ptr + row * F + fh, col_lo, mask=fh < F)
                    tl.store(colbuf_ptr + row * F + FC + fh, col_hi, mask=FC + fh < F)
                    tl.store(pcol_ptr + row * 3 + 0, tl.sum(c * dx, axis=0))
                    tl.store(pcol_ptr + row * 3 + 1, tl.sum(c * dy, axis=0))
                    tl.store(pcol_ptr + row * 3 + 2, tl.sum(c * dz, axis=0))
    bl = tl.arange(0, B)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + fh[None, :]
    tl.store(rowbuf_ptr + off, acc_lo, mask=(fh < F)[None, :])
    tl.store(rowbuf_ptr + off + FC, acc_hi, mask=(FC + fh < F)[None, :])
    base = prow_ptr + g.to(tl.int64) * (B * 3) + bl * 3
    tl.store(base + 0, ax)
    tl.store(base + 1, ay)
    tl.store(base + 2, az)


@triton.jit
def _tile_reduce_kernel(rowbuf_ptr, colbuf_ptr, flags_ptr, out_ptr, N, T, S, SO,
                        B: tl.constexpr, W: tl.constexpr, WP: tl.constexpr):
    """``out[r, J*B + b, :W] = rowbuf[g, b] + sum over active I < J (ascending) of colbuf[row(I, J), b]``
    (``g = r*T + J``); padding beads are not stored."""
    g = tl.program_id(0)
    r = g // T
    J = g % T
    b = tl.arange(0, B)
    w = tl.arange(0, WP)
    wm = (w < W)[None, :]
    off = b[:, None] * W + w[None, :]
    acc = tl.load(rowbuf_ptr + g.to(tl.int64) * (B * W) + off, mask=wm, other=0.0)
    for I in range(0, J):
        slot, offrow = _slot_rows(r, I, T, S, SO)
        if tl.load(flags_ptr + slot + J) != 0:
            acc += tl.load(colbuf_ptr + (offrow + J).to(tl.int64) * (B * W) + off, mask=wm, other=0.0)
    bead = J * B + b
    out = out_ptr + (r.to(tl.int64) * N + bead)[:, None] * W + w[None, :]
    tl.store(out, acc, mask=(bead < N)[:, None] & wm)


@triton.jit
def _tile_flags_kernel(pos_ptr, ref_ptr, flags_ptr, builds_ptr, radius, half_skin_sq, N, T, S,
                       B: tl.constexpr, TP: tl.constexpr):
    """Per replica ``r`` (one program): if some bead moved more than half the skin since the last build (or
    is NaN now or was then: ``ref`` starts as NaN), recompute the replica's tile-pair flags -- bounding spheres
    (centre = mean of the tile's real beads) within ``radius`` (cutoff + skin) -- store the positions as the
    new reference and count the build in ``builds[r]``; otherwise do nothing. Decided on the device: no host
    synchronisation."""
    r = tl.program_id(0)
    t = tl.arange(0, TP)
    bb = tl.arange(0, B)
    bead = t[:, None] * B + bb[None, :]                                  # [TP, B]
    valid = bead < N
    row = (r.to(tl.int64) * N + bead) * 3
    x = tl.load(pos_ptr + row + 0, mask=valid, other=0.0)
    y = tl.load(pos_ptr + row + 1, mask=valid, other=0.0)
    z = tl.load(pos_ptr + row + 2, mask=valid, other=0.0)
    rx = tl.load(ref_ptr + row + 0, mask=valid, other=0.0)
    ry = tl.load(ref_ptr + row + 1, mask=valid, other=0.0)
    rz = tl.load(ref_ptr + row + 2, mask=valid, other=0.0)
    d2 = (x - rx) * (x - rx) + (y - ry) * (y - ry) + (z - rz) * (z - rz)
    fresh = (d2 <= half_skin_sq) | (~valid)                              # False for NaN
    stale = tl.sum(tl.where(fresh, 0, 1).to(tl.int32), axis=1)
    stale = tl.sum(stale, axis=0)
    if stale > 0:
        vf = valid.to(x.dtype)
        cnt = tl.maximum(tl.sum(vf, axis=1), 1.0)
        cx = tl.sum(x * vf, axis=1) / cnt
        cy = tl.sum(y * vf, axis=1) / cnt
        cz = tl.sum(z * vf, axis=1) / cnt
        ex = x - cx[:, None]
        ey = y - cy[:, None]
        ez = z - cz[:, None]
        rad = tl.max(tl.where(valid, tl.sqrt(ex * ex + ey * ey + ez * ez), 0.0), axis=1)      # [TP]
        ddx = cx[:, None] - cx[None, :]
        ddy = cy[:, None] - cy[None, :]
        ddz = cz[:, None] - cz[None, :]
        dc = tl.sqrt(ddx * ddx + ddy * ddy + ddz * ddz)
        near = (dc - rad[:, None] - rad[None, :]) < radius
        near = near | (dc != dc)                                         # NaN positions: keep every slot
        I = t[:, None]
        J = t[None, :]
        upper = (I <= J) & (J < T)
        slot = r * S + I * T - (I * (I - 1)) // 2 + (J - I)
        tl.store(flags_ptr + slot, near.to(tl.int8), mask=upper)
        tl.store(ref_ptr + row + 0, x, mask=valid)
        tl.store(ref_ptr + row + 1, y, mask=valid)
        tl.store(ref_ptr + row + 2, z, mask=valid)
        tl.store(builds_ptr + r, tl.load(builds_ptr + r) + 1)
