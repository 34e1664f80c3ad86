"""The tile machinery of the CFConv and node kernels: tiles, tile-pair slots, the device-side work list, items, the
fixed-order sums of partials, and the flag and reduce kernels (only ``@triton.jit`` functions; launched by
:mod:`flashschnet.fused.launches`).

Layout. Beads of replica ``r`` are cut into tiles of ``B`` consecutive beads (``T`` tiles). The tile pairs
``(I, J)``, ``I <= J``, of a replica have fixed *slots* ``I*T - I*(I-1)/2 + (J - I)`` (``S = T(T+1)/2`` per
replica, :func:`_slot`), each with a flag: 1 when the two tiles' bounding spheres come within ``cutoff + skin``.
When :func:`_tile_flags_kernel` rebuilds a replica's flags (only when one of its beads moved more than half the
skin), it also writes the replica's **work list**: its active tile pairs, compacted in slot order, as
``list[r*S + k] = I * 65536 + J`` for ``k < count[r]`` (entries at and beyond ``count[r]`` are never read).

Items. A CFConv kernel (:mod:`flashschnet.kernels.cfconv`) runs a fixed number of persistent programs over
*items*: item ``w`` is channel group ``w % NCG`` of the ``w // NCG``-th active tile pair, counted over the
replicas in order (:func:`_items`, :func:`_item`: the replicas' counts are read once per program and their
prefix sums locate an item's replica, so no host synchronisation and no global compaction pass). Program ``p``
takes items ``p, p + G, p + 2G, ...``; with ``G`` a multiple of ``NCG`` a program keeps one channel group (its
slice of a filter table stays in its multiprocessor's L1).

Partials. An item writes its tile pair's *row* partial (destination tile I, width-W channels of its group) into
the pair's slot of the row buffer (``[R*S*NP, B, W]``: ``NP`` partials per slot, one per channel group for the
position gradient, else 1) and, off the diagonal, its *column* partial (destination tile J) into the pair's
*column slot* of the column buffer (``[R*C*NP, B, W]``: ``C = S - T`` off-diagonal pairs per replica,
:func:`_col_slot`; a diagonal pair has no column partial, so the column buffers hold no slot for it). No
atomics: :func:`_sum_partials` adds a destination tile's partials over the source tiles in ascending order
(:data:`SOURCES_PER_STEP` sources per step, their loads in flight together), so results repeat bitwise, do not
depend on the number of programs or the order in which items run, and do not depend on the flags either (an
inactive slot's true contribution is exactly zero: it is simply not added).
"""
import triton
import triton.language as tl

#: source tiles whose partials one step of :func:`_sum_partials` loads together
SOURCES_PER_STEP = tl.constexpr(4)


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
def _load_rows(ptr, row0, b, v, W: tl.constexpr, c):
    """Rows ``row0 + b`` [n, C] of a row-major buffer of width ``W``, columns ``c`` (zero where not ``v``)."""
    off = (row0 + b.to(tl.int64))[:, None] * W + c[None, :]
    return tl.load(ptr + off, mask=v[:, None], other=0.0)


@triton.jit
def _slot(I, J, T):
    """The slot of tile pair ``(I, J)``, ``I <= J``, within its replica."""
    return I * T - (I * (I - 1)) // 2 + (J - I)


@triton.jit
def _col_slot(r, I, slot, S, T):
    """The column slot of replica ``r``'s off-diagonal pair ``(I, J)``, ``I < J``, of slot ``slot``, over all
    replicas (``S - T`` per replica: the slots in order, less the ``I + 1`` diagonal ones before it). In 32 bits
    (what keeps the kernels at their register limit spill-free): the workspace refuses shapes whose partial rows
    would not fit (:class:`~flashschnet.fused.workspace.Workspace`)."""
    return r * (S - T) + slot - I - 1


@triton.jit
def _items(counts_ptr, R, NCG: tl.constexpr, RP: tl.constexpr):
    """The replicas' active tile-pair counts [RP], their inclusive prefix sums and the number of items (all
    replicas' active pairs times ``NCG`` channel groups)."""
    rr = tl.arange(0, RP)
    cnt = tl.load(counts_ptr + rr, mask=rr < R, other=0)
    incl = tl.cumsum(cnt, 0)
    return rr, cnt, incl, tl.sum(cnt, axis=0) * NCG


@triton.jit
def _item(w, list_ptr, S, T, rr, cnt, incl, NCG: tl.constexpr):
    """Item ``w``: ``(r, I, J, slot, channel group)``."""
    pair = w // NCG
    r = tl.sum((incl <= pair).to(tl.int32), axis=0)
    k = pair - tl.sum(tl.where(rr < r, cnt, 0), axis=0)
    entry = tl.load(list_ptr + r.to(tl.int64) * S + k)
    I = entry // 65536
    J = entry % 65536
    return r, I, J, _slot(I, J, T), w % NCG


@triton.jit
def _sum_partials(rowpart_ptr, colpart_ptr, flags_ptr, r, X, T, S, NP: tl.constexpr, B: tl.constexpr,
                  W: tl.constexpr, NPP: tl.constexpr, STRIDE: tl.constexpr):
    """Destination tile ``X`` of replica ``r``: the sum [B, W] of its partials (``W`` columns of buffers of row
    width ``STRIDE``) -- per source tile ``s`` (ascending), the column partials of pair ``(s, X)`` for ``s < X``
    and the row partials of ``(X, s)`` for ``s >= X``, each slot's ``NP`` partials (``NPP`` = NP rounded up to a
    power of two) -- for the active slots only. Fixed order: steps of :data:`SOURCES_PER_STEP` sources, summed as
    loaded, added one step after the other."""
    SC: tl.constexpr = SOURCES_PER_STEP
    q = tl.arange(0, SC)
    p = tl.arange(0, NPP)
    b = tl.arange(0, B)
    c = tl.arange(0, W)
    acc = tl.zeros((B, W), dtype=rowpart_ptr.dtype.element_ty)
    for s0 in range(0, T, SC):
        s = s0 + q                                                          # [SC] source tiles
        lo = tl.minimum(s, X)
        hi = tl.maximum(s, X)
        within = _slot(lo, hi, T)
        slot = r.to(tl.int64) * S + within
        on = (s < T) & (tl.load(flags_ptr + slot, mask=s < T, other=0) != 0)
        col_side = s < X
        slot = tl.where(col_side, _col_slot(r, lo, within, S, T), slot)    # s < X: the column slot of (s, X)
        row = (slot[:, None] * NP + p[None, :])                             # [SC, NPP]
        off = (row[:, :, None, None] * B + b[None, None, :, None]) * STRIDE + c[None, None, None, :]
        m = (on[:, None] & (p < NP)[None, :])[:, :, None, None]
        part = tl.load(tl.where(col_side[:, None, None, None], colpart_ptr, rowpart_ptr) + off, mask=m, other=0.0)
        acc += tl.sum(tl.sum(part, axis=1), axis=0)
    return acc


@triton.jit
def _tile_reduce_kernel(rowpart_ptr, colpart_ptr, flags_ptr, out_ptr, N, T, S,
                        B: tl.constexpr, W: tl.constexpr, WO: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
                        WC: tl.constexpr):
    """``out[r, X*B + b, :WO]`` = :func:`_sum_partials` of tile ``X`` (program ``g = r*T + X``), in column blocks
    of ``WC`` of the partials' width ``W`` (the plain reduction of the unfused path: the fused node kernels reduce
    in their prologue instead). Padding beads and channels are not stored."""
    g = tl.program_id(0)
    r = g // T
    X = g % T
    b = tl.arange(0, B)
    bead = X * B + b
    for c0 in tl.static_range(0, W, WC):
        acc = _sum_partials(rowpart_ptr + c0, colpart_ptr + c0, flags_ptr, r, X, T, S, NP, B, WC, NPP, W)
        c = c0 + tl.arange(0, WC)
        out = out_ptr + (r.to(tl.int64) * N + bead)[:, None] * WO + c[None, :]
        tl.store(out, acc, mask=(bead < N)[:, None] & (c < WO)[None, :])


@triton.jit
def _tile_flags_kernel(pos_ptr, posm_ptr, ref_ptr, flags_ptr, list_ptr, counts_ptr, builds_ptr, length_scale, radius,
                       half_skin_sq, N, T, S, B: tl.constexpr, TP: tl.constexpr):
    """Per replica ``r`` (one program): the positions in the model's length unit (``posm = pos * length_scale``);
    then, if some bead moved more than half the skin since the last build (or is NaN now or was then: ``ref``
    starts as NaN), recompute the replica's tile-pair flags -- bounding spheres (centre = mean of the tile's real
    beads) within ``radius`` (cutoff + skin) -- and its work list (the active slots compacted in slot order, and
    their count), store the positions as the new reference and count the build in ``builds[r]``; otherwise
    leave flags and list as they are. Decided on the device: no host synchronisation."""
    r = tl.program_id(0)
    t = tl.arange(0, TP)
    bb = tl.arange(0, B)
    bead = t[:, None] * B + bb[None, :]                                  # [TP, B]
    valid = bead < N
    row = (r.to(tl.int64) * N + bead) * 3
    x = tl.load(pos_ptr + row + 0, mask=valid, other=0.0) * length_scale
    y = tl.load(pos_ptr + row + 1, mask=valid, other=0.0) * length_scale
    z = tl.load(pos_ptr + row + 2, mask=valid, other=0.0) * length_scale
    tl.store(posm_ptr + row + 0, x, mask=valid)
    tl.store(posm_ptr + row + 1, y, mask=valid)
    tl.store(posm_ptr + row + 2, z, mask=valid)
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
        I = t[:, None] + t[None, :] * 0
        J = t[None, :] + t[:, None] * 0
        upper = (I <= J) & (J < T)
        slot = r * S + _slot(I, J, T)
        tl.store(flags_ptr + slot, near.to(tl.int8), mask=upper)
        act = tl.reshape((near & upper).to(tl.int32), [TP * TP])          # row-major = slot order
        at = tl.cumsum(act, 0) - act
        tl.store(list_ptr + r.to(tl.int64) * S + at, tl.reshape(I * 65536 + J, [TP * TP]), mask=act != 0)
        tl.store(counts_ptr + r, tl.sum(act, axis=0))
        tl.store(ref_ptr + row + 0, x, mask=valid)
        tl.store(ref_ptr + row + 1, y, mask=valid)
        tl.store(ref_ptr + row + 2, z, mask=valid)
        tl.store(builds_ptr + r, tl.load(builds_ptr + r) + 1)
