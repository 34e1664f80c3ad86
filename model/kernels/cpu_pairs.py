"""Fused CPU kernels of the ``torch`` backend's pair loops, in C, compiled on first use.

Why C: on a CPU the per-pair work of a CFConv block -- gather ``h_j``, multiply by the filter, scatter-add
into ``m_i`` (and the same for the other direction), or the backward's four gathers, products, row-wise dot and
scatters -- is a chain of eager PyTorch ops, each a full pass over ``[P, F]`` tensors in memory
(``torch.profiler``: ``index_select``, ``mul`` and ``index_add_`` take ~3/4 of a tabulated step at R = 8 BPTI).
PyTorch has no fused gather-multiply-scatter op, and ``torch.compile`` turns scatters into atomic adds whose
order (with more than one thread) is not reproducible, which would break bitwise resume. These loops do one
pass per pair with everything in registers/L1, in a fixed order. A table lookup (:mod:`flashschnet.nn.table`)
fuses into the same loop, so a compressed model never writes a filter to memory.

Kernels (``T`` = float or double; ``M`` beads, ``F`` channels, ``P`` pairs ``(i_p, j_p)``, ``i < j`` within a
replica -- a half list):

* ``msg_fwd``: ``m_i += W_p h_j``, ``m_j += W_p h_i`` with ``W [P, F]`` given (the exact filter, one thread);
* ``msg_bwd``: ``gh_j += W_p gm_i``, ``gh_i += W_p gm_j``, ``dd_p = sum_c dW_pc (gm_i h_j + gm_j h_i)_c``,
  ``gpos_i += (r_i - r_j) dd_p / d_p``, ``gpos_j -= ...`` with ``W``, ``dW`` given;
* ``pairs_within``: the pairs of a Verlet list closer than the cutoff, with their distances, in list order (one
  pass instead of gathers, a norm, a comparison and a compaction as PyTorch ops);
* ``order_pairs``: the step's pair order, a stable counting sort by (segment of ``i``, distance bucket): a
  segment is a fixed range of beads (:class:`~flashschnet.fused.pair_loops.Segments`), and within it the pairs
  that read the same table rows come together, so those rows stay in L1;
* ``table_intervals``: every pair's table interval ``ks [P]`` (-1 for ``d >= r_end``: the pair is skipped) and
  its place in it, ``ts [P]`` (``t = d / h - k`` in [0, 1]), once per step, shared by every block whose table has
  the same knots;
* ``table_fwd`` / ``table_bwd``: the message kernels with ``W`` (and ``dW/dd``) the interval's polynomial in ``t``
  by Horner's rule, from a table laid out as ``rows [2Q (n-1), F]``: interval ``k``'s ``2Q`` rows are the
  coefficients ``A_0 .. A_{2Q-1}`` of its Hermite polynomial ``W(t) = sum_e A_e t^e``
  (:func:`~flashschnet.nn.table.polynomial_rows`, scales applied), so a channel's value costs ``2Q - 1``
  multiply-adds and its derivative (``p = p t + w`` beside ``w = w t + A_e``) ``2Q - 2`` more, with only ``t``
  broadcast (a weighted sum of the ``2Q`` Hermite rows costs ``2Q`` for each and ``4Q`` broadcast weights, more than
  AVX2's sixteen registers hold beside the accumulators; docs/benchmarks.md, "CPU roofline"). Over the segments on
  OpenMP threads. **Deterministic on any thread count** (owner computes): a segment adds into the rows of its own
  beads ``i`` directly and into partial rows for the beads ``j`` it reaches, which are then added in segment order;
  what a thread runs never changes an element's order of operations. Compiled for the common widths and degrees
  (``F`` in 32, 64, 128, 256; ``Q`` 2 or 3) with ``F`` and ``Q`` as constants (Horner's loop unrolled), else
  generic; the same arithmetic either way.

The channel loops are explicit 256-bit vectors (GCC/clang vector extensions: AVX2 on x86, two 128-bit halves on
NEON or SSE; the scalar tail does the same operations), ``a * b + c`` is one fused multiply-add
(``-ffp-contract=fast``), and a backward's dot product sums its lanes in a fixed order -- the order of operations
per output element is a function of the pair list alone. Where it pays is measured against the core's own peaks
by ``tools/benchmarks/cpu_roofline.py`` (docs/benchmarks.md, "CPU roofline").

The library is built by :mod:`~flashschnet.kernels.cpu_build` (the system C compiler, OpenMP where it has it:
GNU OpenMP, the ``libgomp.so.1`` PyTorch's wheels load, so the loops run on PyTorch's own threads; else one
thread, the same results) and loaded with ``ctypes``. :func:`library` returns None when no
compiler works; callers then run the eager PyTorch ops (the same arithmetic up to rounding, tested against each
other), with a one-line note.
"""
from __future__ import annotations

import ctypes

from .cpu_build import Library
from .cpu_vector import PRELUDE

#: the pair kernels' C text (after :data:`~flashschnet.kernels.cpu_vector.PRELUDE`); :mod:`~flashschnet.kernels.cpu_step` builds on it
BODY = r"""
#define FMA_f32 fmaf
#define FMA_f64 fma
#define SQRT_f32 sqrtf
#define SQRT_f64 sqrt

/* run CALL with F, Q as the literals FF, QQ when they match, else GENERIC */
#define SPEC1(CALL, F_, Q_) if (F == F_ && Q == Q_) { enum { FF = F_, QQ = Q_ }; CALL; } else
#define SPECIALISE(CALL, GENERIC) SPEC1(CALL, 32, 3) SPEC1(CALL, 64, 3) SPEC1(CALL, 128, 3) SPEC1(CALL, 256, 3)  \
    SPEC1(CALL, 32, 2) SPEC1(CALL, 64, 2) SPEC1(CALL, 128, 2) SPEC1(CALL, 256, 2) { GENERIC; }

/* the segments of a step's pairs: NS per replica of N beads, SB beads each (the last may be shorter); segment
   g = r NS + s holds the pairs whose i lies in beads [r N + s SB, min(r N + (s + 1) SB, (r + 1) N)) and keeps
   partial rows for beads [r N + s SB, (r + 1) N) (the j > i side), at this row offset of the partial buffer */
static inline AI int64_t part_offset(int64_t r, int64_t s, int64_t N, int64_t SB, int64_t NS) {
    int64_t per_replica = NS * N - SB * NS * (NS - 1) / 2;
    return r * per_replica + s * N - SB * s * (s - 1) / 2;
}

#define KERNELS(T, S)                                                                                         \
typedef vec_##S V_##S;                                                                                        \
                                                                                                              \
/* the lanes of a vector summed in a fixed order (lane 0 + lane VL/2, ... then halves again) */               \
static inline AI T hsum_##S(V_##S a) {                                                                        \
    T x[VL_##S]; memcpy(x, &a, sizeof(x));                                                                    \
    for (int w = VL_##S / 2; w >= 1; w /= 2) for (int l = 0; l < w; ++l) x[l] = x[l] + x[l + w];              \
    return x[0];                                                                                              \
}                                                                                                             \
                                                                                                              \
/* m_i += w h_j, m_j += w h_i with w [F] given (the exact filter) */                                          \
static inline AI void pair_fwd_##S(int64_t F, const T *restrict w, const T *restrict hi, const T *restrict hj, \
                                   T *restrict mi, T *restrict mj) {                                          \
    int64_t c = 0;                                                                                            \
    for (; c + VL_##S <= F; c += VL_##S) {                                                                    \
        V_##S vw = *(const V_##S *)(w + c);                                                                   \
        *(V_##S *)(mi + c) = vw * *(const V_##S *)(hj + c) + *(V_##S *)(mi + c);                              \
        *(V_##S *)(mj + c) = vw * *(const V_##S *)(hi + c) + *(V_##S *)(mj + c);                              \
    }                                                                                                         \
    for (; c < F; ++c) {                                                                                      \
        mi[c] = w[c] * hj[c] + mi[c];                                                                         \
        mj[c] = w[c] * hi[c] + mj[c];                                                                         \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* the same with w = A_0 + t (A_1 + t (... + t A_{R-1})): Horner's rule on the interval's R polynomial rows   \
   (rows r = A_r [F], lowest power first) at the pair's t */                                                  \
static inline AI void poly_fwd_##S(int64_t F, int64_t R, const T *restrict rows, T t, const T *restrict hi,   \
                                   const T *restrict hj, T *restrict mi, T *restrict mj) {                    \
    int64_t c = 0;                                                                                            \
    for (; c + VL_##S <= F; c += VL_##S) {                                                                    \
        V_##S w = *(const V_##S *)(rows + (R - 1) * F + c);                                                   \
        for (int64_t r = R - 2; r >= 0; --r) w = w * t + *(const V_##S *)(rows + r * F + c);                  \
        *(V_##S *)(mi + c) = w * *(const V_##S *)(hj + c) + *(V_##S *)(mi + c);                               \
        *(V_##S *)(mj + c) = w * *(const V_##S *)(hi + c) + *(V_##S *)(mj + c);                               \
    }                                                                                                         \
    for (; c < F; ++c) {                                                                                      \
        T w = rows[(R - 1) * F + c];                                                                          \
        for (int64_t r = R - 2; r >= 0; --r) w = w * t + rows[r * F + c];                                     \
        mi[c] = w * hj[c] + mi[c];                                                                            \
        mj[c] = w * hi[c] + mj[c];                                                                            \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* one chunk (one element) of the backward at channel c given its w and dw: gh_j += w gm_i, gh_i += w gm_j;      \
   returns acc + dw (gm_i h_j + gm_j h_i) */                                                                  \
static inline AI V_##S grad_chunk_##S(V_##S w, V_##S dw, V_##S acc, int64_t c, const T *restrict hi,          \
                                      const T *restrict hj, const T *restrict gi, const T *restrict gj,      \
                                      T *restrict ghi, T *restrict ghj) {                                     \
    V_##S vgi = *(const V_##S *)(gi + c), vgj = *(const V_##S *)(gj + c);                                     \
    V_##S u = vgj * *(const V_##S *)(hi + c) + vgi * *(const V_##S *)(hj + c);                                \
    *(V_##S *)(ghj + c) = w * vgi + *(V_##S *)(ghj + c);                                                      \
    *(V_##S *)(ghi + c) = w * vgj + *(V_##S *)(ghi + c);                                                      \
    return dw * u + acc;                                                                                      \
}                                                                                                             \
                                                                                                              \
static inline AI T grad_elem_##S(T w, T dw, T acc, int64_t c, const T *restrict hi, const T *restrict hj,     \
                                 const T *restrict gi, const T *restrict gj, T *restrict ghi,                \
                                 T *restrict ghj) {                                                           \
    T u = gj[c] * hi[c] + gi[c] * hj[c];                                                                      \
    ghj[c] = w * gi[c] + ghj[c];                                                                              \
    ghi[c] = w * gj[c] + ghi[c];                                                                              \
    return dw * u + acc;                                                                                      \
}                                                                                                             \
                                                                                                              \
/* the backward of a pair with w, dw [F] given (the exact filter); returns dd = sum_c dw_c (gm_i h_j + gm_j     \
   h_i)_c */                                                                                                  \
static inline AI T pair_bwd_##S(int64_t F, const T *restrict w, const T *restrict dw, const T *restrict hi,   \
                                const T *restrict hj, const T *restrict gi, const T *restrict gj,            \
                                T *restrict ghi, T *restrict ghj) {                                           \
    V_##S acc = {0};                                                                                          \
    T tail = 0;                                                                                               \
    int64_t c = 0;                                                                                            \
    for (; c + VL_##S <= F; c += VL_##S)                                                                      \
        acc = grad_chunk_##S(*(const V_##S *)(w + c), *(const V_##S *)(dw + c), acc, c, hi, hj, gi, gj, ghi,  \
                             ghj);                                                                            \
    for (; c < F; ++c) tail = grad_elem_##S(w[c], dw[c], tail, c, hi, hj, gi, gj, ghi, ghj);                  \
    return hsum_##S(acc) + tail;                                                                              \
}                                                                                                             \
                                                                                                              \
/* the same with w and p = dw/dt from the interval's R polynomial rows at t (Horner's rule for a polynomial   \
   and its derivative together: p = p t + w, w = w t + A_r); returns sum_c p_c (gm_i h_j + gm_j h_i)_c, the   \
   caller multiplies by dt/dd */                                                                              \
static inline AI T poly_bwd_##S(int64_t F, int64_t R, const T *restrict rows, T t, const T *restrict hi,      \
                                const T *restrict hj, const T *restrict gi, const T *restrict gj,            \
                                T *restrict ghi, T *restrict ghj) {                                           \
    V_##S acc = {0};                                                                                          \
    T tail = 0;                                                                                               \
    int64_t c = 0;                                                                                            \
    for (; c + VL_##S <= F; c += VL_##S) {                                                                    \
        V_##S w = *(const V_##S *)(rows + (R - 1) * F + c), p = w;                                            \
        w = w * t + *(const V_##S *)(rows + (R - 2) * F + c);                                                 \
        for (int64_t r = R - 3; r >= 0; --r) {                                                                \
            p = p * t + w;                                                                                    \
            w = w * t + *(const V_##S *)(rows + r * F + c);                                                   \
        }                                                                                                     \
        acc = grad_chunk_##S(w, p, acc, c, hi, hj, gi, gj, ghi, ghj);                                         \
    }                                                                                                         \
    for (; c < F; ++c) {                                                                                      \
        T w = rows[(R - 1) * F + c], p = w;                                                                   \
        w = w * t + rows[(R - 2) * F + c];                                                                    \
        for (int64_t r = R - 3; r >= 0; --r) { p = p * t + w; w = w * t + rows[r * F + c]; }                  \
        tail = grad_elem_##S(w, p, tail, c, hi, hj, gi, gj, ghi, ghj);                                        \
    }                                                                                                         \
    return hsum_##S(acc) + tail;                                                                              \
}                                                                                                             \
                                                                                                              \
static inline AI void pos_grad_##S(const T *restrict pos, int64_t i, int64_t j, T s, T *restrict gpi,         \
                                   T *restrict gpj) {                                                         \
    for (int a = 0; a < 3; ++a) {                                                                             \
        T v = (pos[i * 3 + a] - pos[j * 3 + a]) * s;                                                          \
        gpi[a] += v;                                                                                          \
        gpj[a] -= v;                                                                                          \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* the exact filter's loops, W [P, F] (and dW) given, one pass in pair order (single-threaded: PyTorch's      \
   products that compute W use the threads) */                                                              \
void msg_fwd_##S(int64_t P, int64_t F, const int64_t *restrict pi, const int64_t *restrict pj,                 \
                 const T *restrict W, const T *restrict h, T *restrict m) {                                   \
    for (int64_t p = 0; p < P; ++p)                                                                           \
        pair_fwd_##S(F, W + p * F, h + pi[p] * F, h + pj[p] * F, m + pi[p] * F, m + pj[p] * F);               \
}                                                                                                             \
                                                                                                              \
void msg_bwd_##S(int64_t P, int64_t F, const int64_t *restrict pi, const int64_t *restrict pj,                 \
                 const T *restrict W, const T *restrict dW, const T *restrict h, const T *restrict gm,        \
                 const T *restrict pos, const T *restrict d, T *restrict gh, T *restrict gpos) {              \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        int64_t i = pi[p], j = pj[p];                                                                         \
        T dd = pair_bwd_##S(F, W + p * F, dW + p * F, h + i * F, h + j * F, gm + i * F, gm + j * F,           \
                            gh + i * F, gh + j * F);                                                          \
        pos_grad_##S(pos, i, j, dd / d[p], gpos + i * 3, gpos + j * 3);                                       \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* the pairs of a list within rc: writes their i, j, d (in list order), returns how many; d as                \
   torch.linalg.vector_norm computes it on a CPU with FMA (bitwise: the tests compare) */                       \
int64_t pairs_within_##S(int64_t P, const int64_t *restrict pi, const int64_t *restrict pj,                  \
                         const T *restrict pos, T rc, int64_t *restrict oi, int64_t *restrict oj,            \
                         T *restrict od) {                                                                    \
    int64_t n = 0;                                                                                            \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        const T *restrict a = pos + pi[p] * 3, *restrict b = pos + pj[p] * 3;                                 \
        T x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];                                                  \
        T d = SQRT_##S(FMA_##S(z, z, FMA_##S(y, y, x * x)));                                                  \
        if (d < rc) { oi[n] = pi[p]; oj[n] = pj[p]; od[n] = d; ++n; }                                         \
    }                                                                                                         \
    return n;                                                                                                 \
}                                                                                                             \
                                                                                                              \
/* the step's pair order: a stable counting sort of (i, j, d) by (segment of i, distance bucket), the bucket  \
   min(floor(d inv_w), NB - 1); seg_start [nseg + 1] the segments' first pairs; count [nseg NB + 1] scratch */ \
void order_pairs_##S(int64_t P, const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict d,  \
                     int64_t N, int64_t SB, int64_t NS, int64_t NB, T inv_w, int64_t nseg,                   \
                     int64_t *restrict count, int64_t *restrict key, int64_t *restrict oi,                    \
                     int64_t *restrict oj, T *restrict od, int64_t *restrict seg_start) {                     \
    int64_t nkeys = nseg * NB;                                                                                \
    memset(count, 0, (size_t)(nkeys + 1) * sizeof(int64_t));                                                  \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        int64_t r = pi[p] / N, b = (int64_t)(d[p] * inv_w);                                                   \
        if (b > NB - 1) b = NB - 1;                                                                           \
        key[p] = ((r * NS + (pi[p] - r * N) / SB) * NB) + b;                                                  \
        ++count[key[p] + 1];                                                                                  \
    }                                                                                                         \
    for (int64_t k = 0; k < nkeys; ++k) count[k + 1] += count[k];                                             \
    for (int64_t g = 0; g <= nseg; ++g) seg_start[g] = count[g * NB];                                         \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        int64_t q = count[key[p]]++;                                                                          \
        oi[q] = pi[p]; oj[q] = pj[p]; od[q] = d[p];                                                           \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* every pair's table interval ks[p] (-1: d >= r_end, the pair is skipped) and where in it the pair lies,      \
   ts[p] = d / h - k in [0, 1] (k = floor(d / h), at most the last interval nint - 1) */                      \
void table_intervals_##S(int64_t P, int64_t nint, const T *restrict d, T inv_h, T r_end, int64_t *restrict ks, \
                         T *restrict ts, int nthreads) {                                                      \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads)")                                        \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        if (!(d[p] < r_end)) { ks[p] = -1; ts[p] = 0; continue; }                                             \
        T x = d[p] * inv_h;                                                                                   \
        T kf = floor(x);                                                                                      \
        if (kf < 0) kf = 0;                                                                                   \
        if (kf > (T)(nint - 1)) kf = (T)(nint - 1);                                                           \
        ks[p] = (int64_t)kf;                                                                                  \
        ts[p] = x - kf;                                                                                       \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* one segment's pairs (F, Q literals where a caller below inlines this), m rows of i direct, of j into pg */ \
static inline AI void tfwd_seg_##S(int64_t F, int64_t Q, int64_t p0, int64_t p1, const int64_t *restrict ks,  \
                                   const T *restrict ts, const int64_t *restrict pi, const int64_t *restrict pj, \
                                   const T *restrict rows, const T *restrict h, T *restrict m, T *restrict pg,  \
                                   int64_t lo) {                                                              \
    int64_t R = 2 * Q;                                                                                        \
    for (int64_t p = p0; p < p1; ++p) {                                                                       \
        int64_t k = ks[p];                                                                                    \
        if (k < 0) continue;                                                                                  \
        poly_fwd_##S(F, R, rows + k * R * F, ts[p], h + pi[p] * F, h + pj[p] * F, m + pi[p] * F,              \
                     pg + (pj[p] - lo) * F);                                                                  \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
static inline AI void tbwd_seg_##S(int64_t F, int64_t Q, int64_t p0, int64_t p1, const int64_t *restrict ks,  \
                                   const T *restrict ts, T inv_h, const int64_t *restrict pi,                 \
                                   const int64_t *restrict pj,                                                \
                                   const T *restrict d, const T *restrict rows, const T *restrict h,          \
                                   const T *restrict gm, const T *restrict pos, T *restrict gh,               \
                                   T *restrict gpos, T *restrict pg, T *restrict pp, int64_t lo) {            \
    int64_t R = 2 * Q;                                                                                        \
    for (int64_t p = p0; p < p1; ++p) {                                                                       \
        int64_t k = ks[p], i = pi[p], j = pj[p];                                                              \
        if (k < 0) continue;                                                                                  \
        T dd = poly_bwd_##S(F, R, rows + k * R * F, ts[p], h + i * F, h + j * F, gm + i * F, gm + j * F,      \
                            gh + i * F, pg + (j - lo) * F);                                                   \
        pos_grad_##S(pos, i, j, dd * inv_h / d[p], gpos + i * 3, pp + (j - lo) * 3);                          \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* out[b] += the partial rows of b (segments s <= b's, in order) */                                          \
static void reduce_parts_##S(int64_t RN, int64_t N, int64_t SB, int64_t NS, int64_t F, const T *restrict part, \
                             T *restrict out, int nthreads) {                                                 \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads)")                                        \
    for (int64_t b = 0; b < RN; ++b) {                                                                        \
        int64_t r = b / N, sb = (b - r * N) / SB;                                                             \
        T *restrict o = out + b * F;                                                                          \
        for (int64_t s = 0; s <= sb; ++s) {                                                                   \
            const T *restrict row = part + (part_offset(r, s, N, SB, NS) + b - (r * N + s * SB)) * F;         \
            for (int64_t c = 0; c < F; ++c) o[c] += row[c];                                                   \
        }                                                                                                     \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* the table loops over order_pairs' segments, any number of threads, the same result on any: a segment      \
   adds into its own rows of i and into its partial rows of j, which are then added in segment order; part   \
   [part_offset(R, 0, ...), F] (and ppos [.., 3]) scratch */                                                   \
void table_fwd_##S(int64_t R_, int64_t N, int64_t SB, int64_t NS, const int64_t *restrict seg_start, int64_t F, \
                   int64_t Q, const int64_t *restrict ks, const T *restrict ts, const int64_t *restrict pi,   \
                   const int64_t *restrict pj, const T *restrict rows, const T *restrict h, T *restrict m,    \
                   T *restrict part, int nthreads) {                                                          \
    int64_t nseg = R_ * NS;                                                                                   \
    _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nthreads)")                                    \
    for (int64_t g = 0; g < nseg; ++g) {                                                                      \
        int64_t r = g / NS, s = g - r * NS, lo = r * N + s * SB;                                              \
        T *restrict pg = part + part_offset(r, s, N, SB, NS) * F;                                            \
        memset(pg, 0, (size_t)((r + 1) * N - lo) * F * sizeof(T));                                  \
        int64_t p0 = seg_start[g], p1 = seg_start[g + 1];                                                     \
        SPECIALISE(tfwd_seg_##S(FF, QQ, p0, p1, ks, ts, pi, pj, rows, h, m, pg, lo),                          \
                   tfwd_seg_##S(F, Q, p0, p1, ks, ts, pi, pj, rows, h, m, pg, lo))                            \
    }                                                                                                         \
    reduce_parts_##S(R_ * N, N, SB, NS, F, part, m, nthreads);                                                \
}                                                                                                             \
                                                                                                              \
void table_bwd_##S(int64_t R_, int64_t N, int64_t SB, int64_t NS, const int64_t *restrict seg_start, int64_t F, \
                   int64_t Q, const int64_t *restrict ks, const T *restrict ts, T inv_h,                      \
                   const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict d,               \
                   const T *restrict rows, const T *restrict h,                                               \
                   const T *restrict gm, const T *restrict pos, T *restrict gh, T *restrict gpos,             \
                   T *restrict part, T *restrict ppos, int nthreads) {                                        \
    int64_t nseg = R_ * NS;                                                                                   \
    _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nthreads)")                                    \
    for (int64_t g = 0; g < nseg; ++g) {                                                                      \
        int64_t r = g / NS, s = g - r * NS, lo = r * N + s * SB, off = part_offset(r, s, N, SB, NS);         \
        T *restrict pg = part + off * F, *restrict pp = ppos + off * 3;                                       \
        memset(pg, 0, (size_t)((r + 1) * N - lo) * F * sizeof(T));                                           \
        memset(pp, 0, (size_t)((r + 1) * N - lo) * 3 * sizeof(T));                                  \
        int64_t p0 = seg_start[g], p1 = seg_start[g + 1];                                                     \
        SPECIALISE(tbwd_seg_##S(FF, QQ, p0, p1, ks, ts, inv_h, pi, pj, d, rows, h, gm, pos, gh, gpos, pg, pp,  \
                                lo),                                                                          \
                   tbwd_seg_##S(F, Q, p0, p1, ks, ts, inv_h, pi, pj, d, rows, h, gm, pos, gh, gpos, pg, pp, lo)) \
    }                                                                                                         \
    reduce_parts_##S(R_ * N, N, SB, NS, F, part, gh, nthreads);                                               \
    reduce_parts_##S(R_ * N, N, SB, NS, 3, ppos, gpos, nthreads);                                             \
}

KERNELS(float, f32)
KERNELS(double, f64)

"""
SOURCE = PRELUDE + BODY


def _declare(lib) -> None:
    i64, ptr, int_ = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for S, real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        getattr(lib, f"msg_fwd_{S}").argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr]
        getattr(lib, f"msg_bwd_{S}").argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
        getattr(lib, f"pairs_within_{S}").argtypes = [i64, ptr, ptr, ptr, real, ptr, ptr, ptr]
        getattr(lib, f"pairs_within_{S}").restype = i64
        getattr(lib, f"order_pairs_{S}").argtypes = [i64, ptr, ptr, ptr, i64, i64, i64, i64, real, i64, ptr, ptr,
                                                     ptr, ptr, ptr, ptr]
        getattr(lib, f"table_intervals_{S}").argtypes = [i64, i64, ptr, real, real, ptr, ptr, int_]
        getattr(lib, f"table_fwd_{S}").argtypes = [i64, i64, i64, i64, ptr, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr,
                                                   ptr, ptr, int_]
        getattr(lib, f"table_bwd_{S}").argtypes = [i64, i64, i64, i64, ptr, i64, i64, ptr, ptr, real, ptr, ptr, ptr,
                                                   ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, int_]
        for name in ("msg_fwd", "msg_bwd", "order_pairs", "table_intervals", "table_fwd", "table_bwd"):
            getattr(lib, f"{name}_{S}").restype = None


#: the compiled kernels (a ``ctypes.CDLL``) on first call, or None if they cannot be built here
library = Library(SOURCE, "pairs", _declare, "the fused CPU pair kernels",
                  "the torch backend runs its pair loops as PyTorch ops (same results, slower)")
