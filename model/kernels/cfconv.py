"""Fused Triton kernels of the continuous-filter convolution (CFConv) of CGSchNet.

Only ``@triton.jit`` functions live here; the launchers (argument checks, weight padding, partial buffers,
grids) are in :mod:`flashschnet.fused.triton_ops`.  Conventions shared by all kernels:

* ``KP``/``FP`` are the basis/filter widths padded to powers of two (>= 16, so ``tl.dot`` is legal); the
  launcher pads ``A1`` [FP, KP], ``a1`` [FP], ``A2`` [FP, FP] with zeros and ``offsets``/``coeffs`` [KP] with
  zeros, so padded channels contribute exactly nothing (their ``u = 0``, ``s = 0``, ``y = 0``).
* The basis is written in one form, ``e_k = exp(c_k (z - mu_k)^2) * Crbf(d)`` with ``z = d`` (gaussian,
  ``BASIS == 0``, ``c_k = coeff``) or ``z = exp(alpha (lower - d))`` (expnormal, ``BASIS == 1``, ``c_k = -beta_k``).
* Float scalars (``rc_graph, rc_rbf, rc_f, alpha, lower``) come through a 5-element tensor of the compute dtype
  (``scal_ptr``), never as Python floats (which Triton would pass as fp32 and lose float64 accuracy).
* Arithmetic runs in the dtype of the inputs (float32 or float64); matmuls use ``input_precision="ieee"``.
* Quantized filter weights (``QUANT``): ``A1``/``A2`` hold 16-bit values and ``A1s``/``A2s`` the per-output-
  channel scales in the compute dtype; the kernels dequantize them in registers (:func:`_load_weight`), so
  the arithmetic is the same as with the dequantized weights. Unquantized, the scale pointers are unused.
* Every reduction has a fixed order and there are no atomics, so results repeat bitwise.
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
    """Radial basis of distances ``d`` [BLOCK] with centres ``mu`` / coefficients ``cf`` [KP].

    Returns ``e`` [BLOCK, KP] (envelope included) and ``de/dd`` [BLOCK, KP].
    """
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
def _load_tile_pos(pos_ptr, r, I, N, B: tl.constexpr):
    b = I * B + tl.arange(0, B)
    v = b < N
    row = (r.to(tl.int64) * N + b) * 3
    x = tl.load(pos_ptr + row + 0, mask=v, other=0.0)
    y = tl.load(pos_ptr + row + 1, mask=v, other=0.0)
    z = tl.load(pos_ptr + row + 2, mask=v, other=0.0)
    return b, v, x, y, z


@triton.jit
def _load_tile_feat(ptr, r, b, v, N, F: tl.constexpr, FP: tl.constexpr):
    f = tl.arange(0, FP)
    off = (r.to(tl.int64) * N + b)[:, None] * F + f[None, :]
    return tl.load(ptr + off, mask=v[:, None] & (f < F)[None, :], other=0.0)


@triton.jit
def _pair_geometry(xi, yi, zi, bi, vi, xj, yj, zj, bj, vj, rc_graph):
    """Tile-pair geometry: ``r_j - r_i`` components [B, B], the pair mask, and ``d`` (1 where masked)."""
    dx = xj[None, :] - xi[:, None]
    dy = yj[None, :] - yi[:, None]
    dz = zj[None, :] - zi[:, None]
    d = tl.sqrt(dx * dx + dy * dy + dz * dz)
    mask = vi[:, None] & vj[None, :] & (d < rc_graph) & (bi[:, None] != bj[None, :])
    d = tl.where(mask, d, 1.0)
    return dx, dy, dz, d, mask


@triton.jit
def _load_weight(w_ptr, s_ptr, o, i, LD: tl.constexpr, QUANT: tl.constexpr):
    """Weight elements ``W[o, i]`` for broadcastable index tensors ``o`` (output channel) and ``i`` (input),
    row stride ``LD``. Quantized (``QUANT``): ``q[o, i]`` (16 bits in memory) converted to the dtype of the
    scales and multiplied by the channel's scale ``s[o]`` -- the dequantized weight, in registers."""
    w = tl.load(w_ptr + o * LD + i)
    if QUANT:
        s = tl.load(s_ptr + o)
        w = w.to(s.dtype) * s
    return w


@triton.jit
def _load_filter(A1_ptr, a1_ptr, A2_ptr, A1s_ptr, A2s_ptr, mu_ptr, cf_ptr, scal_ptr, kk, ff,
                 KP: tl.constexpr, FP: tl.constexpr, QUANT: tl.constexpr):
    """Weights, loaded once per program: A1^T [KP, FP], a1 [FP], A2^T [FP, FP] (dequantized if QUANT),
    basis centres and coefficients [KP], and the float scalars (rc_graph, rc_rbf, rc_f, alpha, lower)."""
    A1T = _load_weight(A1_ptr, A1s_ptr, ff[None, :], kk[:, None], KP, QUANT)
    a1 = tl.load(a1_ptr + ff)
    A2T = _load_weight(A2_ptr, A2s_ptr, ff[None, :], ff[:, None], FP, QUANT)
    mu = tl.load(mu_ptr + kk)
    cf = tl.load(cf_ptr + kk)
    return (A1T, a1, A2T, mu, cf, tl.load(scal_ptr + 0), tl.load(scal_ptr + 1), tl.load(scal_ptr + 2),
            tl.load(scal_ptr + 3), tl.load(scal_ptr + 4))


@triton.jit
def _filter(dflat, mu, cf, alpha, lower, rc_rbf, rc_f, A1T, a1, A2T,
            BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr):
    """The filter network on distances ``dflat`` [BB], all in registers: basis ``e`` and ``de/dd``
    [BB, KP], ``s = tanh(e A1^T + a1)`` and ``y = s A2^T`` [BB, FP], the filter envelope and its
    derivative [BB]. ``W = y * env``."""
    e, de = _basis(dflat, mu, cf, alpha, lower, rc_rbf, BASIS, RBF_ENV)
    u = tl.dot(e, A1T, input_precision="ieee") + a1[None, :]
    s = _tanh(u)
    y = tl.dot(s, A2T, input_precision="ieee")
    cfv, dcf = _cosine_env(dflat, rc_f, FILT_ENV)
    return e, de, s, y, cfv, dcf


@triton.jit
def _cfconv_fwd_kernel(pos_ptr, h_ptr, pairs_ptr, row_ptr_ptr, rowbuf_ptr, colbuf_ptr,
                       A1_ptr, a1_ptr, A2_ptr, A1s_ptr, A2s_ptr, mu_ptr, cf_ptr, scal_ptr, N, T,
                       B: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, F: tl.constexpr, FP: tl.constexpr,
                       BASIS: tl.constexpr, RBF_ENV: tl.constexpr, FILT_ENV: tl.constexpr, QUANT: tl.constexpr):
    """Program ``g = r*T + I``: for each tile pair ``(r, I, J)`` of its CSR row, ``W`` [B*B, FP] in
    registers; row part ``sum_j W_ij h_j`` accumulated, column part ``sum_i W_ij h_i`` (``I < J``) stored
    to ``colbuf[q]``; finally ``rowbuf[g] = acc``. Partial buffers have width ``F``."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    kk = tl.arange(0, KP)
    ff = tl.arange(0, FP)
    bl = tl.arange(0, B)
    A1T, a1, A2T, mu, cf, rc_graph, rc_rbf, rc_f, alpha, lower = _load_filter(
        A1_ptr, a1_ptr, A2_ptr, A1s_ptr, A2s_ptr, mu_ptr, cf_ptr, scal_ptr, kk, ff, KP, FP, QUANT)

    bi, vi, xi, yi, zi = _load_tile_pos(pos_ptr, r, I, N, B)
    hI = _load_tile_feat(h_ptr, r, bi, vi, N, F, FP)
    acc = tl.zeros((B, FP), dtype=hI.dtype)
    fmask = (ff < F)[None, :]
    start = tl.load(row_ptr_ptr + g).to(tl.int64)   # int64 loop index: q * B * F cannot overflow
    end = tl.load(row_ptr_ptr + g + 1).to(tl.int64)
    for q in range(start, end):
        J = tl.load(pairs_ptr + q * 3 + 2)
        bj, vj, xj, yj, zj = _load_tile_pos(pos_ptr, r, J, N, B)
        hJ = _load_tile_feat(h_ptr, r, bj, vj, N, F, FP)
        dx, dy, dz, d, mask = _pair_geometry(xi, yi, zi, bi, vi, xj, yj, zj, bj, vj, rc_graph)
        dflat = tl.reshape(d, (B * B,))
        e, de, s, y, cfv, dcf = _filter(dflat, mu, cf, alpha, lower, rc_rbf, rc_f, A1T, a1, A2T,
                                        BASIS, RBF_ENV, FILT_ENV)
        W = tl.reshape(y * cfv[:, None], (B, B, FP))
        W = tl.where(mask[:, :, None], W, 0.0)
        acc += tl.sum(W * hJ[None, :, :], axis=1)
        if I < J:
            col = tl.sum(W * hI[:, None, :], axis=0)
            off = q * (B * F) + bl[:, None] * F + ff[None, :]
            tl.store(colbuf_ptr + off, col, mask=fmask)
    off = g.to(tl.int64) * (B * F) + bl[:, None] * F + ff[None, :]
    tl.store(rowbuf_ptr + off, acc, mask=fmask)


@triton.jit
def _cfconv_bwd_pos_kernel(pos_ptr, h_ptr, gm_ptr, pairs_ptr, row_ptr_ptr, rowbuf_ptr, colbuf_ptr,
                           A1_ptr, a1_ptr, A2_ptr, A1s_ptr, A2s_ptr, mu_ptr, cf_ptr, scal_ptr, N, T,
                           B: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, F: tl.constexpr,
                           FP: tl.constexpr, BASIS: tl.constexpr, RBF_ENV: tl.constexpr,
                           FILT_ENV: tl.constexpr, QUANT: tl.constexpr):
    """dE/dpos through the distance dependence of ``W``, given ``gm = dE/dm``. Same structure as the
    forward; per unordered pair ``G = gm_i h_j + gm_j h_i`` (also on the diagonal tile, where the row part
    over all ordered (i, j) then covers both members). Partial buffers have width 3."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    kk = tl.arange(0, KP)
    ff = tl.arange(0, FP)
    bl = tl.arange(0, B)
    A1T, a1, A2T, mu, cf, rc_graph, rc_rbf, rc_f, alpha, lower = _load_filter(
        A1_ptr, a1_ptr, A2_ptr, A1s_ptr, A2s_ptr, mu_ptr, cf_ptr, scal_ptr, kk, ff, KP, FP, QUANT)
    A1 = _load_weight(A1_ptr, A1s_ptr, ff[:, None], kk[None, :], KP, QUANT)    # [FP, KP]  (backward only)
    A2 = _load_weight(A2_ptr, A2s_ptr, ff[:, None], ff[None, :], FP, QUANT)    # [FP, FP]

    bi, vi, xi, yi, zi = _load_tile_pos(pos_ptr, r, I, N, B)
    hI = _load_tile_feat(h_ptr, r, bi, vi, N, F, FP)
    gI = _load_tile_feat(gm_ptr, r, bi, vi, N, F, FP)
    ax = tl.zeros((B,), dtype=xi.dtype)
    ay = tl.zeros((B,), dtype=xi.dtype)
    az = tl.zeros((B,), dtype=xi.dtype)
    start = tl.load(row_ptr_ptr + g).to(tl.int64)   # int64 loop index: q * B * F cannot overflow
    end = tl.load(row_ptr_ptr + g + 1).to(tl.int64)
    for q in range(start, end):
        J = tl.load(pairs_ptr + q * 3 + 2)
        bj, vj, xj, yj, zj = _load_tile_pos(pos_ptr, r, J, N, B)
        hJ = _load_tile_feat(h_ptr, r, bj, vj, N, F, FP)
        gJ = _load_tile_feat(gm_ptr, r, bj, vj, N, F, FP)
        dx, dy, dz, d, mask = _pair_geometry(xi, yi, zi, bi, vi, xj, yj, zj, bj, vj, rc_graph)
        dflat = tl.reshape(d, (B * B,))
        e, de, s, y, cfv, dcf = _filter(dflat, mu, cf, alpha, lower, rc_rbf, rc_f, A1T, a1, A2T,
                                        BASIS, RBF_ENV, FILT_ENV)
        G3 = gI[:, None, :] * hJ[None, :, :] + gJ[None, :, :] * hI[:, None, :]
        G3 = tl.where(mask[:, :, None], G3, 0.0)
        G = tl.reshape(G3, (B * B, FP))
        gC = tl.sum(G * y, axis=1)                               # [BB]
        dsv = tl.dot(G * cfv[:, None], A2, input_precision="ieee")
        du = dsv * (1.0 - s * s)
        dE = tl.dot(du, A1, input_precision="ieee")              # [BB, KP]
        ddv = tl.sum(dE * de, axis=1) + gC * dcf                # [BB]
        c = tl.where(mask, tl.reshape(ddv, (B, B)) / d, 0.0)    # dd / d, [B, B]
        # member i: dd (r_i - r_j)/d = -c * (r_j - r_i)
        ax -= tl.sum(c * dx, axis=1)
        ay -= tl.sum(c * dy, axis=1)
        az -= tl.sum(c * dz, axis=1)
        if I < J:
            base = colbuf_ptr + q * (B * 3) + bl * 3
            tl.store(base + 0, tl.sum(c * dx, axis=0))
            tl.store(base + 1, tl.sum(c * dy, axis=0))
            tl.store(base + 2, tl.sum(c * dz, axis=0))
    base = rowbuf_ptr + g.to(tl.int64) * (B * 3) + bl * 3
    tl.store(base + 0, ax)
    tl.store(base + 1, ay)
    tl.store(base + 2, az)


@triton.jit
def _tile_reduce_kernel(rowbuf_ptr, colbuf_ptr, col_perm_ptr, col_ptr_ptr, out_ptr, N, T,
                        B: tl.constexpr, W: tl.constexpr, WP: tl.constexpr):
    """``out[r, I*B + b, :W] = rowbuf[g, b] + sum over c in col_ptr[g]:col_ptr[g+1] of
    colbuf[col_perm[c], b]`` (``g = r*T + I``), in that fixed order; padding beads are not stored."""
    g = tl.program_id(0)
    r = g // T
    I = g % T
    b = tl.arange(0, B)
    w = tl.arange(0, WP)
    wm = (w < W)[None, :]
    off = b[:, None] * W + w[None, :]
    acc = tl.load(rowbuf_ptr + g.to(tl.int64) * (B * W) + off, mask=wm, other=0.0)
    start = tl.load(col_ptr_ptr + g)
    end = tl.load(col_ptr_ptr + g + 1)
    for c in range(start, end):
        q = tl.load(col_perm_ptr + c).to(tl.int64)
        acc += tl.load(colbuf_ptr + q * (B * W) + off, mask=wm, other=0.0)
    bead = I * B + b
    out = out_ptr + (r.to(tl.int64) * N + bead)[:, None] * W + w[None, :]
    tl.store(out, acc, mask=(bead < N)[:, None] & wm)
