"""A whole CGSchNet step on a CPU as one C call (float32, tabulated filters), compiled on first use.

Why: with the pair loops (:mod:`~flashschnet.kernels.cpu_pairs`) and the dense layers
(:mod:`~flashschnet.kernels.cpu_nodes`) in C, a trp-cage step's kernels take ~0.65 ms of its ~1.1 ms call; the
rest was Python between them -- ~25 kernel calls through ``ctypes``, ~30 tensor allocations, the node pass's
orchestration. ``step_f32`` runs the node pass (:mod:`flashschnet.fused.nodes`: embedding, per block ``lin1``,
aggregation, ``lin2 -> tanh``, ``lin`` + residual, the output MLP, and the hand-written backward) over the
step's ordered pair list, calling the same kernels in the same order on buffers the caller keeps between steps:
**the same bits as the composed path** (tested), on any thread count.

Inputs (``M = R N`` beads, ``H`` node features, ``F`` filter channels): a :class:`StepModel` (the packed weights
and tables, fixed per model; :mod:`flashschnet.fused.cpu_step` fills it), a :class:`StepWork`
(the buffers), and per call the Verlet list's pairs ``(i, j)`` (the step keeps those within the cutoff and puts
them in :mod:`~flashschnet.kernels.cpu_pairs` ``order_pairs`` order), the positions ``[M, 3]`` (model length), the
bead types ``[N]``; outputs the per-bead energies ``y [M]`` and the forces ``[M, 3]`` times ``force_scale``;
``moved_f32`` is the Verlet list's displacement check.

Built by :mod:`~flashschnet.kernels.cpu_build` like the others; :func:`library` returns None when no compiler works
(the step then runs the composed path, the same bits).
"""
from __future__ import annotations

import ctypes

from .cpu_build import Library
from .cpu_nodes import BODY as NODES
from .cpu_pairs import BODY as PAIRS
from .cpu_vector import PRELUDE

STEP = r"""
/* the weights of a model (mirrors StepModel of cpu_step.py); pointer arrays per block, per knot set (blocks
   whose tables share their knots share a pair's interval and t) and per output layer */
typedef struct {
    int64_t R, N, H, F, nblocks, nout, nknots, pcap, ntypes;
    const float *emb;                                   /* [ntypes, H] */
    const float *const *L1f, *const *L2f, *const *b2, *const *Lf, *const *b;   /* forward packs, padded biases */
    const float *const *L1b, *const *L2b, *const *Lb;   /* the backward's packs (g W) */
    const float *const *rows;                           /* per block: polynomial rows [2Q (n-1), F] */
    const int64_t *Q, *knot;                            /* per block: degree, knot set */
    const float *inv_h, *r_end;                         /* per knot set */
    const int64_t *nint;
    const int64_t *dims;                                /* output layer k: dims[k] -> dims[k + 1] */
    const float *const *Wf, *const *c, *const *Wb;
} StepModel;

/* the buffers of a step (mirrors StepWork): pcap >= the Verlet list's pairs; ks, ts [nknots, pcap]; the pairs
   within the cutoff (wi, wj, wd) and in the step's order (oi, oj, od) [pcap], key [pcap],
   count [nseg NB + 1], start [nseg + 1] */
typedef struct {
    float *x0, *x1, *h, *a, *m, *z, *g0, *g1, *gv, *gm, *gh, *gp, *gpos, *part, *ppos;
    int64_t *ks;
    float *ts;
    int64_t *wi, *wj;
    float *wd;
    int64_t *oi, *oj;
    float *od;
    int64_t *key, *count, *start;
} StepWork;

/* 1 when a bead moved farther than sqrt(thr2) from where the list was built, or either position is NaN */
int64_t moved_f32(int64_t M, const float *restrict pos, const float *restrict ref, float thr2) {
    for (int64_t q = 0; q < M; ++q) {
        float dx = pos[3 * q] - ref[3 * q], dy = pos[3 * q + 1] - ref[3 * q + 1], dz = pos[3 * q + 2] - ref[3 * q + 2];
        if (!(dx * dx + dy * dy + dz * dz <= thr2)) return 1;
    }
    return 0;
}

/* the structs' sizes: what cpu_step.py's mirrors must match (tested) */
int64_t step_struct_sizes(int64_t *out) { out[0] = sizeof(StepModel); out[1] = sizeof(StepWork); return 2; }

static inline float *swap_f(float **a, float **b) { float *t = *a; *a = *b; *b = t; return *a; }

/* the step of positions pos [M, 3] (model length) and bead types [N] given the Verlet list (li, lj) of L pairs:
   its pairs within rc in the step's order (pairs_within, order_pairs: NS segments of SB beads, NB distance
   buckets of width 1 / inv_w), then the network; returns 0, or 1 + the first bead whose type is outside the
   embedding (nothing computed) */
int64_t step_f32(const StepModel *restrict md, const StepWork *restrict w, int64_t L, const int64_t *restrict li,
                 const int64_t *restrict lj, float rc, int64_t SB, int64_t NS, int64_t NB, float inv_w,
                 const float *restrict pos, const int64_t *restrict types, float *restrict y, float *restrict forces,
                 float force_scale, int nthreads, int64_t macs) {
    const int64_t R = md->R, N = md->N, M = R * N, H = md->H, F = md->F, nb = md->nblocks, nout = md->nout;
    const int64_t *dims = md->dims;
    for (int64_t q = 0; q < N; ++q) if (types[q] < 0 || types[q] >= md->ntypes) return q + 1;
    const int64_t P = pairs_within_f32(L, li, lj, pos, rc, w->wi, w->wj, w->wd);
    order_pairs_f32(P, w->wi, w->wj, w->wd, N, SB, NS, NB, inv_w, R * NS, w->count, w->key, w->oi, w->oj, w->od,
                    w->start);
    const int64_t *restrict pi = w->oi, *restrict pj = w->oj, *restrict seg_start = w->start;
    const float *restrict d = w->od;
    for (int64_t k = 0; k < md->nknots; ++k)
        table_intervals_f32(P, md->nint[k], d, md->inv_h[k], md->r_end[k], w->ks + k * md->pcap,
                            w->ts + k * md->pcap, nthreads);
    /* forward: x = embedding of the types; per block h = x L1^T, m = sum_j W_ij h_j, a = tanh(m L2^T + b2),
       x = x + a L^T + b */
    float *x = w->x0, *xn = w->x1;
    for (int64_t q = 0; q < M; ++q) memcpy(x + q * H, md->emb + types[q % N] * H, (size_t)H * sizeof(float));
    for (int64_t t = 0; t < nb; ++t) {
        float *h = w->h + t * M * F, *a = w->a + t * M * H;
        const int64_t *ks = w->ks + md->knot[t] * md->pcap;
        const float *ts = w->ts + md->knot[t] * md->pcap;
        dense_f32(M, F, H, x, md->L1f[t], 0, EPI_NONE, 0, h, nthreads, macs);
        memset(w->m, 0, (size_t)(M * F) * sizeof(float));
        table_fwd_f32(R, N, SB, NS, seg_start, F, md->Q[t], ks, ts, pi, pj, md->rows[t], h, w->m, w->part,
                      nthreads);
        dense_f32(M, H, F, w->m, md->L2f[t], md->b2[t], EPI_TANH, 0, a, nthreads, macs);
        dense_f32(M, H, H, a, md->Lf[t], md->b[t], EPI_ADD, x, xn, nthreads, macs);
        swap_f(&x, &xn);
    }
    /* the output MLP: tanh layers, then the last (no bias) into y */
    const float *z = x;
    float *zk = w->z;
    for (int64_t k = 0; k + 1 < nout; ++k) {
        dense_f32(M, dims[k + 1], dims[k], z, md->Wf[k], md->c[k], EPI_TANH, 0, zk, nthreads, macs);
        z = zk;
        zk += M * dims[k + 1];
    }
    dense_f32(M, dims[nout], dims[nout - 1], z, md->Wf[nout - 1], 0, EPI_NONE, 0, y, nthreads, macs);
    /* backward: dE/dy = 1; through the output MLP (times each tanh input's derivative) */
    float *g = w->g0, *gn = w->g1;
    for (int64_t q = 0; q < M * dims[nout]; ++q) g[q] = 1.0f;
    for (int64_t k = nout - 1; k >= 0; --k) {
        if (k > 0) {
            const float *zprev = w->z;
            for (int64_t e = 0; e + 1 < k; ++e) zprev += M * dims[e + 1];
            dense_f32(M, dims[k], dims[k + 1], g, md->Wb[k], 0, EPI_DTANH, zprev, gn, nthreads, macs);
        } else {
            dense_f32(M, dims[0], dims[1], g, md->Wb[0], 0, EPI_NONE, 0, gn, nthreads, macs);
        }
        swap_f(&g, &gn);
    }
    /* the blocks in reverse: gv = (gx L)(1 - a^2), gm = gv L2, (gh, gp) through the pairs, gx = gx + gh L1 */
    memset(w->gpos, 0, (size_t)(M * 3) * sizeof(float));
    for (int64_t t = nb - 1; t >= 0; --t) {
        const float *h = w->h + t * M * F, *a = w->a + t * M * H;
        const int64_t *ks = w->ks + md->knot[t] * md->pcap;
        const float *ts = w->ts + md->knot[t] * md->pcap;
        dense_f32(M, H, H, g, md->Lb[t], 0, EPI_DTANH, a, w->gv, nthreads, macs);
        dense_f32(M, F, H, w->gv, md->L2b[t], 0, EPI_NONE, 0, w->gm, nthreads, macs);
        memset(w->gh, 0, (size_t)(M * F) * sizeof(float));
        memset(w->gp, 0, (size_t)(M * 3) * sizeof(float));
        table_bwd_f32(R, N, SB, NS, seg_start, F, md->Q[t], ks, ts, md->inv_h[md->knot[t]], pi, pj, d, md->rows[t], h,
                      w->gm, pos, w->gh, w->gp, w->part, w->ppos, nthreads);
        for (int64_t q = 0; q < M * 3; ++q) w->gpos[q] = w->gpos[q] + w->gp[q];
        dense_f32(M, H, F, w->gh, md->L1b[t], 0, EPI_ADD, g, gn, nthreads, macs);
        swap_f(&g, &gn);
    }
    if (force_scale != 1.0f) for (int64_t q = 0; q < M * 3; ++q) forces[q] = -w->gpos[q] * force_scale;
    else for (int64_t q = 0; q < M * 3; ++q) forces[q] = -w->gpos[q];
    return 0;
}
"""

SOURCE = PRELUDE + PAIRS + NODES + STEP

_P = ctypes.c_void_p
_I64 = ctypes.c_int64


class StepModel(ctypes.Structure):
    """``StepModel`` of the C source: the pointer arrays are ``ctypes`` arrays of addresses the owner keeps
    alive (:class:`flashschnet.fused.cpu_step.CStep`)."""
    _fields_ = ([(n, _I64) for n in ("R", "N", "H", "F", "nblocks", "nout", "nknots", "pcap", "ntypes")]
                + [(n, _P) for n in ("emb", "L1f", "L2f", "b2", "Lf", "b", "L1b", "L2b", "Lb", "rows", "Q", "knot",
                                     "inv_h", "r_end", "nint", "dims", "Wf", "c", "Wb")])


class StepWork(ctypes.Structure):
    """``StepWork`` of the C source: the addresses of the step's buffers."""
    _fields_ = [(n, _P) for n in ("x0", "x1", "h", "a", "m", "z", "g0", "g1", "gv", "gm", "gh", "gp", "gpos", "part",
                                  "ppos", "ks", "ts", "wi", "wj", "wd", "oi", "oj", "od", "key", "count", "start")]


def _declare(lib) -> None:
    i64, ptr, int_ = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    f32 = ctypes.c_float
    lib.step_f32.argtypes = [ctypes.POINTER(StepModel), ctypes.POINTER(StepWork), i64, ptr, ptr, f32, i64, i64, i64,
                             f32, ptr, ptr, ptr, ptr, f32, int_, i64]
    lib.moved_f32.argtypes = [i64, ptr, ptr, f32]
    lib.moved_f32.restype = i64
    lib.step_f32.restype = i64
    lib.step_struct_sizes.argtypes = [ptr]
    lib.step_struct_sizes.restype = i64


#: the compiled step (a ``ctypes.CDLL``) on first call, or None if it cannot be built here
library = Library(SOURCE, "step", _declare, "the fused CPU step",
                  "the step runs its C kernels one call at a time (the same results, slower)")
