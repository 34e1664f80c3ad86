"""Performance model of a triton-backend network call on one H200 (docs/benchmarks.md, "Performance model";
``python tools/device/perf_model.py`` prints it, writes docs/perf-model.json and the doc's section): the OLD kernels'
model calibrated on measured H200 data (:mod:`flashschnet.openmm.benchmark.perf_model_calibration`: the cost
primitives, the fit, the calibration table), then the NEW kernels predicted with the same constants.

New kernels: a fused step's ``1 + 4 x blocks`` launches -- the flag kernel, per block the CFConv forward and node
forward kernels, per block (last to first) the CFConv backward and node backward kernels -- each a persistent
grid of ``ctas_per_sm x 132`` programs (:data:`~flashschnet.fused.launches.KERNEL_CONFIGS`: also ``JB`` and the
warps), program ``p`` summing the work of items ``p, p+G, ...`` (:func:`persistent_s`), ``k`` resident programs
per SM each taking max(its chain alone, k x the busiest pipe) per item; a kernel = its slowest program, at least
its aggregate L2 / HBM bytes, plus one launch (the calibrated ``t_launch``). The calibrated ``lambda`` applies to
every chain link; the latency-free bound (``lambda = 0``, pipes at datasheet rates) is reported next to each
prediction. Assumptions (not calibrated):

* a table program keeps one channel group, whose slice (256 knots x 3 x 32 float32 = 96 KB) stays in its SM's L1
  (256 KB per SM on H100/H200): table gathers are L1 traffic (the old kernels' came from L2); masked pairs
  (beyond the cutoff) load nothing but execute their FMAs;
* links counted by the old kernels' rule (:func:`~flashschnet.openmm.benchmark.perf_model_calibration.
  old_iteration`): table forward chunk 2 (gathers -> row and column reductions: the chunk's positions and feature
  rows were loaded one chunk ahead), backward 3 (+ the channel sum of ``G dW``), and 3 per item (the work-list
  entry, tile I, the first chunk's loads); exact forward 5 (positions, the basis and each half's activations into
  operands, reductions), backward 6 (+ the channel sums), 2 more per item (the work-list entry, then tile I); FLOPs per
  pair-channel as the old kernels' (tables ~8 forward, ~16 backward); exact products on ``mma.sync`` at the
  datasheet dense peak, both weight operands read from shared memory per product;
* node kernels: a dense layer ``[16, K] x [K, N]`` is ``N/32`` output blocks of ``K/32`` dependent steps of 2
  links (a row slice and a 32 x 32 weight block loaded, then converted into FMA-product operands through shared
  memory; no pipelining with ``num_stages=1``), +1 link for an epilogue load, +1 barrier; weights re-read from
  L2 per tile; a partial sum is 2 links (flags, then the loads) per 4 source tiles and 32-channel block;
* partial buffers larger than L2 (50 MB) go through HBM; the flag kernel rebuilds every ~20 steps.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .perf_model_calibration import (B, CLOCK, F, HBM_BPS, KP, L1_BPC, L2_BPS, L2_BYTES, L2_PORT_BPC, LANES, NC, Q,
                                     REBUILD_EVERY, ROOT, SMS, STEP_FS, TC_PER_CLK, FP32_GEMM_PEAK, active_tile_pairs,
                                     alone, bpti, calibration, cycles, fit, kernel_checks, measurements, structure,
                                     vec)

__all__ = ["active_tile_pairs", "new_step", "model", "render", "update_doc", "MARKERS", "FILTERS", "JSON_FIELDS",
           "LYSOZYME"]

MARKERS = ("<!-- perf-model:begin -->", "<!-- perf-model:end -->")
FILTERS = ("float32 tables", "tf32 exact", "bf16 exact")
#: the lysozyme structure of the predictions: ../shared/structures (beside the checkout), else the tests' copy
LYSOZYME = next((p for p in (ROOT.parent / "shared" / "structures" / "1HEL_lysozyme.pdb",
                             ROOT / "tests" / "data" / "structures" / "1HEL_lysozyme.pdb") if p.exists()),
                ROOT.parent / "shared" / "structures" / "1HEL_lysozyme.pdb")
#: the fields of :func:`model`'s result (docs/perf-model.json): ``device``; ``structures`` (name, N, T, slots,
#: active_pairs, unmasked_fraction); ``fitted`` (c_iter cycles per variant, lambda and lambda_per_variant in
#: cycles, t_launch s, eta_gemm, n_launch_old); ``datasheet`` (the assumed constants); ``calibration`` (config, R,
#: measured_ms, predicted_ms, ratio, within_15pct, in_sample); ``calibration_within_15pct``; ``kernel_checks``
#: (kernel, R, measured_ms, predicted_ms, ratio, blocks_per_sm); ``work_per_link`` (kernel, links,
#: pair_channels, pair_channels_per_link, programs_per_sm); ``new_kernels`` (per kernel num_warps, JB,
#: ctas_per_sm, binary_ctas_per_sm: :func:`occupancy_check`); ``predictions`` (structure, filter, R, ms, ns_day,
#: ms_latency_free, ns_day_latency_free, kernels_ms); ``goals`` (r1_ms, r1_goal_ms, r1_met, r64_ns_day,
#: r64_goal_ns_day, r64_met, and the latency-free bounds)
JSON_FIELDS = ("device", "structures", "fitted", "datasheet", "calibration", "calibration_within_15pct",
               "kernel_checks", "work_per_link", "new_kernels", "predictions", "goals")


def _config(kernel: str) -> Dict[str, Any]:
    from flashschnet.fused.launches import KERNEL_CONFIGS

    return dict(KERNEL_CONFIGS[kernel])


def table_items(geo, half: str) -> tuple:
    """A table kernel's items (pair x channel group of ``TABLE_GROUP`` channels, chunks of ``JB`` source beads):
    work vectors [P*NCG, 5], bytes written, config, groups, the program's prologue."""
    from flashschnet.fused.plans import TABLE_GROUP

    cfg = _config(f"_cfconv_table_{half}_kernel")
    FC, JB = TABLE_GROUP, int(cfg["JB"])
    NCG, chunks, E = F // FC, B // JB, B * JB * FC
    v, w = [], []
    for (I, J), u in zip(geo["pairs"], geo["unmasked"]):
        gat = E * 2 * Q * 4 * u
        # a chunk's source positions and feature rows are loaded one chunk ahead (the kernels' _source_chunk), so a
        # chunk's chain is its gathers, then its reductions (forward: 2 links; backward: + the channel sum of G dW);
        # the item's prologue is the work-list entry, tile I, and the first chunk's loads (3)
        if half == "fwd":
            item, out = vec(3 + 2 * chunks, chunks * E * 8, chunks * (gat + JB * FC * 4) + B * FC * 4), B * FC * 4
        else:
            item = vec(3 + 3 * chunks, chunks * E * 16, chunks * (gat + 2 * JB * FC * 4) + 2 * B * FC * 4)
            out = B * FC * 4 + B * 16
        v += [item] * NCG
        w += [out * (1 if I == J else 2)] * NCG
    return np.array(v), np.array(w, dtype=float), cfg, NCG, vec(2)


def exact_items(geo, half: str, dot: str) -> tuple:
    """An exact-filter kernel's items (``groups`` of its configuration, ``FC = 128 / groups`` channels; chunks of
    ``PB = 16 JB`` pairs: basis, the first layer on all channels, the second on the group's)."""
    cfg = _config(f"_cfconv_{half}_kernel")
    groups = int(cfg["groups"])
    FC, JB, wb = F // groups, int(cfg["JB"]), (4 if dot == "tf32" else 2)
    chunks, PB, prod = B // JB, B * JB, KP * F + F * FC
    if half == "fwd":
        ch = vec(5, PB * KP * 8 + PB * F * 7 + PB * FC * 4, prod * wb + JB * FC * 4, 0, 2 * PB * prod / TC_PER_CLK[dot])
        out = B * FC * 4
    else:
        ch = vec(6, PB * KP * 12 + PB * F * 10 + PB * FC * 8, 2 * prod * wb + (2 * JB + 2 * B) * FC * 4, 0,
                 4 * PB * prod / TC_PER_CLK[dot])
        out = B * FC * 4 + B * 16
    item = chunks * ch + vec(2, 0, B * FC * 4)
    v = [item for _ in geo["pairs"] for _ in range(groups)]
    w = [out * (1 if I == J else 2) for I, J in geo["pairs"] for _ in range(groups)]
    return np.array(v), np.array(w, dtype=float), cfg, groups, vec(2, 0, 0, prod * 4)


def _nc() -> int:
    """The node kernels' block width (``NC`` of their configuration; the calibration's 32 if absent)."""
    return int(_config("_node_fwd_kernel").get("NC", NC))


def _layer(K: int, N: int, epi: int) -> np.ndarray:
    """A node layer [16, K] x [K, N] (``epi``: 0 none, 1 tanh + bias, 2 residual, 3 gate, 4 add)."""
    nb, kb = max(1, N // _nc()), max(1, K // _nc())
    return vec(nb * (2 * kb + (epi > 0)) + 1, B * K * N + B * N * 4, 0,
               K * N * 4 + nb * B * K * 4 + B * N * 4 * (epi > 1))


def _reduce(geo, n_src: int, width: int, NP: int = 1) -> np.ndarray:
    """A destination tile's fixed-order sum of ``n_src`` partials of ``width`` (``NP`` per slot)."""
    return vec(2 * math.ceil(geo["T"] / 4) * max(1, width // _nc()) + 1, n_src * B * width * NP, 0,
               n_src * B * width * NP * 4)


def node_tiles(geo, kind: str, NP: int, widths=(128, 64)) -> np.ndarray:
    """Per destination tile [T, 5] of a node kernel: ``kind`` = fwd_mid, fwd_last (+ the output MLP 128 -> 128 ->
    64 -> 1, its backward and the last block's ``gm``), bwd_first, bwd_mid, bwd_last (forces only); ``NP``
    position partials per slot (the filter's channel groups)."""
    P0, P1 = widths
    rows = []
    for n in geo["n_src"]:
        if kind.startswith("fwd"):
            v = _reduce(geo, n, F) + _layer(F, F, 1) + _layer(F, F, 2)
            v = v + (_layer(F, F, 0) if kind == "fwd_mid" else
                     _layer(F, P0, 1) + _layer(P0, P1, 1) + vec(3, B * P1 * 3, 0, P1 * 4) + _layer(P1, P0, 3)
                     + _layer(P0, F, 0) + _layer(F, F, 3) + _layer(F, F, 0))
        else:
            v = _reduce(geo, n, 4, NP) + vec(0 if kind == "bwd_first" else 1)
            if kind != "bwd_last":
                v = v + _reduce(geo, n, F) + _layer(F, F, 4) + _layer(F, F, 3) + _layer(F, F, 0)
        rows.append(v)
    return np.array(rows)


def persistent_s(vecs: np.ndarray, R: int, ctas: int, lam: float, prologue: np.ndarray, groups: int = 1) -> float:
    """Seconds of a persistent kernel: ``G = ctas x SMS`` programs (at most the items, a multiple of ``groups``),
    ``k`` resident per SM; program ``p`` sums items ``p, p+G, ...`` (replica-major); the slowest program."""
    n = R * len(vecs)
    G = max(groups, min(ctas * SMS, n) // groups * groups)
    k = min(ctas, math.ceil(G / SMS))
    t = cycles(np.tile(vecs, (R, 1)), lam, k)
    prog = np.bincount(np.arange(n) % G, weights=t, minlength=G)
    return (float(prog.max()) + float(alone(prologue, lam))) / CLOCK


def _mem_s(l2_bytes: float, hbm_bytes: float) -> float:
    return max(l2_bytes / L2_BPS, hbm_bytes / HBM_BPS)


def new_step(geo, fitted, filt: str, R: int, lam: Optional[float] = None, blocks: int = 3) -> Dict[str, Any]:
    """The fused step's network time for ``R`` replicas of ``geo`` (``filt`` one of :data:`FILTERS`):
    ``{"ms", "kernels": {name: ms per step}}``; ``lam`` overrides the calibrated chain latency."""
    lam = fitted["lambda"] if lam is None else lam
    t_launch = fitted["t_launch"]
    hbm = R * geo["S"] * B * F * 4 * 2 > L2_BYTES          # the partial buffers (row + column) beyond L2
    ks: Dict[str, float] = {}
    flags = vec(2 + 6 / REBUILD_EVERY, 32 * B * 20, 0, geo["N"] * 3 * 4 * 3)      # a check; a build per 20 steps
    ks["flags"] = 1e3 * (math.ceil(R / (7 * SMS)) * float(cycles(flags, lam, min(7, math.ceil(R / SMS)))) / CLOCK
                         + t_launch)
    for half in ("fwd", "bwd"):
        v, w, cfg, groups, pro = (table_items(geo, half) if filt == FILTERS[0] else
                                  exact_items(geo, half, filt.split()[0]))
        prog = persistent_s(v, R, int(cfg["ctas_per_sm"]), lam, pro, groups)
        wr = R * float(w.sum())
        ks[f"cfconv_{half}"] = blocks * 1e3 * (max(prog, _mem_s(0 if hbm else wr, wr if hbm else 0)) + t_launch)
    seqs = {"node_fwd": ["fwd_mid"] * (blocks - 1) + ["fwd_last"],
            "node_bwd": ["bwd_first"] + ["bwd_mid"] * (blocks - 2) + ["bwd_last"]}
    for name, seq in seqs.items():
        ctas, tot = int(_config(f"_node_{name[5:]}_kernel")["ctas_per_sm"]), 0.0
        for kind in seq:
            tiles = node_tiles(geo, kind, groups)
            prog = persistent_s(tiles, R, ctas, lam, vec(0))
            l2 = R * float(tiles[:, 3].sum())
            part = R * sum(geo["n_src"]) * B * F * 4 * (kind != "bwd_last") if hbm else 0.0
            tot += max(prog, _mem_s(l2 - part, part)) + t_launch
        ks[name] = 1e3 * tot
    return {"ms": sum(ks.values()), "kernels": ks}


def work_per_link(geo) -> List[Dict[str, Any]]:
    """Per CFConv kernel, old (per source-bead iteration) and new (per item of an off-diagonal pair): chain links,
    pair-channels, pair-channels per link and resident programs per SM -- what a chain-bound kernel's speed
    follows."""
    from .perf_model_calibration import OLD_BINARIES, occupancy, old_iteration

    out = [{"kernel": f"old {v}", "links": float(old_iteration(v, 1.0)[0]), "pair_channels": B * F,
            "programs_per_sm": occupancy(*OLD_BINARIES[v])} for v in ("table_fwd", "table_bwd", "tf32_fwd", "tf32_bwd")]
    off = next(i for i, (I, J) in enumerate(geo["pairs"]) if I != J)
    for name, half, fn in (("table", "fwd", table_items), ("table", "bwd", table_items),
                           ("tf32", "fwd", exact_items), ("tf32", "bwd", exact_items)):
        v, _, cfg, groups, _ = fn(geo, half) if name == "table" else fn(geo, half, "tf32")
        out.append({"kernel": f"new {name}_{half} (JB = {cfg['JB']})", "links": float(v[off * groups][0]),
                    "pair_channels": B * B * F // groups, "programs_per_sm": int(cfg["ctas_per_sm"])})
    for r in out:
        r["pair_channels_per_link"] = r["pair_channels"] / r["links"]
    return out


#: the new kernels of a float32 step and their gpu_fit variants (default table path: quintic float32)
NEW_KERNELS = {"_cfconv_table_fwd_kernel": ("quintic-f32",), "_cfconv_table_bwd_kernel": ("quintic-f32",),
               "_cfconv_fwd_kernel": ("tf32", "bf16"), "_cfconv_bwd_kernel": ("tf32", "bf16"),
               "_node_fwd_kernel": ("middle", "last"), "_node_bwd_kernel": ("first", "middle", "last")}


def occupancy_check(root: Path = ROOT) -> Dict[str, Any]:
    """Per new kernel: its configuration (``KERNEL_CONFIGS``, what the model uses) and the fewest blocks per SM
    the compiled sm_90 binaries allow (docs/gpu-fit.json's rows of ``tools/device/gpu_fit.py``; None without them)."""
    import json

    rows = []
    path = root / "docs" / "gpu-fit.json"
    if path.exists():
        d = json.loads(path.read_text())
        rows += d if isinstance(d, list) else [r for run in d.get("runs", {}).values() for r in run.get("rows", [])]
    out = {}
    for k, variants in NEW_KERNELS.items():
        fit_ = [r["ctas_per_sm"] for r in rows if r.get("kernel") == k and r.get("variant") in variants
                and r.get("arch") == 90 and r.get("ctas_per_sm")]
        out[k] = {**{c: v for c, v in _config(k).items() if c in ("num_warps", "JB", "ctas_per_sm")},
                  "binary_ctas_per_sm": min(fit_) if fit_ else None}
    return out


def _ns_day(R: int, ms: float) -> float:
    return R * STEP_FS * 1e-6 * 86400 / (ms * 1e-3)


def model(lysozyme: Optional[str] = None, replicas=(1, 8, 64, 128, 256), root: Path = ROOT) -> Dict[str, Any]:
    """Everything the report shows: fitted constants, calibration, kernel checks, predictions (BPTI; lysozyme at
    R = 1 and 64 when ``lysozyme`` is an existing PDB path) and the goals check."""
    geo, meas = bpti(), measurements(root)
    fitted = fit(geo, meas)
    cal = calibration(geo, fitted, meas)
    structs = [(geo, replicas)]
    if lysozyme and Path(lysozyme).exists():
        lys = structure(lysozyme, "")
        lys["name"] = f"lysozyme 1HEL ({lys['N']} beads)"
        structs.append((lys, (1, 64)))
    pred = []
    for g, Rs in structs:
        for filt in FILTERS:
            for R in Rs:
                s, s0 = new_step(g, fitted, filt, R), new_step(g, fitted, filt, R, lam=0.0)
                pred.append({"structure": g["name"], "filter": filt, "R": R, "ms": s["ms"],
                             "ns_day": _ns_day(R, s["ms"]), "ms_latency_free": s0["ms"],
                             "ns_day_latency_free": _ns_day(R, s0["ms"]), "kernels_ms": s["kernels"]})
    d = {p["R"]: p for p in pred if p["structure"] == geo["name"] and p["filter"] == FILTERS[0]}
    goals = {"r1_ms": d[1]["ms"], "r1_goal_ms": 0.3, "r1_met": d[1]["ms"] <= 0.3, "r64_ns_day": d[64]["ns_day"],
             "r64_goal_ns_day": 10000.0, "r64_met": d[64]["ns_day"] >= 10000.0,
             "r1_ms_latency_free": d[1]["ms_latency_free"], "r64_ns_day_latency_free": d[64]["ns_day_latency_free"]}
    return {"device": meas["device"],
            "structures": [{"name": g["name"], "N": g["N"], "T": g["T"], "slots": g["S"],
                            "active_pairs": len(g["pairs"]), "unmasked_fraction": g["u_mean"]} for g, _ in structs],
            "fitted": {k: v for k, v in fitted.items() if k not in ("rest_bytes", "rest_flops")},
            "datasheet": {"sms": SMS, "clock_hz": CLOCK, "fp32_lanes": LANES, "l1_bytes_per_clk": L1_BPC,
                          "l2_port_bytes_per_clk": L2_PORT_BPC, "l2_bytes_per_s": L2_BPS, "hbm_bytes_per_s": HBM_BPS,
                          "l2_bytes": L2_BYTES, "tensor_flop_per_clk": TC_PER_CLK,
                          "fp32_gemm_flop_per_s": FP32_GEMM_PEAK},
            "calibration": cal, "calibration_within_15pct": all(r["within_15pct"] for r in cal if r["in_sample"]),
            "kernel_checks": kernel_checks(geo, fitted, meas), "work_per_link": work_per_link(geo),
            "new_kernels": occupancy_check(root), "predictions": pred, "goals": goals}


def render(m: Dict[str, Any]) -> str:
    """The doc section (Markdown, heading ``## Performance model``) of a :func:`model` result (or its JSON)."""
    f, g = m["fitted"], m["goals"]
    lam_us = f["lambda"] / m["datasheet"]["clock_hz"] * 1e6
    out = ["## Performance model", "",
           "`python tools/device/perf_model.py --json docs/perf-model.json --update-doc` (the model: "
           "`flashschnet.openmm.benchmark.perf_model` and `perf_model_calibration`, whose docstrings state every "
           f"constant and assumption). Calibrated on the old kernels' measurements ({m['device']}: "
           "docs/device-h200.json, docs/gpu-kernel-profile.json), then used to predict the new kernels.", "",
           "Calibration (old kernels, network call, ms): R = 1 of tables and tf32 share their kernel time with the "
           "fit; every other number is a prediction of the fitted model.", "",
           "| configuration | R | measured | predicted | ratio | within 15 % |", "|---|---:|---:|---:|---:|---|"]
    for r in m["calibration"]:
        tag = "" if r["in_sample"] else " (out of sample)"
        out.append(f"| {r['config']}{tag} | {r['R']} | {r['measured_ms']:.2f} | {r['predicted_ms']:.2f} | "
                   f"{r['ratio']:.3f} | {'yes' if r['within_15pct'] else 'no'} |")
    out += ["", "Old CFConv kernels against the profile (3 calls per step; R = 1 fitted, R = 64 predicted):", "",
            "| kernel | blocks/SM | R | measured ms | predicted ms | ratio |", "|---|---:|---:|---:|---:|---:|"]
    out += [f"| {r['kernel']} | {r['blocks_per_sm']} | {r['R']} | {r['measured_ms']:.2f} | {r['predicted_ms']:.2f} | "
            f"{r['ratio']:.3f} |" for r in m["kernel_checks"]]
    lv = ", ".join(f"{k} {v:.0f}" for k, v in f["lambda_per_variant"].items())
    out += ["", f"Fitted: chain link `lambda` = {f['lambda']:.0f} cycles ({lam_us:.2f} us; per variant: {lv}); "
            f"per launch `t_launch` = {f['t_launch'] * 1e6:.1f} us (old call: {f['n_launch_old']:.1f} launches); "
            f"node-level GEMMs at `eta_gemm` = {f['eta_gemm']:.2f} of 67 TFLOP/s; `c_iter` (cycles per source bead): "
            + ", ".join(f"{k} {v:.0f}" for k, v in f["c_iter"].items()) + " (bf16: derived, not fitted). "
            "Assumed (datasheet): 132 SMs at 1.98 GHz, 128 FP32 lanes and 128 B/clk of L1 per SM, 64 B/clk per "
            "SM from L2, L2 5.5 TB/s and 50 MB, HBM 4.8 TB/s, dense tensor cores 2048 (tf32) / 4096 (bf16) "
            "FLOP/clk/SM, pipes at full rate.", "",
            "New kernels' configuration (`KERNEL_CONFIGS` when generated; blocks per SM the sm_90 binaries allow): "
            + "; ".join(f"`{k.strip('_')}` {c['num_warps']} warps" + (f", JB {c['JB']}" if "JB" in c else "")
                        + f", {c['ctas_per_sm']} per SM ({c['binary_ctas_per_sm'] or '?'})"
                        for k, c in m["new_kernels"].items()) + ".", "",
            "Predictions, new kernels (network call per step; ns/day aggregate at 4 fs; the latency-free bound "
            "sets `lambda` = 0):", "",
            "| structure | filter | R | ms | ns/day | latency-free ms | latency-free ns/day |",
            "|---|---|---:|---:|---:|---:|---:|"]
    out += [f"| {p['structure']} | {p['filter']} | {p['R']} | {p['ms']:.3f} | {p['ns_day']:,.0f} | "
            f"{p['ms_latency_free']:.3f} | {p['ns_day_latency_free']:,.0f} |" for p in m["predictions"]]
    b = [p for p in m["predictions"] if p["filter"] == FILTERS[0] and p["structure"] == m["structures"][0]["name"]]
    out += ["", "Where the time goes (BPTI, float32 tables, ms per step): "
            + "; ".join(f"R = {p['R']}: " + ", ".join(f"{k} {v:.3f}" for k, v in p["kernels_ms"].items()) for p in b)
            + ".", "", "Chain links against work (old: one source-bead iteration; new: one item of an off-diagonal "
            "tile pair, its channel group):", "",
            "| kernel | links | pair-channels | pair-channels per link | programs per SM |",
            "|---|---:|---:|---:|---:|"]
    out += [f"| {r['kernel']} | {r['links']:.0f} | {r['pair_channels']:,} | {r['pair_channels_per_link']:.0f} | "
            f"{r['programs_per_sm']} |" for r in m["work_per_link"]]
    out += ["", _reading(m), "", "Goals (issue):", ""] + _goal_lines(g)
    return "\n".join(out) + "\n"


def _reading(m: Dict[str, Any]) -> str:
    """The section's reading of the numbers (all of them from ``m``)."""
    f, name = m["fitted"], m["structures"][0]["name"]
    r64 = {p["filter"]: p for p in m["predictions"] if p["R"] == 64 and p["structure"] == name}
    old64 = {r["config"]: r["measured_ms"] for r in m["calibration"] if r["R"] == 64}
    k64 = [r for r in m["kernel_checks"] if r["R"] == 64]
    one = max(abs(r["ratio"] - 1) for r in k64 if r["blocks_per_sm"] == 1)
    co = [r for r in k64 if r["blocks_per_sm"] > 1]
    lv = f["lambda_per_variant"].values()
    new = [r for r in m["work_per_link"] if r["kernel"].startswith("new")]
    worst = min(new, key=lambda r: r["pair_channels_per_link"])
    old = {r["kernel"][4:]: r for r in m["work_per_link"] if r["kernel"].startswith("old")}
    ref = old[worst["kernel"].split()[1]]
    r1 = next(p for p in m["predictions"] if p["R"] == 1 and p["structure"] == name and p["filter"] == FILTERS[0])
    top = sorted(r1["kernels_ms"].items(), key=lambda kv: -kv[1])
    n_launch = 1 + 4 * 3

    def vs(filt):
        p, o = r64[filt], old64[filt]
        return f"{p['ms']:.1f} ms ({'slower' if p['ms'] > o else 'faster'} than the old kernels' measured {o:.1f})"
    text = (f"Reading. The old kernels' measurements fix what one dependent link costs in these Triton loops "
            f"({f['lambda']:.0f} cycles; the four variants' own values agree within {100 * (max(lv) / min(lv) - 1):.0f}"
            f" %) and show that their time follows the links: the R = 64 kernels of one program per SM are "
            f"predicted within {100 * one:.0f} %")
    text += "".join(f", the co-resident {r['kernel']} at {r['ratio']:.2f}" for r in co)
    return text + (
        ". With that cost per link the new kernels are chain-bound as well: a kernel's time follows its links per "
        "resident program, and the items that carry the fewest pair-channels per link set it -- "
        f"{worst['kernel']}: {worst['pair_channels_per_link']:.0f} per link, against "
        f"{ref['pair_channels_per_link']:.0f} in the old {ref['kernel'][4:]} iteration. BPTI, R = 64: tables "
        f"{vs(FILTERS[0])}, tf32 {vs(FILTERS[1])}. At R = 1 the largest shares are {top[0][0]} "
        f"({top[0][1]:.2f} ms) and {top[1][0]} ({top[1][1]:.2f} ms), the {n_launch} launches "
        f"{n_launch * f['t_launch'] * 1e3:.2f} ms of it. The latency-free bound (tables "
        f"{r64[FILTERS[0]]['ms_latency_free']:.2f} ms) is the same work with every link's latency hidden (pipes "
        "at datasheet rates). Which end holds depends on whether the new loops' links cost what the old ones did "
        "(their table gathers are L1 hits by assumption; the table kernels run with num_stages=2): the first GPU "
        "run of the new kernels decides. More pair-channels per link (larger JB, more resident programs, the next "
        "chunk's loads in flight) is what the calibrated model asks for.")


def _goal_lines(g: Dict[str, Any]) -> List[str]:
    ok = {True: "met", False: "not met"}
    return [f"- R = 1: {g['r1_ms']:.3f} ms per step for the network (goal: <= {g['r1_goal_ms']} ms per OpenMM "
            f"step): {ok[g['r1_met']]} by the calibrated model; latency-free bound {g['r1_ms_latency_free']:.3f} ms.",
            f"- R = 64: {g['r64_ns_day']:,.0f} ns/day aggregate (goal: >= {g['r64_goal_ns_day']:,.0f}): "
            f"{ok[g['r64_met']]} by the calibrated model; latency-free bound {g['r64_ns_day_latency_free']:,.0f}.",
            "- The model predicts the network call only; OpenMM's own per-step share (integrator, other forces, "
            "the TorchForce hand-off) is measured later on a GPU and adds to these times."]


def update_doc(text: str, section: str) -> str:
    """``text`` with the part between :data:`MARKERS` replaced by ``section``."""
    a, b = MARKERS
    i, j = text.index(a) + len(a), text.index(b)
    return text[:i] + "\n" + section + text[j:]
