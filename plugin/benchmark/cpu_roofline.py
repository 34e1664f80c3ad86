"""The CPU roofline of the fused C kernels (``python tools/benchmarks/cpu_roofline.py`` runs it, docs/benchmarks.md
"CPU roofline").

First the core's peaks, measured by small C loops built with the pair kernels' compiler and flags (:func:`peaks`):
float32 FMA throughput (ten independent 256-bit chains) and load bandwidth from buffers that fit L1, L2, L3 and
none (eight accumulators of 256-bit loads). Then, per system (trp-cage with the trained model, BPTI with the
built-in benchmark model: 128 features, 3 blocks, 15 A), replica count and thread count (:func:`kernels`), each
fused kernel of the default float32 filter tables timed alone on a real step's pairs (best of 5 rounds), with the
FLOPs and the L1 traffic its loops do per pair and channel (counted from the source: the interval's ``2Q``
polynomial rows with ``Q`` values per knot, by Horner's rule):

* ``table_fwd``: ``F (4Q + 2)`` FLOPs (``2Q - 1`` multiply-adds for ``W``, two for the messages), ``F (2Q + 4)``
  loads (the interval's rows, ``h_i``, ``h_j``, ``m_i``, ``m_j``) and ``2F`` stores per pair;
* ``table_bwd``: ``F (8Q + 3)`` FLOPs (``4Q - 3`` multiply-adds for ``W`` and ``dW/dt`` together, then
  ``gm_j h_i + gm_i h_j``, the dot product's and the two gradients'), ``F (2Q + 6)`` loads and ``2F`` stores;

(pairs beyond the table's range are skipped and not counted); and one node layer of
:mod:`flashschnet.kernels.cpu_nodes` (``dense_tanh``: ``[M, F] x [F, F]``, ``2 M F^2`` FLOPs, per 96
multiply-adds of a register block two 16-float loads and six broadcasts). The bound of a kernel is the slower of its FLOPs
at the FMA peak and its loads at the L1 load bandwidth (both times the threads); "of bound" is that time over
the measured one. :func:`render`: the Markdown of a report.
"""
from __future__ import annotations

import ctypes
import time


PEAK_SOURCE = r"""
#include <stdint.h>
#include <time.h>
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* float32 FMA throughput, GFLOP/s: ten independent chains in registers */
double fma_peak(int64_t iters) {
    v8 x = {1.0001f, 1.0001f, 1.0001f, 1.0001f, 1.0001f, 1.0001f, 1.0001f, 1.0001f}, y = x * 1e-7f;
    v8 a0 = y, a1 = y * 2, a2 = y * 3, a3 = y * 4, a4 = y * 5, a5 = y * 6, a6 = y * 7, a7 = y * 8, a8 = y * 9,
       a9 = y * 10;
    double t0 = now();
    for (int64_t n = 0; n < iters; ++n) {
        a0 = a0 * x + y; a1 = a1 * x + y; a2 = a2 * x + y; a3 = a3 * x + y; a4 = a4 * x + y;
        a5 = a5 * x + y; a6 = a6 * x + y; a7 = a7 * x + y; a8 = a8 * x + y; a9 = a9 * x + y;
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7),
                         "+x"(a8), "+x"(a9));
    }
    double t = now() - t0;
    v8 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
    volatile float sink = s[0]; (void)sink;
    return iters * 10.0 * 8 * 2 / t / 1e9;
}
/* load bandwidth over n floats, GB/s: eight accumulators (in registers) of 256-bit loads */
double load_bw(const float *buf, int64_t n, int64_t reps) {
    v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    double t0 = now();
    for (int64_t r = 0; r < reps; ++r) {
        for (int64_t c = 0; c + 64 <= n; c += 64) {
            const float *b = buf + c;
            a0 += *(const v8 *)b; a1 += *(const v8 *)(b + 8); a2 += *(const v8 *)(b + 16);
            a3 += *(const v8 *)(b + 24); a4 += *(const v8 *)(b + 32); a5 += *(const v8 *)(b + 40);
            a6 += *(const v8 *)(b + 48); a7 += *(const v8 *)(b + 56);
        }
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7));
    }
    double t = now() - t0;
    v8 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    volatile float sink = s[0]; (void)sink;
    return (double)reps * (double)(n / 64 * 64) * 4 / t / 1e9;
}
"""

#: buffer sizes (KiB) of the load-bandwidth rows: within L1, L2, L3 and beyond
BUFFERS = {"L1": 16, "L2": 256, "L3": 8192, "memory": 262144}


def peaks(scale: float = 1.0) -> dict:
    """The core's float32 FMA peak and load bandwidths (one thread), measured here (``scale``: of the work per
    measurement, ~1 s in all at 1)."""
    import numpy as np

    from flashschnet.kernels.cpu_build import build, cache_dir

    lib = ctypes.CDLL(str(build(PEAK_SOURCE, "peak", cache_dir(), openmp=False)))
    lib.fma_peak.restype = lib.load_bw.restype = ctypes.c_double
    lib.fma_peak.argtypes = [ctypes.c_int64]
    lib.load_bw.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    out = {"fma_gflops": max(lib.fma_peak(max(1, int(30_000_000 * scale))) for _ in range(3))}
    for name, kib in BUFFERS.items():
        n = kib * 256
        buf = np.ones(n + 16, dtype=np.float32)
        start = buf.ctypes.data + (-buf.ctypes.data % 64)          # cache-line aligned: no load splits a line
        reps = max(1, int(3e9 * scale / (n * 4)))
        out[f"load_gbs_{name}"] = max(lib.load_bw(start, n, reps) for _ in range(3))
    return out


def _system(name: str):
    import torch

    from flashschnet import compress, load_model, map_pdb
    from flashschnet.examples import example_path
    from flashschnet.openmm.benchmark.defaults import default_model, default_pdb
    from flashschnet.options import default_network

    if name == "trpcage":
        return (default_network(load_model(example_path("trpcage_trained.pt"))),
                map_pdb(example_path("1L2Y_trpcage.pdb")))
    with default_pdb() as path:
        mol = map_pdb(str(path))
    return compress(default_model(backend="torch").network, dtype="float32"), mol


def _best(f, seconds: float = 0.3) -> float:
    """Best of 5 rounds of ``f`` (each about ``seconds / 5``), seconds per call."""
    f()
    t0 = time.perf_counter()
    f()
    n = max(1, int(seconds / 5 / max(time.perf_counter() - t0, 1e-6)))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def kernels(name: str, replicas: int, threads: int, peak: dict) -> dict:
    """One system's step: the whole network call and each table kernel alone, with their roofline, and one of
    the node pass's dense layers (``dense_tanh``, ``[M, F] x [F, F]``; not part of the pair loops' total)."""
    import torch

    import flashschnet.fused.torch_engine as te
    from flashschnet.fused.node_ops import CNodeOps
    from flashschnet.openmm.benchmark.measure import positions

    torch.set_num_threads(threads)
    net, mol = _system(name)
    pos, types = positions(mol, replicas, torch.float32, "cpu"), torch.as_tensor(mol.bead_types)
    engines = []
    step = te.TorchPairEngine.energy_forces

    def keep(self, *args, **kwargs):
        engines.append(self)
        return step(self, *args, **kwargs)
    te.TorchPairEngine.energy_forces = keep
    try:
        net.energy_forces(pos, types)
    finally:
        te.TorchPairEngine.energy_forces = step
    eng = engines[-1]
    call = _best(lambda: net.energy_forces(pos, types))
    eng.prepare(pos)           # the step's pairs in their order, for the kernels alone (the C step keeps its own)
    loops, src = eng.loops, eng._sources[1][0]
    F, Q, M, size = src.F, src.Q, eng.pos.shape[0], 4
    g = torch.Generator().manual_seed(0)
    h, gm = torch.randn(M, F, generator=g), torch.randn(M, F, generator=g)
    m, gh, gp = torch.zeros(M, F), torch.zeros(M, F), torch.zeros(M, 3)
    ks, ts = eng._intervals_of(src)
    pairs = int((ks >= 0).sum())
    blocks = len(eng._sources[1])
    runs = {"order_pairs": lambda: loops.order_pairs(eng.i, eng.j, eng.d, eng.seg, 1.0),
            "table_intervals": lambda: loops.table_intervals(src, eng.d),
            "table_fwd": lambda: (m.zero_(), loops.table_fwd(src, eng.seg, ks, ts, eng.i, eng.j, h, m)),
            "table_bwd": lambda: (gh.zero_(), gp.zero_(),
                                  loops.table_bwd(src, eng.seg, ks, ts, eng.i, eng.j, eng.d, h, gm, eng.pos, gh, gp))}
    # (FLOPs, bytes loaded, bytes stored) of a kernel's call: the table kernels' per pair, times the pairs
    work = {k: tuple(x * pairs for x in per_pair) for k, per_pair in (
        ("table_fwd", (F * (4 * Q + 2), F * (2 * Q + 4) * size, 2 * F * size)),
        ("table_bwd", (F * (8 * Q + 3), F * (2 * Q + 6) * size, 2 * F * size)))}
    if isinstance(eng.node_ops, CNodeOps):
        # one node layer, [M, F] x [F, F] with its tanh: per 6 x 16 register block and input, two 16-float
        # vector loads of the packed weights and six broadcasts of the rows for 96 multiply-adds
        W, b = torch.randn(F, F, generator=g) / F ** 0.5, torch.randn(F, generator=g)
        runs["dense_tanh"] = lambda: eng.node_ops.dense_tanh(h, W, b)
        macs = M * F * F
        work["dense_tanh"] = (2 * macs, macs * (2 * 16 + 6) * size / 96, M * F * size)
    rows = []
    for kernel, f in runs.items():
        t = _best(f)
        # a block's forward and backward run per block; the pair order and the intervals once per step
        row = {"kernel": kernel, "ms": t * 1e3, "per_step": blocks if kernel in ("table_fwd", "table_bwd") else 1}
        if kernel in work:
            flops, loads, stores = work[kernel]
            t_flops = flops / (peak["fma_gflops"] * 1e9 * threads)
            t_loads = loads / (peak["load_gbs_L1"] * 1e9 * threads)
            row.update(gflops=flops / t / 1e9, load_gbs=loads / t / 1e9, store_gbs=stores / t / 1e9,
                       of_fma_peak=t_flops / t, of_l1_loads=t_loads / t,
                       bound="FMA" if t_flops >= t_loads else "L1 loads", of_bound=max(t_flops, t_loads) / t)
        rows.append(row)
    loops_ms = sum(r["ms"] * r["per_step"] for r in rows if r["kernel"] != "dense_tanh")
    return {"system": name, "replicas": replicas, "threads": threads, "beads": int(pos.shape[1]), "features": F,
            "blocks": blocks, "pairs": pairs, "call_ms": call * 1e3, "pair_loops_ms": loops_ms,
            "kernels": rows}


def render(report: dict) -> str:
    """The peaks' line and the kernels' table of a report (Markdown)."""
    p = report["peaks"]
    lines = [f"Peaks (one thread): float32 FMA {p['fma_gflops']:.1f} GFLOP/s; loads "
             + ", ".join(f"{k} {p[f'load_gbs_{k}']:.0f} GB/s" for k in BUFFERS) + ".", "",
             "| system | R | threads | pairs | call (ms) | pair loops (ms) | kernel | ms | GFLOP/s | of FMA peak | "
             "L1 loads GB/s | of L1 loads | bound | of bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in report["systems"]:
        for k in s["kernels"]:
            if "gflops" not in k:
                continue
            lines.append(f"| {s['system']} | {s['replicas']} | {s['threads']} | {s['pairs']} | {s['call_ms']:.2f} | "
                         f"{s['pair_loops_ms']:.2f} | {k['kernel']} | {k['ms']:.3f} | {k['gflops']:.1f} | "
                         f"{k['of_fma_peak']:.0%} | {k['load_gbs']:.0f} | {k['of_l1_loads']:.0%} | {k['bound']} | "
                         f"{k['of_bound']:.0%} |")
    return "\n".join(lines)
