"""``flashschnet-benchmark``: time the network backends side by side, and the OpenMM throughput.

    flashschnet-benchmark [--pdb PDB] [--model MODEL] [--replicas 1,8,64] [--backends reference,torch]
                          [--device cpu|cuda] [--dtype float32|float64] [--repeats 5] [--warmup 2]
                          [--openmm-steps 20] [--openmm-replicas 8] [--threads T] [--max-memory-gb 16]
                          [--quantize none,fp16,bf16] [--compress none,auto,float32,float16,bfloat16]
                          [--compress-knots N] [--out benchmark.json]

Without ``--pdb`` / ``--model`` it needs no checkout: BPTI ships as package data and the model is a CGSchNet
built in code with the hyper-parameters of mlcg's StandardSchNet oracle and seeded random weights (timing does
not depend on the weight values; see :mod:`flashschnet.openmm.benchmark.defaults`). ``--pdb`` / ``--model``
take your own files (paths relative to the current directory).

Every configuration (backend, filter tables, 16-bit weight variant, R) runs in a fresh subprocess
(``python -m flashschnet.openmm.benchmark.worker``), so its peak memory is its own; what is measured and how:
:mod:`flashschnet.openmm.benchmark.measure`. A configuration predicted (linearly in R, from the same
configuration measured at a smaller R in this run) to exceed ``--max-memory-gb`` is skipped and reported as
such; one with no smaller measurement is skipped when even a lower bound of its memory
(:data:`flashschnet.limits.MIN_BYTES_PER_BEAD` per bead) exceeds the memory available, so a huge R cannot take
the machine down. Ratios, the table and the JSON: :mod:`flashschnet.openmm.benchmark.report`.

Exit status: 0 done, 2 bad input (one line, no JSON written); 5, 6, 7 the JSON could not be written (5 no space
left, 6 not allowed to write, 7 another I/O error; one line naming the file; no partial JSON, no ``.tmp``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from flashschnet.atomic import check_not_an_input
from flashschnet.names import COMPRESSIONS, DEFAULT_KNOTS, MATMULS, NETWORK_FORCES, PRECISIONS, VARIANTS

from ._cli import (Parser, THREADS, backend_list, check_output_file, exit_statuses, float_type, int_type, name_list,
                   write_failure)

PROG = "flashschnet-benchmark"


def _log(msg: str) -> None:
    print(f"[{PROG}] {msg}", file=sys.stderr, flush=True)


def _int_list(text: str) -> List[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _variant_list(text: str) -> List[str]:
    return name_list(text, VARIANTS, "quantize variants")


def _compression_list(text: str) -> List[str]:
    return name_list(text, COMPRESSIONS, "compressions")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        epilog=exit_statuses(),
        description="Benchmark the CGSchNet backends (energy+forces per call, peak memory, ns/day) side by side, "
                    "each configuration in a fresh subprocess, and the packed-replica OpenMM throughput. "
                    "Prints a table and writes a JSON file.",
    )
    p.add_argument("--pdb", default=None,
                   help="all-atom structure to map to CG beads (default: BPTI, 4PTI_bpti.pdb, shipped with flashschnet)")
    p.add_argument("--model", default=None,
                   help="model file (default: a built-in CGSchNet with the hyper-parameters of mlcg's StandardSchNet "
                        "oracle, hidden 128, filters 128, 3 blocks, 50 RBF, 15 A, and seeded random weights; timing "
                        "does not depend on the weight values)")
    p.add_argument("--replicas", type=_int_list, default=None,
                   help="comma-separated replica counts R (default 1,8,64; 1,8,64,128 on CUDA)")
    p.add_argument("--backends", type=backend_list, default=None,
                   help="comma-separated backends (default reference,torch on CPU; reference,torch,triton on CUDA)")
    p.add_argument("--quantize", type=_variant_list, default=None,
                   help=f"comma-separated 16-bit weight variants to run with every backend: {', '.join(VARIANTS)} "
                        "(default none)")
    p.add_argument("--compress", type=_compression_list, default=None,
                   help=f"comma-separated filter-table dtypes to run with every backend and variant: "
                        f"{', '.join(COMPRESSIONS)} (each block's filter network replaced by a table of the pair "
                        "distance, labelled +tab-f32/+tab-f16/+tab-bf16; auto: what flashschnet-simulate runs by "
                        "default for each backend, float32 tables on torch and triton at float32, the exact "
                        "filters on the reference; default none,auto: the exact network and the default one; see "
                        "docs/compression.md)")
    p.add_argument("--compress-knots", type=int_type(4), default=None, metavar="N",
                   help=f"knots per filter table (only with a compression in --compress; default {DEFAULT_KNOTS})")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default cuda if available, else cpu")
    p.add_argument("--matmul", choices=list(MATMULS), default="auto",
                   help="precision of the triton backend's filter-network products (default auto: tf32 for float32 "
                        "weights, the weights' own type when quantized)")
    p.add_argument("--cuda-graph", action="store_true", help="replay each call of the fused backends on CUDA as a "
                                                             "CUDA graph")
    p.add_argument("--dtype", choices=list(PRECISIONS.values()), default="float32",
                   help="network dtype (default float32)")
    p.add_argument("--repeats", type=int_type(1), default=5, help="timed calls per configuration (default 5)")
    p.add_argument("--warmup", type=int_type(0), default=2, help="untimed calls (and OpenMM steps) first (default 2)")
    p.add_argument("--openmm-steps", type=int_type(0), default=20,
                   help="timed OpenMM steps per backend; 0 disables (default 20)")
    p.add_argument("--openmm-replicas", type=int_type(1), default=8,
                   help="replicas packed in the OpenMM System (default 8)")
    p.add_argument("--openmm-force", choices=NETWORK_FORCES, default="torch",
                   help="network force in the OpenMM run: torch (openmm-torch TorchForce, default) or python "
                        "(openmm.PythonForce: no openmm-torch needed)")
    p.add_argument("--threads", type=THREADS, default=None, help="torch CPU threads (default: torch's default)")
    p.add_argument("--max-memory-gb", type=float_type(0.0, low_open=True, allow_inf=True), default=16.0,
                   help="skip a configuration predicted to need more peak extra memory than this (default 16; a "
                        "configuration not measured at a smaller R is predicted from a lower bound per bead)")
    p.add_argument("--out", default="benchmark.json", help="JSON output path (default benchmark.json)")
    return p


def _input_file(text: str, option: str) -> Path:
    """An existing file named on the command line (absolute, or relative to the current directory)."""
    from flashschnet.errors import InputError

    path = Path(text).expanduser()
    if not text or not path.exists():
        raise InputError(f"{option} {text!r}: no such file (relative paths are taken from {Path.cwd()})")
    if not path.is_file():
        raise InputError(f"{option} {path}: not a file")
    return path.resolve()


def _run_worker(cfg: Dict[str, Any]) -> Dict[str, Any]:
    from flashschnet.openmm.benchmark.worker import run_worker

    return run_worker(cfg)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.errors import FlashSchNetError     # (flashschnet imports torch, before any openmm)

    try:
        if args.pdb is not None:
            return _benchmark(args, argv, _input_file(args.pdb, "--pdb"))
        from flashschnet.openmm.benchmark.defaults import default_pdb

        with default_pdb() as pdb:
            return _benchmark(args, argv, pdb)
    except OSError as exc:               # the JSON (or a temporary file) could not be written: one line, 5, 6 or 7
        status, line = write_failure(exc)
        print(f"{PROG}: error: {line}", file=sys.stderr, flush=True)
        return status
    except FlashSchNetError as exc:      # bad input: one line, status 2, no JSON written
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2


def _skip_reason(pred: Dict[str, Any], limit_gb: float, free_mb: float, per_bead: int) -> str:
    if pred["from_replicas"]:
        return (f"predicted {pred['predicted_mb'] / 1024:.1f} GB > limit {limit_gb:g} GB "
                f"(linear in R from R={pred['from_replicas']})")
    return (f"predicted at least {pred['predicted_mb'] / 1024:.3g} GB (lower bound, {per_bead // 1024} KiB per bead) "
            f"> the {free_mb / 1024:.3g} GB available")


def _benchmark(args, argv, pdb: Path) -> int:
    import torch

    import flashschnet
    from flashschnet.errors import InputError
    from flashschnet.limits import MIN_BYTES_PER_BEAD, available_memory_bytes
    from flashschnet.openmm.benchmark.defaults import DEFAULT_MODEL_LABEL
    from flashschnet.openmm.benchmark.machine import machine_info
    from flashschnet.openmm.benchmark.measure import DISPLACEMENT_A, SEED
    from flashschnet.openmm.benchmark.report import (compute_ratios, configurations, format_table, label, predict_mb,
                                                     write_json)
    from flashschnet.openmm.runner import flag
    from flashschnet.options import ModelOptions

    cuda = torch.cuda.is_available()
    device = args.device or ("cuda" if cuda else "cpu")
    if device == "cuda" and not cuda:
        raise InputError("--device cuda but CUDA is not available; use --device cpu")
    replicas = sorted(set(args.replicas or ([1, 8, 64, 128] if device == "cuda" else [1, 8, 64])))
    backends = args.backends or (["reference", "torch", "triton"] if device == "cuda" else ["reference", "torch"])
    quantize = args.quantize or ["none"]
    compress = args.compress or ["none", "auto"]
    precision = {dtype: name for name, dtype in PRECISIONS.items()}[args.dtype]
    configs = configurations(backends, compress, quantize, precision, args.matmul)
    tabulated = [c for _, c, _, _ in configs if c != "none"]
    ModelOptions(compress=tabulated[0] if tabulated else "none", compress_knots=args.compress_knots).validate(
        names={f: flag(f) for f in ("compress", "compress_knots")})
    knots = (args.compress_knots or DEFAULT_KNOTS) if tabulated else None
    check_output_file(args.out, "--out")
    check_not_an_input(args.out, "--out", [("--model", args.model), ("--pdb", args.pdb)])
    threads = args.threads if args.threads is not None else torch.get_num_threads()
    torch.set_num_threads(threads)
    model = _input_file(args.model, "--model") if args.model is not None else None

    n_beads = int(flashschnet.map_pdb(str(pdb)).n_beads)
    if model is not None:
        flashschnet.load_model(str(model))          # a bad model file: one error now, not one per worker
    limit_mb = args.max_memory_gb * 1024.0
    free = available_memory_bytes()
    free_mb = free / 2**20 if free is not None else float("inf")

    def prediction(name: str, R: int, strict: bool) -> Dict[str, Any]:
        """From a smaller R of this run, else a lower bound of the memory R replicas need (skipped when even
        that exceeds the memory available, so a huge R cannot take the machine down)."""
        return (predict_mb(report["results"], name, R, strict)
                or {"predicted_mb": R * n_beads * MIN_BYTES_PER_BEAD / 2**20, "from_replicas": None})

    def too_big(pred: Dict[str, Any]) -> bool:
        return pred["predicted_mb"] > (limit_mb if pred["from_replicas"] else free_mb)

    settings = {
        "pdb": str(pdb), "pdb_name": pdb.name, "n_beads": n_beads,
        "model": str(model) if model is not None else DEFAULT_MODEL_LABEL,
        "replicas": replicas, "backends": backends, "compress": compress, "compress_knots": knots,
        "default_rows": sorted({label(b, q, compress=c) for b, c, q, d in configs if d}),
        "quantize": quantize, "device": device, "dtype": args.dtype,
        "repeats": args.repeats, "warmup": args.warmup, "openmm_steps": args.openmm_steps,
        "openmm_replicas": args.openmm_replicas, "openmm_force": args.openmm_force, "threads": threads,
        "max_memory_gb": args.max_memory_gb, "timestep_fs": 4.0, "displacement_angstrom": DISPLACEMENT_A,
        "matmul": args.matmul, "cuda_graph": bool(args.cuda_graph),
        "seed": SEED, "command": f"{PROG} " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    base_cfg = {"pdb": str(pdb), "model": str(model) if model is not None else None, "device": device,
                "dtype": args.dtype, "threads": threads, "matmul": args.matmul, "cuda_graph": bool(args.cuda_graph)}
    report: Dict[str, Any] = {"machine": machine_info(device, threads), "settings": settings,
                              "results": [], "ratios": [], "openmm": []}
    t_start = time.perf_counter()

    def tables(comp: str) -> Dict[str, Any]:
        """A configuration's filter tables, as the JSON records them and the worker takes them."""
        return {"compress": comp, "compress_knots": knots if comp != "none" else None}

    for R in replicas:
        for backend, comp, quant, _ in configs:
            name = label(backend, quant, compress=comp)
            entry: Dict[str, Any] = {"backend": backend, **tables(comp), "quantize": quant, "replicas": R}
            if backend == "triton" and device != "cuda":
                entry.update(status="skipped", reason="triton needs CUDA (the CPU interpreter is not benchmarked)")
                report["results"].append(entry)
                _log(f"{name:>14} R={R:<4} skipped (no CUDA)")
                continue
            pred = prediction(name, R, strict=True)
            if too_big(pred):
                entry.update(status="skipped", predicted_peak_extra_mb=pred["predicted_mb"],
                             predicted_from_replicas=pred["from_replicas"],
                             reason=_skip_reason(pred, args.max_memory_gb, free_mb, MIN_BYTES_PER_BEAD))
                report["results"].append(entry)
                _log(f"{name:>14} R={R:<4} skipped: {entry['reason']}")
                continue
            _log(f"{name:>14} R={R:<4} running ({args.warmup} warm-up + {args.repeats} timed calls) ...")
            entry.update(_run_worker(dict(base_cfg, kind="energy_forces", backend=backend, **tables(comp),
                                          quantize=quant, replicas=R, warmup=args.warmup, repeats=args.repeats)))
            report["results"].append(entry)
            if entry["status"] == "ok":
                _log(f"{name:>14} R={R:<4} median {entry['median_ms']:.1f} ms/call, "
                     f"peak extra {entry['peak_extra_mb']:.0f} MB ({entry['subprocess_wall_s']:.0f} s)")
            else:
                _log(f"{name:>14} R={R:<4} {entry['status']}: {entry.get('error')}")
    report["ratios"] = compute_ratios(report["results"])

    if args.openmm_steps > 0:
        R = args.openmm_replicas
        for backend, comp, quant, _ in configs:
            name = label(backend, quant, compress=comp)
            entry = {"backend": backend, **tables(comp), "quantize": quant, "replicas": R, "steps": args.openmm_steps,
                     "network_force": args.openmm_force}
            if backend == "triton" and device != "cuda":
                entry.update(status="skipped", error="triton needs CUDA")
                report["openmm"].append(entry)
                continue
            pred = prediction(name, R, strict=False)
            if too_big(pred):
                entry.update(status="skipped",
                             error=(f"predicted {pred['predicted_mb'] / 1024:.1f} GB > limit {args.max_memory_gb:g} GB"
                                    if pred["from_replicas"] else
                                    f"predicted at least {pred['predicted_mb'] / 1024:.3g} GB (lower bound) > the "
                                    f"{free_mb / 1024:.3g} GB available"))
                report["openmm"].append(entry)
                continue
            _log(f"{name:>14} OpenMM R={R} {args.openmm_steps} steps ...")
            entry.update(_run_worker(dict(base_cfg, kind="openmm", backend=backend, **tables(comp), quantize=quant,
                                          replicas=R,
                                          warmup=args.warmup, steps=args.openmm_steps,
                                          network_force=args.openmm_force)))
            report["openmm"].append(entry)
            if entry["status"] == "ok":
                _log(f"{name:>14} OpenMM R={R} {entry['ms_per_step']:.1f} ms/step")
            else:
                _log(f"{name:>14} OpenMM R={R} {entry['status']}: {entry.get('error')}")

    report["total_wall_s"] = time.perf_counter() - t_start
    out_path = write_json(report, args.out)        # a JSON file in --out is always a complete report
    print(format_table(report))
    print(f"\nwrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
