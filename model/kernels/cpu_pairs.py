"""Fused CPU kernels of the ``torch`` backend's pair loops, in C, compiled on first use.

Why C: on a CPU the per-pair work of a CFConv block -- gather ``h_j``, multiply by the filter, scatter-add
into ``m_i`` (and the same for the other direction), or the backward's four gathers, products, row-wise dot and
scatters -- is a chain of eager PyTorch ops, each a full pass over ``[P, F]`` tensors in memory
(``torch.profiler``: ``index_select``, ``mul`` and ``index_add_`` take ~3/4 of a tabulated step at R = 8 BPTI).
PyTorch has no fused gather-multiply-scatter op, and ``torch.compile`` turns scatters into atomic adds whose
order (with more than one thread) is not reproducible, which would break bitwise resume. These loops do one
pass per pair with everything in registers/L1, in a fixed order (single-threaded, so results repeat bitwise).
A table lookup (:mod:`flashschnet.nn.table`) fuses into the same loop, so a compressed model never writes a
filter to memory.

Kernels (``T`` = float or double; ``M`` beads, ``F`` channels, ``P`` pairs ``(i_p, j_p)``, ``i != j``):

* ``msg_fwd``: ``m_i += W_p h_j``, ``m_j += W_p h_i`` with ``W [P, F]`` given;
* ``msg_bwd``: ``gh_j += W_p gm_i``, ``gh_i += W_p gm_j``, ``dd_p = sum_c dW_pc (gm_i h_j + gm_j h_i)_c``,
  ``gpos_i += (r_i - r_j) dd_p / d_p``, ``gpos_j -= ...`` with ``W``, ``dW`` given;
* ``pairs_within``: the pairs of a Verlet list closer than the cutoff, with their distances, in list order (one
  pass instead of gathers, a norm, a comparison and a compaction as PyTorch ops);
* ``table_weights``: every pair's table interval ``ks [P]`` (-1 for ``d >= r_end``: the pair is skipped) and
  Hermite weights ``wts [P, 4Q]`` -- ``[t^0 .. t^(2Q-1)] @ coeffs [2Q, 4Q]``, value columns then derivative columns
  already divided by ``h`` -- once per step, shared by every block whose table has the same knots;
* ``table_fwd`` / ``table_bwd``: the message kernels with ``W`` (and ``dW/dd``) a weighted sum of the pair's
  interval's rows of an interval-major table ``rows [2Q (n-1), F]`` (interval ``k``: knot ``k``'s ``Q`` entries
  then knot ``k+1``'s, scales applied). They are compiled for the common widths and degrees (``F`` in 32, 64,
  128, 256; ``Q`` 2 or 3) with ``F`` and ``Q`` as constants, which lets the compiler unroll the row sums: ~3x
  faster than the generic loop (which serves other sizes) and the same operations in the same order, so the
  results are bitwise the same either way.

The library is built with the system C compiler (``$CC``, else ``cc``) into ``~/.cache/flashschnet/kernels``
(``$FLASHSCHNET_KERNEL_CACHE``), keyed by the source, the flags and the CPU, and loaded with ``ctypes``.
:func:`library` returns None when no compiler works; callers then run the eager PyTorch ops (the same
arithmetic, tested against each other), with a one-line note.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional

_log = logging.getLogger("flashschnet")

SOURCE = r"""
#include <stdint.h>
#include <math.h>
#include <string.h>

#define FMA_f32 fmaf
#define FMA_f64 fma
#define SQRT_f32 sqrtf
#define SQRT_f64 sqrt

/* run CALL with F, Q as the literals FF, QQ (and a stack buffer buf of 2 FF) when they match, then return */
#define SPEC1(T, CALL, F_, Q_) if (F == F_ && Q == Q_) { enum { FF = F_, QQ = Q_ }; T buf[2 * F_]; CALL; return; }
#define SPECIALISE(T, CALL) SPEC1(T, CALL, 32, 3) SPEC1(T, CALL, 64, 3) SPEC1(T, CALL, 128, 3)                        \
    SPEC1(T, CALL, 256, 3) SPEC1(T, CALL, 32, 2) SPEC1(T, CALL, 64, 2) SPEC1(T, CALL, 128, 2) SPEC1(T, CALL, 256, 2)

#define KERNELS(T, S)                                                                                         \
void msg_fwd_##S(int64_t P, int64_t F, const int64_t *restrict pi, const int64_t *restrict pj,                 \
                 const T *restrict W, const T *restrict h, T *restrict m) {                                   \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        const T *restrict w = W + p * F;                                                                      \
        const T *restrict hi = h + pi[p] * F, *restrict hj = h + pj[p] * F;                                   \
        T *restrict mi = m + pi[p] * F, *restrict mj = m + pj[p] * F;                                         \
        for (int64_t c = 0; c < F; ++c) { mi[c] += w[c] * hj[c]; }                                            \
        for (int64_t c = 0; c < F; ++c) { mj[c] += w[c] * hi[c]; }                                            \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
static inline __attribute__((always_inline)) void pair_bwd_##S(                                               \
                                int64_t F, int64_t i, int64_t j, const T *restrict w, const T *restrict dw,   \
                                const T *restrict h, const T *restrict gm, const T *restrict pos, T d,        \
                                T *restrict gh, T *restrict gpos) {                                           \
    const T *restrict hi = h + i * F, *restrict hj = h + j * F;                                               \
    const T *restrict gi = gm + i * F, *restrict gj = gm + j * F;                                             \
    T *restrict ghi = gh + i * F, *restrict ghj = gh + j * F;                                                 \
    T acc = 0;                                                                                                \
    _Pragma("omp simd reduction(+:acc)")                                                                      \
    for (int64_t c = 0; c < F; ++c) { acc += dw[c] * (gi[c] * hj[c] + gj[c] * hi[c]); }                      \
    for (int64_t c = 0; c < F; ++c) { ghj[c] += w[c] * gi[c]; }                                               \
    for (int64_t c = 0; c < F; ++c) { ghi[c] += w[c] * gj[c]; }                                               \
    T s = acc / d;                                                                                            \
    for (int a = 0; a < 3; ++a) {                                                                             \
        T v = (pos[i * 3 + a] - pos[j * 3 + a]) * s;                                                          \
        gpos[i * 3 + a] += v;                                                                                 \
        gpos[j * 3 + a] -= v;                                                                                 \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
void msg_bwd_##S(int64_t P, int64_t F, const int64_t *restrict pi, const int64_t *restrict pj,                 \
                 const T *restrict W, const T *restrict dW, const T *restrict h, const T *restrict gm,        \
                 const T *restrict pos, const T *restrict d, T *restrict gh, T *restrict gpos) {              \
    for (int64_t p = 0; p < P; ++p)                                                                           \
        pair_bwd_##S(F, pi[p], pj[p], W + p * F, dW + p * F, h, gm, pos, d[p], gh, gpos);                     \
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
/* the Hermite weights of one pair: wv[2Q] (value), wd[2Q] (derivative); returns the interval, -1 if d >= r_end */ \
static inline __attribute__((always_inline)) int64_t weights_##S(                                             \
                                  T d, int64_t Q, int64_t nint, const T *restrict coeffs, T inv_h, T r_end,   \
                                  T *restrict wv, T *restrict wd) {                                           \
    if (!(d < r_end)) return -1;                                                                              \
    T x = d * inv_h;                                                                                          \
    T kf = floor(x);                                                                                          \
    if (kf < 0) kf = 0;                                                                                       \
    if (kf > (T)(nint - 1)) kf = (T)(nint - 1);                                                               \
    T t = x - kf, pw = 1;                                                                                     \
    int64_t R = 2 * Q;                                                                                        \
    for (int64_t c = 0; c < R; ++c) { wv[c] = 0; wd[c] = 0; }                                                \
    for (int64_t e = 0; e < R; ++e) {                                                                         \
        for (int64_t c = 0; c < R; ++c) { wv[c] += pw * coeffs[e * 2 * R + c]; }                              \
        for (int64_t c = 0; c < R; ++c) { wd[c] += pw * coeffs[e * 2 * R + R + c]; }                          \
        pw *= t;                                                                                              \
    }                                                                                                         \
    return (int64_t)kf;                                                                                       \
}                                                                                                             \
                                                                                                              \
/* every pair's interval ks[p] (-1: d >= r_end, the pair is skipped) and Hermite weights wts[p, 4Q] */        \
void table_weights_##S(int64_t P, int64_t Q, int64_t nint, const T *restrict d, const T *restrict coeffs,     \
                       T inv_h, T r_end, int64_t *restrict ks, T *restrict wts) {                             \
    /* a literal degree lets the compiler unroll the powers (~8x faster) */                                   \
    if (Q == 3) { for (int64_t p = 0; p < P; ++p) ks[p] = weights_##S(d[p], 3, nint, coeffs, inv_h, r_end,    \
                                                                       wts + p * 12, wts + p * 12 + 6); return; } \
    if (Q == 2) { for (int64_t p = 0; p < P; ++p) ks[p] = weights_##S(d[p], 2, nint, coeffs, inv_h, r_end,    \
                                                                       wts + p * 8, wts + p * 8 + 4); return; }   \
    for (int64_t p = 0; p < P; ++p)                                                                           \
        ks[p] = weights_##S(d[p], Q, nint, coeffs, inv_h, r_end, wts + p * 4 * Q, wts + p * 4 * Q + 2 * Q);  \
}                                                                                                             \
                                                                                                              \
static inline __attribute__((always_inline)) void lookup_##S(                                                 \
                              int64_t F, int64_t R, const T *restrict rows, const T *restrict wv,             \
                              T *restrict out) {                                                              \
    for (int64_t c = 0; c < F; ++c) { out[c] = wv[0] * rows[c]; }                                             \
    for (int64_t r = 1; r < R; ++r) {                                                                         \
        const T *restrict row = rows + r * F;                                                                 \
        T a = wv[r];                                                                                          \
        for (int64_t c = 0; c < F; ++c) { out[c] += a * row[c]; }                                             \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* F and Q are compile-time constants where a caller below inlines these with literals */                     \
static inline __attribute__((always_inline)) void tfwd_##S(                                                   \
        int64_t P, int64_t F, int64_t Q, const int64_t *restrict ks, const T *restrict wts,                   \
        const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict rows, const T *restrict h,  \
        T *restrict m, T *restrict wbuf) {                                                                    \
    int64_t R = 2 * Q;                                                                                        \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        int64_t k = ks[p];                                                                                    \
        if (k < 0) continue;                                                                                  \
        lookup_##S(F, R, rows + k * R * F, wts + p * 4 * Q, wbuf);                                            \
        const T *restrict hi = h + pi[p] * F, *restrict hj = h + pj[p] * F;                                   \
        T *restrict mi = m + pi[p] * F, *restrict mj = m + pj[p] * F;                                         \
        for (int64_t c = 0; c < F; ++c) { mi[c] += wbuf[c] * hj[c]; }                                         \
        for (int64_t c = 0; c < F; ++c) { mj[c] += wbuf[c] * hi[c]; }                                         \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
static inline __attribute__((always_inline)) void tbwd_##S(                                                   \
        int64_t P, int64_t F, int64_t Q, const int64_t *restrict ks, const T *restrict wts,                   \
        const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict d, const T *restrict rows,  \
        const T *restrict h, const T *restrict gm, const T *restrict pos, T *restrict gh, T *restrict gpos,   \
        T *restrict wbuf) {                                                                                   \
    int64_t R = 2 * Q;                                                                                        \
    for (int64_t p = 0; p < P; ++p) {                                                                         \
        int64_t k = ks[p];                                                                                    \
        if (k < 0) continue;                                                                                  \
        const T *restrict rows_k = rows + k * R * F;                                                          \
        lookup_##S(F, R, rows_k, wts + p * 4 * Q, wbuf);                                                      \
        lookup_##S(F, R, rows_k, wts + p * 4 * Q + R, wbuf + F);                                              \
        pair_bwd_##S(F, pi[p], pj[p], wbuf, wbuf + F, h, gm, pos, d[p], gh, gpos);                            \
    }                                                                                                         \
}                                                                                                             \
                                                                                                              \
/* the table loops, given table_weights' ks and wts: specialised for the common widths and degrees (constant  \
   F and Q let the compiler unroll the row sums and keep a pair's filter in registers, ~3x faster), else     \
   generic; the same arithmetic in the same order either way */                                               \
void table_fwd_##S(int64_t P, int64_t F, int64_t Q, const int64_t *restrict ks, const T *restrict wts,        \
                   const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict rows,            \
                   const T *restrict h, T *restrict m, T *restrict wbuf) {                                    \
    SPECIALISE(T, tfwd_##S(P, FF, QQ, ks, wts, pi, pj, rows, h, m, buf))                                         \
    tfwd_##S(P, F, Q, ks, wts, pi, pj, rows, h, m, wbuf);                                                     \
}                                                                                                             \
                                                                                                              \
void table_bwd_##S(int64_t P, int64_t F, int64_t Q, const int64_t *restrict ks, const T *restrict wts,        \
                   const int64_t *restrict pi, const int64_t *restrict pj, const T *restrict d,               \
                   const T *restrict rows, const T *restrict h, const T *restrict gm, const T *restrict pos,  \
                   T *restrict gh, T *restrict gpos, T *restrict wbuf) {                                      \
    SPECIALISE(T, tbwd_##S(P, FF, QQ, ks, wts, pi, pj, d, rows, h, gm, pos, gh, gpos, buf))                      \
    tbwd_##S(P, F, Q, ks, wts, pi, pj, d, rows, h, gm, pos, gh, gpos, wbuf);                                  \
}

KERNELS(float, f32)
KERNELS(double, f64)
"""

_FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fPIC", "-shared", "-std=c11"]

_LOCK = threading.Lock()
_LIB: Optional[object] = None
_TRIED = False


def _cpu_key() -> str:
    """What ``-march=native`` depends on: the CPU's model name and flags."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags", "Features"))]
        return "\n".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def _build(cache: Path) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise OSError("no C compiler found (set CC)")
    key = hashlib.sha256("\0".join([SOURCE, cc, " ".join(_FLAGS), _cpu_key(), platform.machine()]).encode())
    lib = cache / f"pairs-{key.hexdigest()[:16]}.so"
    if lib.exists():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / "pairs.c"
        src.write_text(SOURCE)
        out = Path(tmp) / "pairs.so"
        res = subprocess.run([cc, *_FLAGS, str(src), "-o", str(out), "-lm"], capture_output=True, text=True)
        if res.returncode != 0:
            errors = [ln for ln in res.stderr.splitlines() if "error" in ln] or res.stderr.splitlines() or [""]
            raise OSError(f"{cc} failed: {errors[0].strip() or f'exit status {res.returncode}'}")
        os.replace(out, lib)              # atomic: concurrent builders leave one complete file
    return lib


def _declare(lib) -> None:
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for S, real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        getattr(lib, f"msg_fwd_{S}").argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr]
        getattr(lib, f"msg_bwd_{S}").argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
        getattr(lib, f"pairs_within_{S}").argtypes = [i64, ptr, ptr, ptr, real, ptr, ptr, ptr]
        getattr(lib, f"pairs_within_{S}").restype = i64
        getattr(lib, f"table_weights_{S}").argtypes = [i64, i64, i64, ptr, ptr, real, real, ptr, ptr]
        getattr(lib, f"table_fwd_{S}").argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
        getattr(lib, f"table_bwd_{S}").argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr,
                                                   ptr]
        for name in ("msg_fwd", "msg_bwd", "table_weights", "table_fwd", "table_bwd"):
            getattr(lib, f"{name}_{S}").restype = None


def library():
    """The compiled kernels (a ``ctypes.CDLL``), built on first use; None if they cannot be built here (a
    one-line note is logged once)."""
    global _LIB, _TRIED
    with _LOCK:
        if not _TRIED:
            _TRIED = True
            cache = Path(os.environ.get("FLASHSCHNET_KERNEL_CACHE") or Path.home() / ".cache" / "flashschnet" / "kernels")
            try:
                lib = ctypes.CDLL(str(_build(cache)))
                _declare(lib)
                _LIB = lib
            except OSError as exc:
                _log.warning(f"flashschnet: the fused CPU pair kernels could not be built ({exc}); the torch backend "
                             f"runs its pair loops as PyTorch ops (same results, slower)")
        return _LIB
