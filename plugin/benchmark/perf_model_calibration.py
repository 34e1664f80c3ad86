"""The calibration half of the performance model (:mod:`flashschnet.openmm.benchmark.perf_model`): the cost
primitives, the structure's tiles, the OLD kernels' model and its fit to the H200 measurements.

**Cost of a program's work.** A piece of a kernel's work (an old kernel's iteration over one source bead, a new
kernel's chunk or item, a node kernel's tile) is a vector ``[links, fp32, l1, l2, tc]``: its *dependent chain
links* (a global load whose address or use waits on the previous step, or a block-wide reduction through shared
memory and a barrier), FP32 lane operations, bytes through L1 / shared memory, bytes from L2, and tensor-core
cycles at the datasheet peak. One program alone on a multiprocessor (in-order warps, a barrier per step) takes
``links * lambda + fp32/128 + max(l1/128, l2/64) + tc`` cycles (:func:`alone`); ``k`` busy programs sharing a
multiprocessor each take at least ``k`` times the busiest pipe (:func:`busy`): the max of the two (:func:`cycles`).

**Old kernels.** Grid ``R*T`` (T tiles of 16 beads), programs assigned in pid order to the first free slot of
132 SMs x blocks per SM (:func:`occupancy` of the binaries' registers and shared memory, :data:`OLD_BINARIES`),
program ``(r, I)`` lasting ``c0 + n_iter(I) * c_iter`` (:func:`makespan`): ``n_iter(I)`` the source beads of the
active tiles ``J >= I`` (the real structure's flags), ``c0`` the staging of the filter weights from L2.
``c_iter`` per variant is fitted on the R = 1 per-kernel device times of docs/gpu-kernel-profile.json (tables and
tf32); the bf16 variants are the tf32 chains with bf16's pipe work (half the operand bytes, twice the tensor
rate) -- not fitted. With co-resident programs (the exact forward: 2 per SM) an iteration takes at least ``k``
times its busiest pipe. The rest of a call (node-level PyTorch ops, reduces, flags, launches from Python) is
``n_launch * t_launch + R * (bytes/HBM + GEMM FLOPs/(eta_gemm * 67 TFLOP/s))`` (:func:`old_rest_counts`),
``t_launch`` and ``eta_gemm`` fitted by least squares on the four profile rows' ``wall - CFConv kernels``
(R = 1 and 64, tables and tf32). Every row of docs/device-h200.json is then a prediction but the R = 1 table and
tf32 rows' kernel share: R = 8, 64, 128 (the check), all three bf16 rows.

``lambda`` (cycles per chain link, used by the new kernels) is the least-squares value over the four profiled
variants' ``c_iter`` with their pipe work at datasheet rates removed (:func:`fit`; each variant's own value is
kept: their spread is the decomposition's consistency). An FMA efficiency below 1 is not separable from latency
with these data: the pipes run at datasheet rates.
"""
from __future__ import annotations

import heapq
import json
import math
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

__all__ = ["SMS", "CLOCK", "vec", "alone", "busy", "cycles", "occupancy", "geometry", "structure", "bpti",
           "active_tile_pairs", "old_iteration", "makespan", "old_kernel_ms", "measurements", "fit", "old_call_ms",
           "calibration", "kernel_checks"]

# ------------------------------------------------------------------ datasheet (assumed, never fitted), H200 SXM
SMS, CLOCK = 132, 1.98e9          #: multiprocessors; boost clock (Hz)
LANES, L1_BPC = 128, 128          #: FP32 lanes per SM per clock; L1 / shared-memory bytes per SM per clock
L2_PORT_BPC = 64                  #: bytes per clock one SM can pull from L2 (assumed port width)
L2_BPS, HBM_BPS, L2_BYTES = 5.5e12, 4.8e12, 50e6   #: aggregate L2 and HBM bandwidth (B/s), L2 size (bytes)
TC_PER_CLK = {"tf32": 2048, "bf16": 4096}          #: dense tensor-core FLOP per SM per clock
FP32_GEMM_PEAK = 67e12            #: FP32 FLOP/s (cuBLAS SIMT GEMMs of the old node-level part)
REGS_PER_SM, SMEM_PER_SM, SMEM_RESERVED = 65536, 233472, 1024
STEP_FS, REBUILD_EVERY = 4, 20    #: MD step (fs); steps between tile-flag rebuilds (assumed)
#: the OLD kernels' binaries (``git show f4fff81:docs/gpu-fit.json``, Triton 3.6.0, sm_90, quintic float32 tables,
#: gaussian basis with both envelopes): warps, registers, shared bytes
OLD_BINARIES = {"table_fwd": (8, 134, 4096), "table_bwd": (8, 168, 4096), "tf32_fwd": (4, 226, 106496),
                "tf32_bwd": (8, 226, 106532), "bf16_fwd": (4, 216, 57344), "bf16_bwd": (8, 236, 53284)}
#: per profiled variant: (profile ``compress``, kernel name)
PROFILED = {"table_fwd": ("float32", "_cfconv_table_fwd_kernel"), "table_bwd": ("float32", "_cfconv_table_bwd_kernel"),
            "tf32_fwd": ("none", "_cfconv_fwd_kernel"), "tf32_bwd": ("none", "_cfconv_bwd_kernel")}
#: the calibration rows of docs/device-h200.json: name -> (compress, matmul)
ROWS = {"float32 tables": ("float32", "auto"), "tf32 exact": ("none", "auto"), "bf16 exact": ("none", "bf16")}
B, F, KP, Q = 16, 128, 64, 3      #: tile, filters (= hidden), padded basis functions, quintic table entries
NC = 32                           #: the node kernels' block width
ROOT = Path(__file__).resolve().parents[2]


def vec(links=0.0, fp32=0.0, l1=0.0, l2=0.0, tc=0.0) -> np.ndarray:
    return np.array([links, fp32, l1, l2, tc], dtype=float)


def alone(v: np.ndarray, lam: float) -> np.ndarray:
    """Cycles of work ``v`` ([..., 5]) of one program alone on its SM: chain links plus the pipes in series."""
    return v[..., 0] * lam + v[..., 1] / LANES + np.maximum(v[..., 2] / L1_BPC, v[..., 3] / L2_PORT_BPC) + v[..., 4]


def busy(v: np.ndarray) -> np.ndarray:
    """Cycles of the busiest pipe of work ``v`` (what co-resident programs cannot overlap)."""
    return np.maximum.reduce([v[..., 1] / LANES, v[..., 2] / L1_BPC, v[..., 3] / L2_PORT_BPC, v[..., 4]])


def cycles(v: np.ndarray, lam: float, k: int) -> np.ndarray:
    """Work ``v`` of one of ``k`` busy programs on an SM: max(its chain alone, k x the busiest pipe)."""
    return np.maximum(alone(v, lam), k * busy(v))


def occupancy(warps: int, regs: int, smem: int) -> int:
    """Blocks per SM from registers (8 per thread granularity, 256 per warp) and shared memory (+1 KB each)."""
    per_warp = math.ceil(math.ceil(regs / 8) * 8 * 32 / 256) * 256
    return max(1, min(REGS_PER_SM // (warps * per_warp), SMEM_PER_SM // (smem + SMEM_RESERVED), 64 // warps))


# ------------------------------------------------------------------ structure: tiles, flags, masks
def geometry(positions, cutoff: float, skin: float, name: str = "", block: int = B) -> Dict[str, Any]:
    """Tiles of ``block`` beads, the active tile pairs (bounding spheres within ``cutoff + skin``, as the flag
    kernel decides), per pair the fraction of its ``block^2`` pairs inside ``cutoff`` (the unmasked ones, real
    beads, ``i != j``), per tile ``n_iter`` (beads of active tiles ``J >= I``) and ``n_src`` (active slots of the
    tile, both sides)."""
    import torch

    pos = torch.as_tensor(np.asarray(positions), dtype=torch.float64)
    N = pos.shape[0]
    T = (N + block - 1) // block
    tiles = [pos[I * block:(I + 1) * block] for I in range(T)]
    cen = [t.mean(0) for t in tiles]
    rad = [float((t - c).norm(dim=-1).max()) for t, c in zip(tiles, cen)]
    pairs = [(I, J) for I in range(T) for J in range(I, T)
             if float((cen[I] - cen[J]).norm()) - rad[I] - rad[J] < cutoff + skin]
    d = torch.cdist(pos, pos)
    inside = (d < cutoff) & ~torch.eye(N, dtype=torch.bool)
    u = [float(inside[I * block:(I + 1) * block, J * block:(J + 1) * block].sum()) / block ** 2 for I, J in pairs]
    nb = [min(block, N - J * block) for J in range(T)]
    act = set(pairs)
    return {"name": name, "N": N, "T": T, "S": T * (T + 1) // 2, "pairs": pairs, "unmasked": u,
            "n_iter": [sum(nb[J] for J in range(I, T) if (I, J) in act) for I in range(T)],
            "n_src": [sum((min(s, X), max(s, X)) in act for s in range(T)) for X in range(T)],
            "u_mean": float(np.mean(u))}


def structure(path, name: str) -> Dict[str, Any]:
    """:func:`geometry` of a PDB file in the 5-bead mapping at the default cutoff (15 A) and skin."""
    from flashschnet.cg.mapping import map_pdb
    from flashschnet.config import DEFAULT_SKIN_FRACTION

    from .defaults import DEFAULT_CONFIG

    rc = float(DEFAULT_CONFIG["rbf"]["cutoff"]["cutoff_upper"])
    return geometry(map_pdb(path).positions, rc, rc * DEFAULT_SKIN_FRACTION, name)


def bpti() -> Dict[str, Any]:
    from .defaults import default_pdb

    with default_pdb() as path:
        return structure(path, "BPTI (284 beads)")


def active_tile_pairs(block: int = B):
    """(N, T, active tile pairs, of which diagonal) of the packaged BPTI CG structure."""
    g = bpti() if block == B else None
    if g is None:
        raise ValueError("flashschnet: the model uses tiles of 16 beads")
    return g["N"], g["T"], len(g["pairs"]), sum(I == J for I, J in g["pairs"])


# ------------------------------------------------------------------ the old kernels
def old_iteration(var: str, u: float) -> np.ndarray:
    """One source-bead iteration of an old kernel variant (16 destination rows x 128 channels, E = 2048). Links
    are counted by one rule for old and new kernels alike: a dependent global-memory round trip, or a dependent
    shared-memory exchange phase (reductions across warps issued together, or a tensor's conversion into a dot
    operand), each once per phase:

    * table fwd: 3 links (position load -> 2Q = 6 gathered rows from L2, the whole 393 KB table being too big
      for L1 -> column reduction); 8 FP32 ops per element (1 sub + 5 FMA for the value, 1 row FMA, 1 column
      FMA); gathered bytes 6 x 4 x u per element (masked pairs load nothing);
    * table bwd: 4 links (+ the per-pair channel sum of ``G dW`` the position partials need); 16 ops (value 6,
      dW 5, G 2, c 1, row 1, column 1);
    * exact fwd: 4 links (position -> basis into the first product's operand -> tanh into the second's ->
      column reduction); 15 ops per element (basis 4, tanh 7, envelope 2, row 1, column 1); 2 x 16 (64 x 128 +
      128 x 128) tensor FLOPs; both weight matrices read from shared memory per product;
    * exact bwd: 6 links (position, basis and tangent into operands, each half's activations into operands, the
      channel sums, the row reductions); 24 ops; twice the products and operand bytes (value and tangent)."""
    E = B * F
    kind, half = var.split("_")
    if kind == "table":
        gat = E * 2 * Q * 4 * u
        return vec(3, E * 8, gat + F * 4, gat) if half == "fwd" else vec(4, E * 16, gat + 2 * F * 4, gat)
    w, mult = (4 if kind == "tf32" else 2), (1 if half == "fwd" else 2)
    ops = 15 if half == "fwd" else 24
    return vec(4 if half == "fwd" else 6, E * ops, mult * (KP * F + F * F) * w + F * 4, 0,
               mult * 2 * B * (KP * F + F * F) / TC_PER_CLK[kind])


def _stage(var: str) -> float:
    """c0: one program's staging of the exact filter's weights from L2 (cycles); nothing for tables."""
    kind = var.split("_")[0]
    return 0.0 if kind == "table" else (KP * F + F * F) * 4 / L2_PORT_BPC


def makespan(durations, slots: int) -> float:
    """Greedy block scheduler: programs in pid order, each to the first free slot; the last end."""
    free = [0.0] * min(slots, len(durations))
    end = 0.0
    for d in durations:
        e = heapq.heappop(free) + d
        end = max(end, e)
        heapq.heappush(free, e)
    return end


def old_kernel_ms(geo, fitted, var: str, R: int) -> float:
    """One call of an old CFConv kernel variant for ``R`` replicas (device ms)."""
    blocks = occupancy(*OLD_BINARIES[var])
    k = min(blocks, math.ceil(R * geo["T"] / SMS))
    c = max(fitted["c_iter"][var], k * float(busy(old_iteration(var, geo["u_mean"]))))
    durs = [_stage(var) + n * c for _ in range(R) for n in geo["n_iter"]]
    return 1e3 * makespan(durs, SMS * blocks) / CLOCK


def old_rest_counts(geo, blocks: int = 3) -> tuple:
    """(bytes, GEMM FLOPs) per replica of the old call's node-level part: ~26 passes over [N, 128] float32 tensors
    per block (the GEMMs' inputs and outputs, tanh, residuals, gates) and 10 for the output MLP; the reduces read
    each block's partials (all active slots, 16 x 128 floats) for ``m`` and ``gh``. FLOPs: 3 + 3 GEMMs [N,128] x
    [128,128] per block, the output MLP 128 -> 128 -> 64 -> 1 and back."""
    N, P = geo["N"], len(geo["pairs"])
    passes = 26 * blocks + 10
    byt = passes * N * F * 4 + blocks * 2 * (P * B * F * 4 + N * F * 4)
    fl = 2 * N * (blocks * 6 * F * F + 2 * (F * F + F * 64) + 64)
    return byt, fl


# ------------------------------------------------------------------ measurements and fit
def measurements(root: Path = ROOT) -> Dict[str, Any]:
    """The calibration data: docs/device-h200.json (triton, no graph, unquantized) and docs/gpu-kernel-profile.json."""
    dev = json.loads((root / "docs" / "device-h200.json").read_text())
    prof = json.loads((root / "docs" / "gpu-kernel-profile.json").read_text())
    walls = {}
    for r in dev["timings"]:
        if r.get("backend") == "triton" and not r.get("cuda_graph") and r.get("quantize") == "none":
            for name, (comp, mm) in ROWS.items():
                if r.get("compress") == comp and r.get("matmul") == mm and r.get("status") == "ok":
                    walls[(name, int(r["replicas"]))] = float(r["median_ms"])
    profile = {(r["compress"], int(r["replicas"])): r for r in prof["rows"]}
    return {"walls": walls, "profile": profile, "device": prof.get("device", "")}


def _kernel_ms(row, name: str) -> float:
    return sum(float(t["ms"]) for t in row["top"] if t["kernel"] == name)


def fit(geo, meas) -> Dict[str, Any]:
    """The fitted constants: ``c_iter`` (cycles) per variant, ``lambda`` (cycles per link, least squares over the
    four profiled variants, with each one's own value), ``t_launch`` (s) and ``eta_gemm``."""
    c_iter, lam_v = {}, {}
    for var, (comp, kern) in PROFILED.items():
        t = _kernel_ms(meas["profile"][(comp, 1)], kern) / 3 * 1e-3 * CLOCK
        c_iter[var] = (t - _stage(var)) / geo["n_iter"][0]
    for var in ("fwd", "bwd"):                    # bf16: the tf32 chains with bf16's pipe work
        tf, bf = old_iteration("tf32_" + var, geo["u_mean"]), old_iteration("bf16_" + var, geo["u_mean"])
        c_iter["bf16_" + var] = c_iter["tf32_" + var] - float(alone(tf, 0.0) - alone(bf, 0.0))
    a = {v: (old_iteration(v, geo["u_mean"])[0] / c_iter[v], float(alone(old_iteration(v, geo["u_mean"]), 0.0))
             / c_iter[v]) for v in PROFILED}
    for v, (L, w) in a.items():
        lam_v[v] = (1 - w) / L
    lam = sum(L * (1 - w) for L, w in a.values()) / sum(L * L for L, w in a.values())
    # the rest of a call: n_launch t_launch + R (bytes/HBM + flops/(eta 67 TFLOP/s)), on the profile rows
    byt, fl = old_rest_counts(geo)
    A, b = [], []
    for (comp, R), row in meas["profile"].items():
        kern = sum(_kernel_ms(row, k) for c, k in PROFILED.values() if c == comp)
        n_launch = 16 + (float(row["launches"]) - 16) / 2      # 16 Triton launches; PyTorch ops counted twice
        A.append([n_launch, R * fl / FP32_GEMM_PEAK])
        b.append((float(row["wall_ms_median"]) - kern) * 1e-3 - R * byt / HBM_BPS)
    (t_launch, inv_eta), *_ = np.linalg.lstsq(np.array(A), np.array(b), rcond=None)
    n_launch = float(np.mean([r[0] for r in A]))
    return {"c_iter": c_iter, "lambda": lam, "lambda_per_variant": lam_v, "t_launch": float(t_launch),
            "eta_gemm": 1.0 / float(inv_eta), "n_launch_old": n_launch, "rest_bytes": byt, "rest_flops": fl}


def old_call_ms(geo, fitted, name: str, R: int, blocks: int = 3) -> float:
    """The old network call (ms): 3 x (CFConv fwd + bwd) + the rest."""
    kind = {"float32 tables": "table", "tf32 exact": "tf32", "bf16 exact": "bf16"}[name]
    kern = blocks * sum(old_kernel_ms(geo, fitted, f"{kind}_{h}", R) for h in ("fwd", "bwd"))
    rest = fitted["n_launch_old"] * fitted["t_launch"] + R * (fitted["rest_bytes"] / HBM_BPS + fitted["rest_flops"]
                                                              / (fitted["eta_gemm"] * FP32_GEMM_PEAK))
    return kern + 1e3 * rest


def calibration(geo, fitted, meas) -> List[Dict[str, Any]]:
    """Per measured row: configuration, R, measured and predicted ms, ratio, within 15 %, in sample (R < 128)."""
    out = []
    for (name, R), ms in sorted(meas["walls"].items(), key=lambda kv: (list(ROWS).index(kv[0][0]), kv[0][1])):
        p = old_call_ms(geo, fitted, name, R)
        out.append({"config": name, "R": R, "measured_ms": ms, "predicted_ms": p, "ratio": p / ms,
                    "within_15pct": abs(p / ms - 1) <= 0.15, "in_sample": R in (1, 8, 64)})
    return out


def kernel_checks(geo, fitted, meas) -> List[Dict[str, Any]]:
    """The old model's CFConv kernels against the profile (3 calls each), R = 1 (fitted) and 64 (predicted)."""
    out = []
    for var, (comp, kern) in PROFILED.items():
        for R in (1, 64):
            m = _kernel_ms(meas["profile"][(comp, R)], kern)
            p = 3 * old_kernel_ms(geo, fitted, var, R)
            out.append({"kernel": var, "R": R, "measured_ms": m, "predicted_ms": p, "ratio": p / m,
                        "blocks_per_sm": occupancy(*OLD_BINARIES[var])})
    return out
