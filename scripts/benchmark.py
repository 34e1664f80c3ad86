"""``flashschnet-benchmark``: time the network backends side by side, and the OpenMM throughput.

    flashschnet-benchmark [--pdb PDB] [--model MODEL] [--replicas 1,8,64] [--backends reference,torch]
                          [--device cpu|cuda] [--dtype float32|float64] [--repeats 5] [--warmup 2]
                          [--openmm-steps 20] [--openmm-replicas 8] [--threads T] [--max-memory-gb 16]
                          [--quantize none,fp16,bf16] [--out benchmark.json]

Every configuration (backend, 16-bit weight variant, R) runs in a fresh subprocess, so its peak memory is its
own: the model is loaded with that backend (and quantized as ``--quantize`` says, see
:mod:`flashschnet.nn.quant`), the structure is replicated R times with small random displacements (0.1 A,
fixed seed), ``model.energy_forces`` is called ``--warmup`` times and then timed ``--repeats`` times.

* time: ``time.perf_counter`` around each call (CUDA: synchronised before and after); median and min ms.
* peak memory, CPU: ``ru_maxrss`` after the timed calls minus the RSS (``/proc/self/statm``) right before
  the first call; the kernel's RSS high-water mark is reset first (``/proc/self/clear_refs``) where
  allowed, so that the peak of loading does not count. CUDA: ``max_memory_allocated`` minus the memory
  allocated before the first call, after ``reset_peak_memory_stats``.
* ns/day at a 4 fs time step: per replica ``4e-6 ns * 86400 s / (s per call)``, aggregate ``R *`` that.
* a configuration predicted (linearly in R, from the same backend measured at a smaller R in this run) to
  exceed ``--max-memory-gb`` is skipped and reported as such; predictions are never shown as measurements.
  One with no smaller measurement is skipped when even a lower bound of its memory
  (:data:`flashschnet.limits.MIN_BYTES_PER_BEAD` per bead) exceeds the memory available, so a huge R cannot
  take the machine down.

Ratios (speed-up vs reference, memory as % of reference) are given only for R where the unquantized reference
and the other configuration were both measured in this invocation. ``weights KB`` is the size of the model's
parameters and buffers (what 16-bit storage shrinks). The OpenMM run packs ``--openmm-replicas`` replicas in
one System (network only, no priors) and times ``Simulation.step`` on the CPU platform (CUDA with
``--device cuda``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ._cli import THREADS, check_output_file, cpu_model, float_type, int_type, name_list

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDB = "examples/4PTI_bpti.pdb"
DEFAULT_MODEL = "tests/data/oracles/mlcg_schnet_A.pt"
TIMESTEP_NS = 4e-6  # 4 fs
SECONDS_PER_DAY = 86400.0
DISPLACEMENT_A = 0.1
SEED = 1234


def _log(msg: str) -> None:
    print(f"[flashschnet-benchmark] {msg}", file=sys.stderr, flush=True)


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover
        return False


def _resolve_path(p: str) -> Path:
    """An existing file: as given (absolute or relative to the cwd), else relative to the repo root."""
    from flashschnet.errors import InputError

    path = Path(p).expanduser()
    if p and (path.is_absolute() or path.exists()):
        path = path.resolve()
    elif p and (REPO_ROOT / p).exists():
        path = (REPO_ROOT / p).resolve()
    else:
        raise InputError(f"file not found: {p!r} (looked in {Path.cwd()} and {REPO_ROOT})")
    if not path.is_file():
        raise InputError(f"{path}: not a file" if path.exists() else f"{path}: file not found")
    return path


def _int_list(text: str) -> List[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _name_list(text: str) -> List[str]:
    return name_list(text, ("reference", "torch", "triton"), "backends")


_VARIANTS = ("none", "fp16", "bf16", "fp16-cast", "bf16-cast")   # flashschnet.nn.quant.VARIANTS (a test checks)


def _variant_list(text: str) -> List[str]:
    return name_list(text, _VARIANTS, "quantize variants")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="flashschnet-benchmark",
        description="Benchmark the CGSchNet backends (energy+forces per call, peak memory, ns/day) side by side, "
                    "each configuration in a fresh subprocess, and the packed-replica OpenMM throughput. "
                    "Prints a table and writes a JSON file.",
    )
    p.add_argument("--pdb", default=DEFAULT_PDB, help=f"all-atom structure to map to CG beads (default {DEFAULT_PDB})")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model file, relative to the cwd or the repo root (default {DEFAULT_MODEL})")
    p.add_argument("--replicas", type=_int_list, default=None,
                   help="comma-separated replica counts R (default 1,8,64; 1,8,64,128 on CUDA)")
    p.add_argument("--backends", type=_name_list, default=None,
                   help="comma-separated backends (default reference,torch on CPU; reference,torch,triton on CUDA)")
    p.add_argument("--quantize", type=_variant_list, default=None,
                   help="comma-separated 16-bit weight variants to run with every backend: none, fp16, bf16, "
                        "fp16-cast, bf16-cast (default none)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default cuda if available, else cpu")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="network dtype (default float32)")
    p.add_argument("--repeats", type=int_type(1), default=5, help="timed calls per configuration (default 5)")
    p.add_argument("--warmup", type=int_type(0), default=2, help="untimed calls (and OpenMM steps) first (default 2)")
    p.add_argument("--openmm-steps", type=int_type(0), default=20,
                   help="timed OpenMM steps per backend; 0 disables (default 20)")
    p.add_argument("--openmm-replicas", type=int_type(1), default=8,
                   help="replicas packed in the OpenMM System (default 8)")
    p.add_argument("--openmm-force", choices=["torch", "python"], default="torch",
                   help="network force in the OpenMM run: torch (openmm-torch TorchForce, default) or python "
                        "(openmm.PythonForce: no openmm-torch needed)")
    p.add_argument("--threads", type=THREADS, default=None, help="torch CPU threads (default: torch's default)")
    p.add_argument("--max-memory-gb", type=float_type(0.0, low_open=True, allow_inf=True), default=16.0,
                   help="skip a configuration predicted to need more peak extra memory than this (default 16; a "
                        "configuration not measured at a smaller R is predicted from a lower bound per bead)")
    p.add_argument("--out", default="benchmark.json", help="JSON output path (default benchmark.json)")
    # internal: run one configuration in this (fresh) process and print its JSON on the last stdout line
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    return p


# ----------------------------------------------------------------------------------------------- workers
def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        resident_pages = int(fh.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def _maxrss_bytes() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _reset_hwm() -> bool:
    """Reset the kernel's RSS high-water mark (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _setup_torch(cfg: Dict[str, Any]):
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    return torch


def _positions(torch, mol, replicas: int, dtype, device):
    g = torch.Generator().manual_seed(SEED)
    base = torch.as_tensor(mol.positions, dtype=torch.float64)
    pos = base.unsqueeze(0).repeat(replicas, 1, 1)
    pos = pos + DISPLACEMENT_A * torch.randn(pos.shape, generator=g, dtype=torch.float64)
    return pos.to(dtype=dtype, device=device).contiguous()


def _load(flashschnet, cfg: Dict[str, Any], dtype, device):
    from flashschnet.nn.quant import apply_variant

    model = flashschnet.load_model(cfg["model"], backend=cfg["backend"], dtype=dtype, device=device)
    return apply_variant(model, cfg.get("quantize", "none"))


def _weights_kb(model) -> float:
    return sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1024.0


def _worker_energy_forces(cfg: Dict[str, Any]) -> Dict[str, Any]:
    torch = _setup_torch(cfg)
    import flashschnet

    device, R = cfg["device"], int(cfg["replicas"])
    dtype = getattr(torch, cfg["dtype"])
    cuda = device.startswith("cuda")
    model = _load(flashschnet, cfg, dtype, device)
    mol = flashschnet.map_pdb(cfg["pdb"])
    pos = _positions(torch, mol, R, dtype, device)
    types = torch.as_tensor(mol.bead_types, dtype=torch.long, device=device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
        mem_before = torch.cuda.memory_allocated()
        hwm_reset = True
    else:
        hwm_reset = _reset_hwm()
        mem_before = _rss_bytes()
    maxrss_before = None if cuda else _maxrss_bytes()

    energy = None
    for _ in range(int(cfg["warmup"])):
        energy, forces = model.energy_forces(pos, types)
        sync()
    times = []
    for _ in range(int(cfg["repeats"])):
        sync()
        t0 = time.perf_counter()
        energy, forces = model.energy_forces(pos, types)
        sync()
        times.append(time.perf_counter() - t0)
    if cuda:
        peak_extra = torch.cuda.max_memory_allocated() - mem_before
    else:
        peak_extra = _maxrss_bytes() - mem_before
    finite = bool(torch.isfinite(energy).all()) and bool(torch.isfinite(forces).all())
    med = statistics.median(times)
    per_replica = TIMESTEP_NS * SECONDS_PER_DAY / med
    return {
        "n_beads": int(mol.n_beads),
        "weights_kb": _weights_kb(model),
        "times_ms": [t * 1e3 for t in times],
        "median_ms": med * 1e3,
        "min_ms": min(times) * 1e3,
        "ns_per_day_per_replica": per_replica,
        "ns_per_day_aggregate": per_replica * R,
        "peak_extra_mb": peak_extra / 2**20,
        "memory_before_mb": mem_before / 2**20,
        "memory_method": ("cuda max_memory_allocated - memory_allocated before" if cuda else
                          "ru_maxrss after - RSS (statm) before first call"
                          + (", high-water mark reset before" if hwm_reset else
                             f", high-water mark NOT reset (ru_maxrss before: {maxrss_before / 2**20:.0f} MB)")),
        "outputs_finite": finite,
    }


def _worker_openmm(cfg: Dict[str, Any]) -> Dict[str, Any]:
    torch = _setup_torch(cfg)
    import flashschnet
    import openmm
    import openmm.app
    from openmm import unit

    from flashschnet.openmm import build_system, cg_topology, replica_positions_nm

    device, R = cfg["device"], int(cfg["replicas"])
    dtype = getattr(torch, cfg["dtype"])
    model = _load(flashschnet, cfg, dtype, device)
    mol = flashschnet.map_pdb(cfg["pdb"])
    system = build_system(mol, model, replicas=R, priors=None, network_force=cfg.get("network_force", "torch"))
    integrator = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond, 4 * unit.femtosecond)
    integrator.setRandomNumberSeed(SEED)
    name = "CUDA" if device.startswith("cuda") else "CPU"
    plat = openmm.Platform.getPlatformByName(name)
    props = {"Threads": str(cfg["threads"])} if name == "CPU" else {}
    sim = openmm.app.Simulation(cg_topology(mol, R), system, integrator, plat, props)
    sim.context.setPositions(replica_positions_nm(mol, R))
    sim.context.setVelocitiesToTemperature(300 * unit.kelvin, SEED)

    def finish():  # make sure queued work is done (asynchronous platforms)
        return sim.context.getState(getPositions=True)

    warm = max(1, int(cfg["warmup"]))
    sim.step(warm)
    finish()
    n = int(cfg["steps"])
    t0 = time.perf_counter()
    sim.step(n)
    state = finish()
    wall = time.perf_counter() - t0
    import numpy as np

    finite = bool(np.isfinite(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)).all())
    ms_step = wall * 1e3 / n
    per_replica = TIMESTEP_NS * SECONDS_PER_DAY / (wall / n)
    return {
        "platform": name,
        "warmup_steps": warm,
        "seconds": wall,
        "ms_per_step": ms_step,
        "ns_per_day_per_replica": per_replica,
        "ns_per_day_aggregate": per_replica * R,
        "positions_finite": finite,
    }


def _worker_main(cfg_json: str) -> int:
    cfg = json.loads(cfg_json)
    try:
        if cfg["kind"] == "energy_forces":
            out = _worker_energy_forces(cfg)
        else:
            out = _worker_openmm(cfg)
        out["status"] = "ok"
    except Exception as exc:  # reported in the table, not a crash of the whole benchmark
        out = {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    print("BENCHMARK_RESULT " + json.dumps(out), flush=True)
    return 0


def _run_worker(cfg: Dict[str, Any]) -> Dict[str, Any]:
    cmd = [sys.executable, "-m", "flashschnet.scripts.benchmark", "--_worker", json.dumps(cfg)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(cfg["threads"]))
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("BENCHMARK_RESULT "):
            out = json.loads(line[len("BENCHMARK_RESULT "):])
            break
    else:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        why = "killed (out of memory?)" if res.returncode in (-9, 137) else f"exit status {res.returncode}"
        out = {"status": "error", "error": f"worker {why}: {tail[0][:300]}"}
    out["subprocess_wall_s"] = wall
    return out


# ------------------------------------------------------------------------------------------- machine info
def machine_info(device: str, threads: int) -> Dict[str, Any]:
    import torch

    info: Dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": _platform.python_version(),
        "torch_version": torch.__version__,
        "threads": threads,
        "device": device,
        "device_name": cpu_model() if device == "cpu" else torch.cuda.get_device_name(0),
        "platform": _platform.platform(),
    }
    try:
        with open("/proc/meminfo") as fh:
            info["memory_gb"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import openmm

        info["openmm_version"] = openmm.version.version
    except Exception:
        info["openmm_version"] = None
    return info


# ------------------------------------------------------------------------------------------------ tables
def _fmt(x: Optional[float], spec: str) -> str:
    return "-" if x is None else format(x, spec)


def label(backend: str, quantize: str = "none") -> str:
    """A configuration's name in tables and ratios: the backend, with ``+VARIANT`` for 16-bit weights."""
    return backend if quantize in (None, "none") else f"{backend}+{quantize}"


def _label(r: Dict[str, Any]) -> str:
    return label(r["backend"], r.get("quantize", "none"))


def compute_ratios(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    ok = {(_label(r), r["replicas"]): r for r in results if r["status"] == "ok"}
    ratios = []
    for (name, R), r in sorted(ok.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ref = ok.get(("reference", R))
        if name == "reference" or ref is None:
            continue
        mem_pct = (100.0 * r["peak_extra_mb"] / ref["peak_extra_mb"]) if ref["peak_extra_mb"] > 0 else None
        ratios.append({
            "backend": r["backend"], "quantize": r.get("quantize", "none"), "label": name, "replicas": R,
            "speedup_vs_reference": ref["median_ms"] / r["median_ms"],
            "memory_pct_of_reference": mem_pct,
        })
    return ratios


def format_table(report: Dict[str, Any]) -> str:
    ratio = {(q.get("label", q["backend"]), q["replicas"]): q for q in report["ratios"]}
    head = ["backend", "R", "median ms", "min ms", "ns/day/rep", "ns/day aggr", "peak extra MB", "weights KB",
            "speed-up vs ref", "mem % of ref"]
    rows = []
    for r in report["results"]:
        name = _label(r)
        if r["status"] != "ok":
            rows.append([name, str(r["replicas"]), f"{r['status']}: {r.get('reason') or r.get('error')}"])
            continue
        q = ratio.get((name, r["replicas"]))
        rows.append([
            name, str(r["replicas"]), _fmt(r["median_ms"], ".1f"), _fmt(r["min_ms"], ".1f"),
            _fmt(r["ns_per_day_per_replica"], ".4g"), _fmt(r["ns_per_day_aggregate"], ".4g"),
            _fmt(r["peak_extra_mb"], ".1f"), _fmt(r.get("weights_kb"), ".1f"),
            ("1.00x" if name == "reference" else
             (f"{q['speedup_vs_reference']:.2f}x" if q else "-")),
            ("100%" if name == "reference" else
             (_fmt(q["memory_pct_of_reference"], ".1f") + "%" if q and q["memory_pct_of_reference"] is not None
              else "-")),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows if len(row) > 3)) if any(len(row) > 3 for row in rows)
              else len(h) for i, h in enumerate(head)]
    lines = []
    m, s = report["machine"], report["settings"]
    lines.append(f"flashschnet-benchmark: {s['pdb_name']} ({s['n_beads']} beads), device {m['device']} "
                 f"({m['device_name']}), dtype {s['dtype']}, threads {m['threads']}, "
                 f"repeats {s['repeats']}, warmup {s['warmup']}")
    lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        if len(row) == 3:
            lines.append("  ".join(c.rjust(w) for c, w in zip(row[:2], widths[:2])) + "  " + row[2])
        else:
            lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    if report["openmm"]:
        lines.append("")
        lines.append("OpenMM (packed replicas, network only, LangevinMiddle 4 fs):")
        lines.append(f"{'backend':>14}  {'platform':>8}  {'R':>3}  {'steps':>5}  {'ms/step':>10}  "
                     f"{'ns/day/rep':>10}  {'ns/day aggr':>11}")
        for o in report["openmm"]:
            if o["status"] != "ok":
                lines.append(f"{_label(o):>14}  {o.get('platform', '-'):>8}  {o['replicas']:>3}  {o['steps']:>5}  "
                             f"{o['status']}: {o.get('error')}")
            else:
                lines.append(f"{_label(o):>14}  {o['platform']:>8}  {o['replicas']:>3}  {o['steps']:>5}  "
                             f"{o['ms_per_step']:>10.1f}  {o['ns_per_day_per_replica']:>10.4g}  "
                             f"{o['ns_per_day_aggregate']:>11.4g}")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------- main
def _predict_mb(results: List[Dict[str, Any]], name: str, R: int, strict: bool = True) -> Optional[Dict[str, Any]]:
    """Peak extra memory of configuration ``name`` (see :func:`label`) at R, predicted linearly in R from the
    largest smaller R measured (``strict=False``: smaller or equal)."""
    done = [r for r in results if _label(r) == name and r["status"] == "ok"
            and (r["replicas"] < R if strict else r["replicas"] <= R)]
    if not done:
        return None
    base = max(done, key=lambda r: r["replicas"])
    return {"predicted_mb": base["peak_extra_mb"] * R / base["replicas"], "from_replicas": base["replicas"]}


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args._worker is not None:
        return _worker_main(args._worker)

    import torch  # noqa: F401  (torch before openmm)

    from flashschnet.errors import FlashSchNetError

    try:
        return _benchmark(args, argv)
    except FlashSchNetError as exc:      # bad input: one line, status 2, no JSON written
        print(f"flashschnet-benchmark: error: {exc}", file=sys.stderr, flush=True)
        return 2


def _benchmark(args, argv) -> int:
    import torch

    from flashschnet.errors import InputError
    from flashschnet.limits import MIN_BYTES_PER_BEAD, available_memory_bytes

    cuda = _cuda_available()
    device = args.device or ("cuda" if cuda else "cpu")
    if device == "cuda" and not cuda:
        raise InputError("--device cuda but CUDA is not available; use --device cpu")
    replicas = sorted(set(args.replicas or ([1, 8, 64, 128] if device == "cuda" else [1, 8, 64])))
    backends = args.backends or (["reference", "torch", "triton"] if device == "cuda" else ["reference", "torch"])
    quantize = args.quantize or ["none"]
    check_output_file(args.out, "--out")
    threads = args.threads if args.threads is not None else torch.get_num_threads()
    torch.set_num_threads(threads)
    pdb, model = _resolve_path(args.pdb), _resolve_path(args.model)

    import flashschnet

    n_beads = int(flashschnet.map_pdb(str(pdb)).n_beads)
    flashschnet.load_model(str(model))          # a bad model file: one error now, not one per worker
    limit_mb = args.max_memory_gb * 1024.0
    free = available_memory_bytes()
    free_mb = free / 2**20 if free is not None else float("inf")

    def _lower_bound(R: int) -> Dict[str, Any]:
        """Not measured at a smaller R: a lower bound of the memory R replicas need (skipped when even that
        exceeds the memory available, so a huge R cannot take the machine down)."""
        return {"predicted_mb": R * n_beads * MIN_BYTES_PER_BEAD / 2**20, "from_replicas": None}
    settings = {
        "pdb": str(pdb), "pdb_name": pdb.name, "n_beads": n_beads, "model": str(model),
        "replicas": replicas, "backends": backends, "quantize": quantize, "device": device, "dtype": args.dtype,
        "repeats": args.repeats, "warmup": args.warmup, "openmm_steps": args.openmm_steps,
        "openmm_replicas": args.openmm_replicas, "openmm_force": args.openmm_force, "threads": threads, "max_memory_gb": args.max_memory_gb,
        "timestep_fs": 4.0, "displacement_angstrom": DISPLACEMENT_A, "seed": SEED,
        "command": "flashschnet-benchmark " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    base_cfg = {"pdb": str(pdb), "model": str(model), "device": device, "dtype": args.dtype, "threads": threads}
    report: Dict[str, Any] = {"machine": machine_info(device, threads), "settings": settings,
                              "results": [], "ratios": [], "openmm": []}
    t_start = time.perf_counter()

    configs = [(b, q) for q in quantize for b in backends]
    for R in replicas:
        for backend, quant in configs:
            name = label(backend, quant)
            entry: Dict[str, Any] = {"backend": backend, "quantize": quant, "replicas": R}
            if backend == "triton" and device != "cuda":
                entry.update(status="skipped", reason="triton needs CUDA (the CPU interpreter is not benchmarked)")
                report["results"].append(entry)
                _log(f"{name:>14} R={R:<4} skipped (no CUDA)")
                continue
            pred = _predict_mb(report["results"], name, R) or _lower_bound(R)
            if pred["predicted_mb"] > (limit_mb if pred["from_replicas"] else free_mb):
                entry.update(status="skipped", predicted_peak_extra_mb=pred["predicted_mb"],
                             predicted_from_replicas=pred["from_replicas"],
                             reason=(f"predicted {pred['predicted_mb'] / 1024:.1f} GB > limit "
                                     f"{args.max_memory_gb:g} GB (linear in R from R={pred['from_replicas']})"
                                     if pred["from_replicas"] else
                                     f"predicted at least {pred['predicted_mb'] / 1024:.3g} GB (lower bound, "
                                     f"{MIN_BYTES_PER_BEAD // 1024} KiB per bead) > the {free_mb / 1024:.3g} GB "
                                     "available"))
                report["results"].append(entry)
                _log(f"{name:>14} R={R:<4} skipped: {entry['reason']}")
                continue
            _log(f"{name:>14} R={R:<4} running ({args.warmup} warm-up + {args.repeats} timed calls) ...")
            out = _run_worker(dict(base_cfg, kind="energy_forces", backend=backend, quantize=quant, replicas=R,
                                   warmup=args.warmup, repeats=args.repeats))
            entry.update(out)
            report["results"].append(entry)
            if entry["status"] == "ok":
                _log(f"{name:>14} R={R:<4} median {entry['median_ms']:.1f} ms/call, "
                     f"peak extra {entry['peak_extra_mb']:.0f} MB ({entry['subprocess_wall_s']:.0f} s)")
            else:
                _log(f"{name:>14} R={R:<4} {entry['status']}: {entry.get('error')}")
    report["ratios"] = compute_ratios(report["results"])

    if args.openmm_steps > 0:
        R = args.openmm_replicas
        for backend, quant in configs:
            name = label(backend, quant)
            entry = {"backend": backend, "quantize": quant, "replicas": R, "steps": args.openmm_steps,
                     "network_force": args.openmm_force}
            if backend == "triton" and device != "cuda":
                entry.update(status="skipped", error="triton needs CUDA")
                report["openmm"].append(entry)
                continue
            pred = _predict_mb(report["results"], name, R, strict=False) or _lower_bound(R)
            if pred["predicted_mb"] > (limit_mb if pred["from_replicas"] else free_mb):
                entry.update(status="skipped",
                             error=(f"predicted {pred['predicted_mb'] / 1024:.1f} GB > limit {args.max_memory_gb:g} GB"
                                    if pred["from_replicas"] else
                                    f"predicted at least {pred['predicted_mb'] / 1024:.3g} GB (lower bound) > the "
                                    f"{free_mb / 1024:.3g} GB available"))
                report["openmm"].append(entry)
                continue
            _log(f"{name:>14} OpenMM R={R} {args.openmm_steps} steps ...")
            out = _run_worker(dict(base_cfg, kind="openmm", backend=backend, quantize=quant, replicas=R,
                                   warmup=args.warmup, steps=args.openmm_steps, network_force=args.openmm_force))
            entry.update(out)
            report["openmm"].append(entry)
            if entry["status"] == "ok":
                _log(f"{name:>14} OpenMM R={R} {entry['ms_per_step']:.1f} ms/step")
            else:
                _log(f"{name:>14} OpenMM R={R} {entry['status']}: {entry.get('error')}")

    report["total_wall_s"] = time.perf_counter() - t_start
    out_path = Path(args.out)
    tmp = out_path.with_name(out_path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, out_path)                  # a JSON file in --out is always a complete report
    print(format_table(report))
    print(f"\nwrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
