"""Fused CPU kernels of the node pass's dense layers (float32), in C, compiled on first use.

Why C: the node pass of a CGSchNet step (:mod:`flashschnet.fused.nodes`: ``lin1``, ``lin2 -> tanh``, ``lin``
with its residual, the output MLP and their backward) is a chain of small products (``[M, 64] x [64, 64]`` for
trp-cage's 97 beads) and element-wise ops; as PyTorch ops each is a dispatch and a pass over memory, and
``torch.profiler`` put the node pass at half of trp-cage's call (0.73 of 1.48 ms on one thread) with ~60 ops,
the products running at about half the core's float32 FMA peak. Here a layer is one call: the product with its
bias and activation (or activation derivative, or residual) applied to the accumulators before they are stored.

Kernels (``M`` rows, ``K`` inputs, ``N`` outputs; tensors row-major float32):

* ``pack_f32``: a weight matrix as the product reads it, column panels of 16 (``P[nb, k, c] = B[k, 16 nb + c]``,
  zero beyond ``N``) of ``B = W^T`` (``W [N, K]``, a forward layer) or of ``B = W`` (``W [K, N]``, the
  backward's ``g @ W``); packed once per model by the caller;
* ``dense_f32``: ``out = epi(A @ B + bias)`` with ``epi`` one of :data:`EPILOGUES` (``S [M, N]`` its second
  operand): ``none``, ``tanh``, ``dtanh`` (``* (1 - S^2)``: an activation's derivative from its output) and
  ``add`` (``S + ...``: a residual). Register blocks of 6 rows x 16 columns (12 vector accumulators); rows in
  blocks over OpenMP threads when the product is large enough to pay for them; the tanh is the vector tanh of
  :mod:`~flashschnet.kernels.cpu_vector`.

**The same bits on any thread count, any blocking**: every output element is ``acc = 0; acc = fma(A[i, k],
B[k, n], acc)`` for ``k = 0 .. K-1``, then the bias, then the epilogue -- the panel and row blocks only decide
which elements run together. The products round differently from PyTorch's (a different summation order); the
tests compare them with float64 and with the plain-PyTorch node pass (:class:`flashschnet.fused.node_ops.TorchNodeOps`,
the reference).

Built by :mod:`~flashschnet.kernels.cpu_build` like the pair loops; :func:`library` returns None when no compiler
works (callers then run the PyTorch ops, with a one-line note).
"""
from __future__ import annotations

import ctypes

from .cpu_build import Library
from .cpu_vector import PRELUDE

#: the epilogues of ``dense_f32``, by name: their codes in the C source
EPILOGUES = {"none": 0, "tanh": 1, "dtanh": 2, "add": 3}
#: columns per packed panel (two 8-float vectors)
PANEL = 16
#: multiply-adds (M N K) from which a product splits its rows over threads
THREADED_MACS = 1 << 17

#: the node kernels' C text (after :data:`~flashschnet.kernels.cpu_vector.PRELUDE`); :mod:`~flashschnet.kernels.cpu_step` builds on it
BODY = r"""
#define NR 16
#define MR 6
enum { EPI_NONE = 0, EPI_TANH = 1, EPI_DTANH = 2, EPI_ADD = 3 };

void pack_f32(int64_t K, int64_t N, const float *restrict W, int trans, float *restrict P) {
    int64_t npanel = (N + NR - 1) / NR;
    for (int64_t nb = 0; nb < npanel; ++nb)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t c = 0; c < NR; ++c) {
                int64_t n = nb * NR + c;
                P[(nb * K + k) * NR + c] = n >= N ? 0.0f : trans ? W[n * K + k] : W[k * N + n];
            }
}

/* v = epi(acc + bias) for 16 columns, vectors in and out; bias, s: 16 floats (padded by the caller) */
static inline AI void epilogue(vec_f32 *v0, vec_f32 *v1, const float *restrict bias, int mode,
                               const float *restrict s) {
    if (bias) { *v0 = *v0 + *(const vec_f32 *)bias; *v1 = *v1 + *(const vec_f32 *)(bias + 8); }
    if (mode == EPI_TANH) { *v0 = tanh_vec(*v0); *v1 = tanh_vec(*v1); }
    else if (mode == EPI_DTANH) {
        vec_f32 s0 = *(const vec_f32 *)s, s1 = *(const vec_f32 *)(s + 8);
        *v0 = *v0 * (1.0f - s0 * s0); *v1 = *v1 * (1.0f - s1 * s1);
    } else if (mode == EPI_ADD) {
        *v0 = *(const vec_f32 *)s + *v0; *v1 = *(const vec_f32 *)(s + 8) + *v1;
    }
}

/* rows [i0, i0 + mr) of out, panel nb (mr <= MR, a literal after inlining: the accumulators stay in
   registers) */
static inline AI void rows(const int mr, int64_t nb, int64_t N, int64_t K, const float *restrict A,
                           const float *restrict P, const float *restrict bias, int mode, const float *restrict S,
                           float *restrict out) {
    {
        const float *restrict p = P + nb * K * NR;
        vec_f32 a0[MR], a1[MR];
        for (int r = 0; r < mr; ++r) { a0[r] = (vec_f32){0}; a1[r] = (vec_f32){0}; }
        for (int64_t k = 0; k < K; ++k) {
            vec_f32 b0 = *(const vec_f32 *)(p + k * NR), b1 = *(const vec_f32 *)(p + k * NR + 8);
            for (int r = 0; r < mr; ++r) {
                float a = A[r * K + k];
                a0[r] = a * b0 + a0[r];
                a1[r] = a * b1 + a1[r];
            }
        }
        int64_t n0 = nb * NR, w = N - n0 < NR ? N - n0 : NR;
        for (int r = 0; r < mr; ++r) {
            float sb[NR] = {0}, ob[NR];
            const float *s = S ? S + r * N + n0 : sb;
            if (w < NR && S) { memcpy(sb, S + r * N + n0, (size_t)w * sizeof(float)); s = sb; }
            epilogue(&a0[r], &a1[r], bias ? bias + n0 : 0, mode, s);
            if (w == NR) { *(vec_f32 *)(out + r * N + n0) = a0[r]; *(vec_f32 *)(out + r * N + n0 + 8) = a1[r]; }
            else { memcpy(ob, &a0[r], 32); memcpy(ob + 8, &a1[r], 32); memcpy(out + r * N + n0, ob, (size_t)w * 4); }
        }
    }
}

/* out [M, N] = epi(A [M, K] @ B + bias) with B packed (pack_f32), bias NULL or padded to the panels, S [M, N]
   the epilogue's operand (dtanh, add) */
void dense_f32(int64_t M, int64_t N, int64_t K, const float *restrict A, const float *restrict P,
               const float *restrict bias, int mode, const float *restrict S, float *restrict out, int nthreads,
               int64_t threaded_macs) {
    int64_t nblk = (M + MR - 1) / MR, npanel = (N + NR - 1) / NR;
    int nt = M * N * K >= threaded_macs ? nthreads : 1;
    /* thread t: row blocks [t nblk / nt, (t + 1) nblk / nt), panel by panel (a panel stays in L1 while the
       thread's rows stream past it) */
    _Pragma("omp parallel for schedule(static, 1) num_threads(nt) if(nt > 1)")
    for (int t = 0; t < nt; ++t) {
        int64_t b0 = t * nblk / nt, b1 = (t + 1) * nblk / nt;
        for (int64_t nb = 0; nb < npanel; ++nb)
            for (int64_t b = b0; b < b1; ++b) {
                int64_t i0 = b * MR;
                int mr = M - i0 < MR ? (int)(M - i0) : MR;
                const float *a = A + i0 * K, *s = S ? S + i0 * N : 0;
                float *o = out + i0 * N;
                switch (mr) {
                    case 6: rows(6, nb, N, K, a, P, bias, mode, s, o); break;
                    case 5: rows(5, nb, N, K, a, P, bias, mode, s, o); break;
                    case 4: rows(4, nb, N, K, a, P, bias, mode, s, o); break;
                    case 3: rows(3, nb, N, K, a, P, bias, mode, s, o); break;
                    case 2: rows(2, nb, N, K, a, P, bias, mode, s, o); break;
                    default: rows(1, nb, N, K, a, P, bias, mode, s, o); break;
                }
            }
    }
}
"""
SOURCE = PRELUDE + BODY


def _declare(lib) -> None:
    i64, ptr, int_ = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    lib.pack_f32.argtypes = [i64, i64, ptr, int_, ptr]
    lib.dense_f32.argtypes = [i64, i64, i64, ptr, ptr, ptr, int_, ptr, ptr, int_, i64]
    for name in ("pack_f32", "dense_f32"):
        getattr(lib, name).restype = None


#: the compiled kernels (a ``ctypes.CDLL``) on first call, or None if they cannot be built here
library = Library(SOURCE, "nodes", _declare, "the fused CPU node kernels",
                  "the node pass runs as PyTorch ops (slower)")
