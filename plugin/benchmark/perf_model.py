"""Performance model of a triton-backend step: FLOPs and bytes per kernel for R replicas of the packaged BPTI
structure, and the H200 time they imply -- a prediction to hold a GPU run against (docs/benchmarks.md;
``python tools/perf_model.py [--replicas 64] [--json OUT.json]`` prints it).

Counted from the kernels as written (:mod:`flashschnet.kernels.cfconv`) and the active tile pairs of the real
structure (the tile-flag reference, cutoff 15 A + the default skin):

* a tile pair ``(I, J)`` is processed as 16 x 16 bead pairs (the diagonal tile as all 256 ordered pairs);
  per bead pair the forward kernel does 2 products (``[KP] x [KP, FP]`` and ``[FP] x [FP, FP]``: 2 (KP FP +
  FP FP) tensor-core FLOPs) and the backward kernel 4 (the filter and its forward-mode derivative);
* bytes: per program the staged weights (from L2), per source bead its feature row(s) (L1/L2), per off-diagonal
  tile pair a column partial written and read back by the reduction (HBM: too big for L2 at R = 64), per tile
  the row partial and the outputs.

Throughputs assumed (H200 SXM, dense): bf16/fp16 789 TFLOP/s (measured on the lent machine by its README),
tf32 half of that, HBM 4.8 TB/s, L2 ~10 TB/s. Predicted time = max(compute, memory) per kernel at 100 % and at
an assumed 30 % of peak for ``mma.sync`` products with only 16 rows (Triton cannot use wgmma for M = 16).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

__all__ = ["PEAK", "HBM", "L2", "EFFICIENCY", "active_tile_pairs", "model"]

#: dense throughputs assumed (FLOP/s) per product precision, H200 SXM
PEAK = {"bf16": 789e12, "tf32": 394.5e12}
#: bandwidths assumed (bytes/s): HBM and L2
HBM, L2 = 4.8e12, 10e12
#: the assumed fraction of peak of ``mma.sync`` products with 16 rows
EFFICIENCY = 0.30


def active_tile_pairs(block: int = 16) -> Tuple[int, int, int, int]:
    """(N, T, active tile pairs, of which diagonal) of the packaged BPTI CG structure: beads ``N``, tiles of
    ``block`` beads ``T``, and the tile pairs ``(I <= J)`` whose bounding spheres come within the cutoff plus the
    default skin."""
    import torch

    from flashschnet.cg.mapping import map_pdb
    from flashschnet.config import DEFAULT_SKIN_FRACTION

    from .defaults import DEFAULT_CONFIG, default_pdb

    with default_pdb() as path:
        mol = map_pdb(path)
    pos = torch.as_tensor(mol.positions, dtype=torch.float64)
    rc = float(DEFAULT_CONFIG["rbf"]["cutoff"]["cutoff_upper"])
    radius = rc * (1.0 + DEFAULT_SKIN_FRACTION)
    N = pos.shape[0]
    T = (N + block - 1) // block
    tiles = [pos[I * block:(I + 1) * block] for I in range(T)]
    cen = [t.mean(0) for t in tiles]
    rad = [float((t - c).norm(dim=-1).max()) for t, c in zip(tiles, cen)]
    active = sum(1 for I in range(T) for J in range(I, T) if float((cen[I] - cen[J]).norm()) - rad[I] - rad[J] < radius)
    return N, T, active, T


def model(R: int = 64, F: int = 128, K: int = 50, H: int = 128, blocks: int = 3, block: int = 16) -> Dict[str, Any]:
    """The model for ``R`` replicas (filters ``F``, basis functions ``K``, hidden ``H``, interaction ``blocks``,
    tiles of ``block`` beads): ``R, N, T, active_tile_pairs, slots, bead_pairs_per_replica_block`` and ``rows``,
    one per kernel and product precision (``kernel, dot, flops, l2_bytes, hbm_bytes, ms_at_peak, ms_at_30pct``)."""
    N, T, active, diag = active_tile_pairs(block)
    KP, FP = 64, F
    pairs = active * block * block                          # bead pairs processed per replica and block
    fl_fwd = 2 * (KP * FP + FP * FP)                        # tensor-core FLOPs per bead pair, forward kernel
    rows = []
    for name, tc, w in (("_cfconv_fwd_kernel", fl_fwd, 1), ("_cfconv_bwd_kernel", 2 * fl_fwd, 2)):
        for dot, wbytes in (("bf16", 2), ("tf32", 4)):
            flops = R * blocks * pairs * tc
            staged = R * T * blocks * (KP * FP + FP * FP) * wbytes          # weights, once per program (L2)
            feats = R * blocks * active * block * F * 4 * w                 # source rows h (and gm), L1/L2
            colbuf = R * blocks * (active - diag) * block * (F * 4 + (12 if w == 2 else 0))   # HBM writes
            rowbuf = R * blocks * T * block * (F * 4 + (12 if w == 2 else 0))
            t100 = max(flops / PEAK[dot], (staged + feats) / L2, (colbuf + rowbuf) / HBM)
            rows.append({"kernel": name, "dot": dot, "flops": flops, "l2_bytes": staged + feats,
                         "hbm_bytes": colbuf + rowbuf, "ms_at_peak": 1e3 * t100,
                         "ms_at_30pct": 1e3 * max(flops / (EFFICIENCY * PEAK[dot]), (staged + feats) / L2,
                                                  (colbuf + rowbuf) / HBM)})
    # reductions (read the partials back) and the node-level PyTorch part (small GEMMs, [R N, H] tensors)
    red = R * blocks * ((active - diag) * block * (2 * F * 4 + 12) + T * block * (2 * F * 4 + 12))
    node_flops = R * N * blocks * 2 * 2 * (H * F + F * H + H * H) + R * N * 2 * 2 * (H * 64 + 64)
    rows.append({"kernel": "_tile_reduce_kernel (x3 per block)", "dot": "-", "flops": 0, "l2_bytes": 0,
                 "hbm_bytes": red, "ms_at_peak": 1e3 * red / HBM, "ms_at_30pct": 1e3 * red / HBM})
    rows.append({"kernel": "node-level PyTorch (GEMMs)", "dot": "fp32", "flops": node_flops, "l2_bytes": 0,
                 "hbm_bytes": 0, "ms_at_peak": 1e3 * node_flops / 67e12, "ms_at_30pct": 1e3 * node_flops / 20e12})
    return {"R": R, "N": N, "T": T, "active_tile_pairs": active, "slots": T * (T + 1) // 2,
            "bead_pairs_per_replica_block": pairs, "rows": rows}
