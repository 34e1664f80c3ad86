"""Fused node layers of CGSchNet: each interaction block's reduction with its node-level layers in one kernel,
forward and backward (only ``@triton.jit`` functions; launched by :mod:`flashschnet.fused.launches`; the
plain-PyTorch reference is :func:`flashschnet.fused.nodes.energy_forces_fused`, the same arithmetic in PyTorch
ops).

Persistent programs over destination tiles ``g = r*T + X`` (``B`` beads each; program ``p`` takes ``p, p+G,
...``). A tile's prologue sums its CFConv partials in the fixed order of
:func:`~flashschnet.kernels.tiles._sum_partials`; the rest is a sequence of dense layers on ``[B, width]`` row
blocks with exact (``ieee``) products and the padded, transposed weights of :mod:`flashschnet.fused.node_plans`:

* :func:`_node_fwd_kernel`, block ``t``: ``m`` -> ``a = tanh(m L2^T + b2)`` -> ``x' = x + a L^T + b`` (``a`` and
  ``x'`` stored), then the next block's ``h = x' L1^T``; for the last block instead the output MLP (per-bead
  energies, summed per tile into ``epart``) and the start of the backward: ``gx = dE/dx'`` through the MLP and
  the first ``gm = ((gx L) (1 - a^2)) L2``.
* :func:`_node_bwd_kernel`, block ``t`` (``t = n-1 .. 0``): ``gh`` and the position gradient summed, ``gx <- gx +
  gh L1``, the force accumulated; then the previous block's ``gm``, or, for block 0, the forces ``-sum_t
  dE/dr * force_scale`` and (program 0) the replicas' energies ``sum_X epart * energy_scale`` and their total.

Each dense layer goes from rows in memory to rows in memory (:func:`_layer`), in blocks of ``NC`` output
columns (a launch constant: 64 on a GPU), each the sum over ``NC``-wide slices of the input, so a product's
operands are ``[B, NC]`` and ``[NC, NC]`` (a whole ``[B, 128] x [128, 128]`` product's operands would not fit the
registers of a multiprocessor's threads) and every output element's sum runs over the input channels in their
order. Intermediate rows that are not outputs go to the program's scratch rows (``scr``: ``m`` or ``gh``, the
MLP's activations and gradients); a barrier orders a layer's stores before the next layer's loads. ``x``'s rows
are ``r * x_rs + bead`` (``x_rs = 0`` for the first block: the embedding rows of the beads, one per bead shared by
every replica); padded channels hold exact zeros throughout (zero-padded weights, ``tanh(0) = 0``). Output MLPs
with 0 to 3 hidden layers (``NH``) are fused.
"""
import triton
import triton.language as tl

from .filter_mlp import _tanh
from .tiles import _load_rows, _sum_partials


# epilogues of _layer
_NONE = tl.constexpr(0)        # y
_TANH = tl.constexpr(1)        # tanh(y + bias)
_RESID = tl.constexpr(2)       # other + y + bias
_GATE = tl.constexpr(3)        # y * (1 - other^2)
_ADD = tl.constexpr(4)         # other + y


@triton.jit
def _layer(a_ptr, arow, v, K: tl.constexpr, wt_ptr, b_ptr, N: tl.constexpr, o_ptr, orow, out_ptr, srow,
           EPI: tl.constexpr, NC: tl.constexpr):
    """``out[srow, :N] = epilogue(A[arow, :K] @ WT[:K, :N])`` for row indices ``arow``, ``orow`` (``other`` of the
    epilogue) and ``srow`` [B] (int64) of row-major buffers of widths ``K`` (``A``) and ``N`` (``out``,
    ``other``); ``WT`` [K, N] row-major, ``b`` [N]; real rows ``v`` only (other rows load as zeros and are not
    stored). Blocks of ``NC`` x ``NC`` (at most), each output block's sum over the input slices in their order; the
    caller orders the layer against the ones before and after with a barrier."""
    KC: tl.constexpr = K if K < NC else NC
    NB: tl.constexpr = N if N < NC else NC
    for n0 in range(0, N, NB):
        n = n0 + tl.arange(0, NB)
        acc = tl.zeros((arow.shape[0], NB), dtype=a_ptr.dtype.element_ty)
        for k0 in range(0, K, KC):
            k = k0 + tl.arange(0, KC)
            a = tl.load(a_ptr + arow[:, None] * K + k[None, :], mask=v[:, None], other=0.0)
            acc = tl.dot(a, tl.load(wt_ptr + k[:, None] * N + n[None, :]), acc, input_precision="ieee",
                         out_dtype=acc.dtype)
        if EPI == 1:
            acc = _tanh(acc + tl.load(b_ptr + n)[None, :])
        elif EPI == 2:
            acc = tl.load(o_ptr + orow[:, None] * N + n[None, :], mask=v[:, None], other=0.0) + acc + \
                tl.load(b_ptr + n)[None, :]
        elif EPI == 3:
            o = tl.load(o_ptr + orow[:, None] * N + n[None, :], mask=v[:, None], other=0.0)
            acc = acc * (1.0 - o * o)
        elif EPI == 4:
            acc = tl.load(o_ptr + orow[:, None] * N + n[None, :], mask=v[:, None], other=0.0) + acc
        tl.store(out_ptr + srow[:, None] * N + n[None, :], acc, mask=v[:, None])


@triton.jit
def _last_row(wl_ptr, z_ptr, zrow, v, P: tl.constexpr, out_ptr, srow, GATE: tl.constexpr, NC: tl.constexpr):
    """The last layer (its row ``wl`` [P], no bias) on rows ``zrow`` of ``z`` [., P]: the per-bead energies ``sum_c
    z wl`` [B], and ``dE/dz`` into rows ``srow`` of ``out``: ``wl (1 - z^2)`` through the last tanh (``GATE``), or
    ``wl`` (no hidden layer: ``z`` is ``x``)."""
    NB: tl.constexpr = P if P < NC else NC
    y = tl.zeros((zrow.shape[0],), dtype=z_ptr.dtype.element_ty)
    for n0 in tl.static_range(0, P, NB):
        n = n0 + tl.arange(0, NB)
        z = tl.load(z_ptr + zrow[:, None] * P + n[None, :], mask=v[:, None], other=0.0)
        wl = tl.load(wl_ptr + n)[None, :]
        y += tl.sum(z * wl, axis=1)
        if GATE:
            g = wl * (1.0 - z * z)
        else:
            g = wl + z * 0.0
        tl.store(out_ptr + srow[:, None] * P + n[None, :], g, mask=v[:, None])
    return y


#: scratch regions per program (each ``B`` rows of the widest node width)
REGIONS = tl.constexpr(6)


@triton.jit
def _region(k: tl.constexpr, W: tl.constexpr, PMAX: tl.constexpr, B: tl.constexpr):
    """Row indices [B] (int64) of the calling program's scratch region ``k`` addressed as rows of width ``W`` (a
    region is ``B`` rows of ``PMAX`` values, ``PMAX`` a multiple of ``W``)."""
    first = (tl.program_id(0).to(tl.int64) * REGIONS + k) * B * (PMAX // W)
    return first + tl.arange(0, B).to(tl.int64)


@triton.jit
def _tile(g, T, N, sb, B: tl.constexpr):
    """Destination tile ``g = r*T + X``: ``r``, ``X``, its beads [B], which are real, and their rows (int64) in an
    ``[R, N, .]`` buffer."""
    r = g // T
    X = g % T
    bead = X * B + sb
    return r, X, bead, bead < N, r.to(tl.int64) * N + bead


@triton.jit
def _reduce_to(rowpart_ptr, colpart_ptr, flags_ptr, r, X, T, S, v, B: tl.constexpr, FP: tl.constexpr, out_ptr,
               srow, NC: tl.constexpr):
    """The tile's partial sums (width FP, one partial per slot) into rows ``srow``, in column blocks of ``NC``
    (:func:`~flashschnet.kernels.tiles._sum_partials` on each block)."""
    NB: tl.constexpr = FP if FP < NC else NC
    c = tl.arange(0, NB)
    for c0 in tl.static_range(0, FP, NB):
        part = _sum_partials(rowpart_ptr + c0, colpart_ptr + c0, flags_ptr, r, X, T, S, 1, B, NB, 1, FP)
        tl.store(out_ptr + srow[:, None] * FP + (c0 + c)[None, :], part, mask=v[:, None])


@triton.jit
def _node_fwd_kernel(rowpart_ptr, colpart_ptr, flags_ptr, x_ptr, xout_ptr, a_ptr, hout_ptr, scr_ptr,
                     L2T_ptr, b2_ptr, LT_ptr, b_ptr, L1Tn_ptr, L_ptr, L2_ptr,
                     W0T_ptr, c0_ptr, W1T_ptr, c1_ptr, W2T_ptr, c2_ptr, wl_ptr, W0_ptr, W1_ptr, W2_ptr,
                     epart_ptr, gx_ptr, gm_ptr, R, N, T, S, x_rs,
                     B: tl.constexpr, FP: tl.constexpr, HP: tl.constexpr, LAST: tl.constexpr,
                     P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, PM: tl.constexpr, NH: tl.constexpr,
                     PMAX: tl.constexpr, NC: tl.constexpr):
    """Block ``t``'s reduction and node layers, forward (module docstring); ``LAST``: the output MLP and the
    backward's start instead of the next block's ``h``. Each program's scratch (:data:`REGIONS` regions of ``B``
    rows of ``PMAX`` values, the widest node width) holds ``m`` [FP], the MLP's activations ``z0 .. z2`` [P0 .. P2]
    and two gradient rows [PM, the widest of HP and the P's]."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    sb = tl.arange(0, B).to(tl.int64)
    m_rows = _region(0, FP, PMAX, B)
    z0_rows = _region(1, P0, PMAX, B)
    z1_rows = _region(2, P1, PMAX, B)
    z2_rows = _region(3, P2, PMAX, B)
    ga_rows = _region(4, PM, PMAX, B)
    gb_rows = _region(5, PM, PMAX, B)
    for g in range(pid, R * T, G):
        r, X, bead, v, rows = _tile(g, T, N, sb, B)
        xrows = r.to(tl.int64) * x_rs + bead
        _reduce_to(rowpart_ptr, colpart_ptr, flags_ptr, r, X, T, S, v, B, FP, scr_ptr, m_rows, NC)
        tl.debug_barrier()
        _layer(scr_ptr, m_rows, v, FP, L2T_ptr, b2_ptr, HP, scr_ptr, m_rows, a_ptr, rows, _TANH, NC)
        tl.debug_barrier()
        _layer(a_ptr, rows, v, HP, LT_ptr, b_ptr, HP, x_ptr, xrows, xout_ptr, rows, _RESID, NC)
        tl.debug_barrier()
        if LAST:
            # the output MLP, z_l = tanh(z_(l-1) W_l^T + c_l), the energies sum(z_last wl), then dE/dx back through
            # it: ga = dE/dz_last, g_(l-1) = (g_l W_l) (1 - z_(l-1)^2)
            if NH == 0:
                y = _last_row(wl_ptr, xout_ptr, rows, v, HP, gx_ptr, rows, False, NC)
            else:
                _layer(xout_ptr, rows, v, HP, W0T_ptr, c0_ptr, P0, scr_ptr, m_rows, scr_ptr, z0_rows, _TANH, NC)
                tl.debug_barrier()
                if NH == 1:
                    y = _last_row(wl_ptr, scr_ptr, z0_rows, v, P0, scr_ptr, ga_rows, True, NC)
                elif NH == 2:
                    _layer(scr_ptr, z0_rows, v, P0, W1T_ptr, c1_ptr, P1, scr_ptr, m_rows, scr_ptr, z1_rows, _TANH, NC)
                    tl.debug_barrier()
                    y = _last_row(wl_ptr, scr_ptr, z1_rows, v, P1, scr_ptr, gb_rows, True, NC)
                    tl.debug_barrier()
                    _layer(scr_ptr, gb_rows, v, P1, W1_ptr, W1_ptr, P0, scr_ptr, z0_rows, scr_ptr, ga_rows, _GATE, NC)
                else:
                    _layer(scr_ptr, z0_rows, v, P0, W1T_ptr, c1_ptr, P1, scr_ptr, m_rows, scr_ptr, z1_rows, _TANH, NC)
                    tl.debug_barrier()
                    _layer(scr_ptr, z1_rows, v, P1, W2T_ptr, c2_ptr, P2, scr_ptr, m_rows, scr_ptr, z2_rows, _TANH, NC)
                    tl.debug_barrier()
                    y = _last_row(wl_ptr, scr_ptr, z2_rows, v, P2, scr_ptr, ga_rows, True, NC)
                    tl.debug_barrier()
                    _layer(scr_ptr, ga_rows, v, P2, W2_ptr, W2_ptr, P1, scr_ptr, z1_rows, scr_ptr, gb_rows, _GATE, NC)
                    tl.debug_barrier()
                    _layer(scr_ptr, gb_rows, v, P1, W1_ptr, W1_ptr, P0, scr_ptr, z0_rows, scr_ptr, ga_rows, _GATE, NC)
                tl.debug_barrier()
                _layer(scr_ptr, ga_rows, v, P0, W0_ptr, W0_ptr, HP, scr_ptr, m_rows, gx_ptr, rows, _NONE, NC)
            tl.store(epart_ptr + g, tl.sum(tl.where(v, y, 0.0), axis=0))
            tl.debug_barrier()
            # the last block's gm = ((gx L) (1 - a^2)) L2
            _layer(gx_ptr, rows, v, HP, L_ptr, L_ptr, HP, a_ptr, rows, scr_ptr, ga_rows, _GATE, NC)
            tl.debug_barrier()
            _layer(scr_ptr, ga_rows, v, HP, L2_ptr, L2_ptr, FP, scr_ptr, m_rows, gm_ptr, rows, _NONE, NC)
        else:
            _layer(xout_ptr, rows, v, HP, L1Tn_ptr, L1Tn_ptr, FP, scr_ptr, m_rows, hout_ptr, rows, _NONE, NC)
        tl.debug_barrier()


@triton.jit
def _node_bwd_kernel(rowpart_ptr, colpart_ptr, prow_ptr, pcol_ptr, flags_ptr, gx_ptr, ap_ptr, gm_ptr, facc_ptr,
                     scr_ptr, L1_ptr, Lp_ptr, L2p_ptr, epart_ptr, energies_ptr, total_ptr, forces_ptr,
                     R, N, T, S, energy_scale, force_scale,
                     B: tl.constexpr, FP: tl.constexpr, HP: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
                     FIRST: tl.constexpr, LAST: tl.constexpr, TP: tl.constexpr, RC: tl.constexpr,
                     PMAX: tl.constexpr, NC: tl.constexpr):
    """Block ``t``'s reductions and node layers, backward (module docstring): ``FIRST`` = the last block (the
    force accumulator starts), ``LAST`` = block 0 (forces, energies and total energy out, scaled). Scratch regions
    as the forward kernel's: ``gh`` [FP] and ``gv`` [HP] rows."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    sb = tl.arange(0, B).to(tl.int64)
    gh_rows = _region(0, FP, PMAX, B)
    gv_rows = _region(1, HP, PMAX, B)
    k4 = tl.arange(0, 4)
    if LAST:
        if pid == 0:                              # the replicas' energies and their total, in a fixed order
            tt = tl.arange(0, TP)
            rc = tl.arange(0, RC)
            tot = tl.zeros((1,), dtype=epart_ptr.dtype.element_ty)
            for r0 in range(0, R, RC):
                rr = r0 + rc
                e = tl.load(epart_ptr + rr[:, None] * T + tt[None, :], mask=(rr < R)[:, None] & (tt < T)[None, :],
                            other=0.0)
                er = tl.sum(e, axis=1)
                tl.store(energies_ptr + rr, er * energy_scale, mask=rr < R)
                tot += tl.sum(er, axis=0)
            tl.store(total_ptr + tl.arange(0, 1), tot * energy_scale)
    for g in range(pid, R * T, G):
        r, X, bead, v, rows = _tile(g, T, N, sb, B)
        gp = _sum_partials(prow_ptr, pcol_ptr, flags_ptr, r, X, T, S, NP, B, 4, NPP, 4)     # [B, 4]: x, y, z, 0
        if not FIRST:
            gp += tl.load(facc_ptr + rows[:, None] * 4 + k4[None, :], mask=v[:, None], other=0.0)
        if LAST:
            tl.store(forces_ptr + rows[:, None] * 3 + k4[None, :], gp * (-force_scale),
                     mask=v[:, None] & (k4 < 3)[None, :])
        else:
            tl.store(facc_ptr + rows[:, None] * 4 + k4[None, :], gp, mask=v[:, None])
            _reduce_to(rowpart_ptr, colpart_ptr, flags_ptr, r, X, T, S, v, B, FP, scr_ptr, gh_rows, NC)
            tl.debug_barrier()
            _layer(scr_ptr, gh_rows, v, FP, L1_ptr, L1_ptr, HP, gx_ptr, rows, gx_ptr, rows, _ADD, NC)
            tl.debug_barrier()
            _layer(gx_ptr, rows, v, HP, Lp_ptr, Lp_ptr, HP, ap_ptr, rows, scr_ptr, gv_rows, _GATE, NC)
            tl.debug_barrier()
            _layer(scr_ptr, gv_rows, v, HP, L2p_ptr, L2p_ptr, FP, scr_ptr, gv_rows, gm_ptr, rows, _NONE, NC)
            tl.debug_barrier()
