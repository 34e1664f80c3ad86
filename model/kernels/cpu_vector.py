"""The C text both CPU kernel libraries (:mod:`~flashschnet.kernels.cpu_pairs`,
:mod:`~flashschnet.kernels.cpu_nodes`) start with: headers, 256-bit vector types and the vector tanh.

Vectors are GCC/clang vector extensions (AVX2 on x86, two 128-bit halves on NEON or SSE), declared ``may_alias``
with element alignment so that they load straight from rows of a tensor; with ``-ffp-contract=fast``
(:data:`~flashschnet.kernels.cpu_build.FLAGS`) ``a * b + c`` is one fused multiply-add.
"""

PRELUDE = r"""
#include <stdint.h>
#include <math.h>
#include <string.h>

#define AI __attribute__((always_inline))

typedef float vec_f32 __attribute__((vector_size(32), aligned(4), may_alias));
typedef double vec_f64 __attribute__((vector_size(32), aligned(8), may_alias));
typedef int32_t ivec_f32 __attribute__((vector_size(32)));
#define VL_f32 8
#define VL_f64 4

/* tanh of 8 floats: the rational minimax approximation of Eigen's float tanh (odd degree 13 over even degree 6
   on [-7.9053, 7.9053], clamped outside; at most 4e-7 relative error, measured against float64 tanh by the
   tests); a NaN stays NaN */
static inline AI vec_f32 tanh_vec(vec_f32 x) {
    const float lim = 7.90531110763549805f;
    const vec_f32 hi = {lim, lim, lim, lim, lim, lim, lim, lim}, lo = -hi;
    ivec_f32 below = x < lo, above = x > hi;                 /* (a NaN is neither: it stays NaN) */
    vec_f32 v = (vec_f32)((below & (ivec_f32)lo) | (above & (ivec_f32)hi) | (~(below | above) & (ivec_f32)x));
    vec_f32 v2 = v * v;
    vec_f32 p = v2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = v2 * p - 8.60467152213735e-11f; p = v2 * p + 5.12229709037114e-08f; p = v2 * p + 1.48572235717979e-05f;
    p = v2 * p + 6.37261928875436e-04f; p = v2 * p + 4.89352455891786e-03f;
    vec_f32 q = v2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = v2 * q + 2.26843463243900e-03f; q = v2 * q + 4.89352518554385e-03f;
    return (v * p) / q;
}
"""
