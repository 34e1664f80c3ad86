"""The tile machinery of the CFConv kernels: tiles, tile-pair slots and pair blocks, the flag kernel and the reduce
kernel (only ``@triton.jit`` functions; launched by :mod:`flashschnet.fused.launches`).

Layout. Beads of replica ``r`` are cut into tiles of ``B`` consecutive beads (``T`` tiles). The tile pairs
``(I, J)``, ``I <= J``, of a replica have fixed *slots* (no compaction, no sorting): slot
``r*S + I*T - I*(I-1)/2 + (J - I)`` (``S = T(T+1)/2``) holds a flag, 1 when the two tiles' bounding spheres
come within ``cutoff + skin`` (:func:`_tile_flags_kernel`); the off-diagonal pairs (``I < J``) also have a
partial-buffer row ``r*SO + I*(T-1) - I*(I-1)/2 + (J - I - 1)`` (``SO = T(T-1)/2``). A CFConv kernel
(:mod:`flashschnet.kernels.cfconv`) runs one program per destination tile ``g = r*T + I``, which walks
``J = I .. T-1``, skips inactive slots, and processes an active tile pair one source bead ``j`` at a time: the
``B`` pairs (i in tile I, j) are a *pair block* (:func:`_column_geometry`). Its row side is accumulated in the
program, its column side stored once per (tile pair, j) into the partial buffer; :func:`_tile_reduce_kernel`
adds, per tile, its row partial and its column partials in a fixed order. No atomics: results repeat bitwise,
and do not depend on the flags (an inactive slot would only have added exact zeros).
"""
import triton
import triton.language as tl


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
def _slot_rows(r, I, T, S, SO):
    """Bases such that tile pair ``(I, J)`` of replica ``r`` has flag ``slot + J`` and (``J > I``) partial row
    ``offrow + J``."""
    tri = (I * (I - 1)) // 2
    slot = r * S + I * T - tri - I
    offrow = r * SO + I * (T - 1) - tri - I - 1
    return slot, offrow


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
