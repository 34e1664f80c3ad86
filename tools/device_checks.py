"""Every number a lent GPU machine should give, in one command that ends well inside the device tool's limit.

    python tools/device_checks.py --device cuda --out "$OUT"          # on the device (tools/device_benchmark.sh)
    python tools/device_checks.py --device cpu --smoke --out /tmp/x   # the same stages at tiny sizes, on a CPU

Five stages, in this order, each in a fresh process (a hang, a crash or a broken CUDA context cannot take the
next stages down) and each with a deadline:

1. ``environment`` -- nvidia-smi, versions, the machine, OpenMM's platforms and plugin load failures, and
   whether the libraries the OpenMM CUDA plugin links to load;
2. ``compile`` -- first call (with Triton's JIT compile) and second call at 1 replica x 20 beads of the kernel
   backend (triton if selected) with float32, bf16 and fp16 weights (triton: also the tabulated-filter kernels,
   a model compressed by :func:`flashschnet.compress` with float32 / float16 / bfloat16 tables); float64 last,
   only if time is left;
3. ``correctness`` -- float32, every backend x {none, bf16, fp16} on the mlcg oracle ``mlcg_schnet_A.pt``:
   max relative errors (:func:`rel`) vs the oracle and vs the backends before it; three calls bitwise equal?
   (triton: also ieee and bf16 matrix products, and the compressed models on the table kernels vs the same
   tables on the reference backend, plain PyTorch); then the *precision check* (:func:`precision_checks`): the
   measured errors vs the oracle against the prediction of ``docs/tf32-accuracy.json`` (``--prediction``):
   pass if ``measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS`` (2 x + 1e-6) for energy and forces
   -- tf32 (triton, float32 weights, matmul auto) and the ieee / bf16 products where predicted, on CUDA; on a
   CPU, ieee only (the kernel backend computes exact float32 products there); a failed check is an error, a
   missing file a skip;
4. ``timings`` -- :func:`flashschnet.openmm.benchmark.measure.energy_forces` (the benchmark's model, structure
   and positions) for every backend (the reference only at ``--reference-replicas``, default R = 8, 64) and the
   kernel backend with bf16 weights (triton: also bf16 / fp16 products, CUDA-graph replay and float32 /
   bfloat16 filter tables) at each R, skipping what is predicted from a smaller R to exceed the memory limit or
   the time left; speed-ups and memory vs this run's reference;
5. ``openmm`` -- :func:`flashschnet.openmm.benchmark.measure.openmm_loop`, the product's shape: the network as an
   openmm-torch ``TorchForce`` (falling back to ``openmm.PythonForce``, recorded, only if ``openmmtorch`` cannot be
   imported) on the first of the CUDA, OpenCL and CPU platforms that loads and runs, for the kernel backend's float32
   variants of ``OPENMM_VARIANTS`` (:mod:`flashschnet.openmm.benchmark.device_checks`: tf32 products, bf16 products,
   bf16 weights, float32 filter tables) at each ``--openmm-replicas`` R (default 1, 8, 64, 128), each as a TorchForce,
   and (CUDA platform only, else a skip) a TorchForce with openmm-torch's CUDA-graph properties
   (:data:`flashschnet.openmm.force.CUDA_GRAPH_PROPERTIES`); the reference backend as a TorchForce at the reference R
   (8, 64) for the speed ratio; the PythonForce at the headline R (64) and the smallest R, tf32 only (what the
   TorchForce saves; not every variant, to save time); the same System as a parallel-tempering run
   (:func:`~flashschnet.openmm.benchmark.measure.tempering_loop`: R = 64 walkers, an exchange every 10 steps); and
   MARTINI 3 on the same protein (:func:`martini_loop`: the committed BPTI system of
   ``tests/data/martini/systems/bpti``, 20 fs Langevin; needs the MARTINI 3 ``.itp`` files: ``--martini-ff``, default
   ``.martini_ff/`` (carried to the device) or ``../shared/martini/m3``), so the GPU comparison is one run. Rows run in
   order of importance (:func:`openmm_plan`: the headline rows first, then the rest of the grid), each skipped when
   predicted (its setup time plus its steps, linear in R from a smaller R) to overrun the stage's deadline, or when the
   same configuration failed at a smaller R.

Stage *i* must end by ``start + budget * (1 - the later stages' SHARES)``: time a stage leaves goes to the next.
Before each item a stage checks its deadline (an item it cannot start is a skip); one that overruns it by
:data:`GRACE_S` is killed and keeps the items it saved. ``OUT/device.json``, rewritten after every stage:
``settings``, ``machine``, ``stages`` (each: ``status``, ``wall_s``, ``results``, ``skips``, ``errors``),
``timings`` (energy_forces rows, as flashschnet-benchmark's ``results``), ``ratios`` and ``openmm`` (the
OpenMM rows, skips included). The exit status is 1 if any stage recorded an error (a failed item, a failed
precision check, a crashed or killed stage), else 0 (skips, each with its reason, are not failures; nor are
missed performance targets: the summary and ``tools/device_report.py`` report them as FAIL).
``tools/device_report.py`` renders device.json into docs/benchmarks.md. A stage's record (:class:`Stage`), the
precision check and the OpenMM plan are :mod:`flashschnet.openmm.benchmark.device_checks`.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from flashschnet.openmm.benchmark.device_checks import (BOOKKEEPING, GRAPH, PYTHON, TORCH, Stage, log, openmm_plan,
                                                        precision_checks, write_json)

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / "tests" / "data" / "oracles" / "mlcg_schnet_A.pt"
MARTINI_SYSTEM = ROOT / "tests" / "data" / "martini" / "systems" / "bpti"
MARTINI_FF = (ROOT / ".martini_ff", ROOT.parent / "shared" / "martini" / "m3")
STAGES = ("environment", "compile", "correctness", "timings", "openmm")
#: each stage's share of the budget
#: (device estimate, 450 s: environment ~10 s of its 18; compile ~60-100 s of Triton JIT; correctness ~20 s;
#: timings ~40 rows of ~1-2 s; openmm ~40 rows of ~3-5 s set-up each -- the largest share; time a stage leaves
#: goes to the next)
SHARES = {"environment": 0.04, "compile": 0.21, "correctness": 0.09, "timings": 0.21, "openmm": 0.45}
#: seconds a stage may overrun its deadline (to end the item it is in) before it is killed
GRACE_S = 15.0
#: 16-bit weight variants checked (flashschnet.names.VARIANTS)
VARIANTS = ("none", "bf16", "fp16")
#: filter-table dtypes (flashschnet.transforms.COMPRESSIONS) whose table kernels the triton backend checks:
#: compiled and checked for correctness, and those timed
TABLES = ("float32", "float16", "bfloat16")
TIMED_TABLES = ("float32", "bfloat16")
#: the precision check's prediction (its rule: :func:`precision_checks`)
PREDICTION = ROOT / "docs" / "tf32-accuracy.json"
#: the defaults of a device run and of ``--smoke`` (backend, replica and step lists; seconds; GB)
FULL = dict(device="cuda", backends="reference,torch,triton", replicas="1,8,64,128", budget=450.0, pdb=None,
            reference_replicas="8,64", openmm_replicas="1,8,64,128", openmm_steps=50, warmup=3, repeats=10,
            max_memory_gb=100.0, float64_need_s=40.0, threads=None)
SMOKE = dict(device="cpu", backends="reference,torch", replicas="1,2", budget=200.0,
             pdb=str(ROOT / "tests" / "data" / "structures" / "1L2Y_trpcage.pdb"),
              reference_replicas="1,2", openmm_replicas="1,2", openmm_steps=3, warmup=1, repeats=2, max_memory_gb=4.0,
             float64_need_s=0.0, threads=1)
COMPILE_BEADS = 20


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The options; those not given take :data:`FULL`'s value, or :data:`SMOKE`'s with ``--smoke``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes, CPU defaults (a test of this script)")
    p.add_argument("--device", choices=["cuda", "cpu"])
    p.add_argument("--out", default=os.environ.get("OUT", "device-checks"), help="folder for device.json")
    p.add_argument("--backends", help="comma-separated (default reference,torch,triton; smoke: reference,torch)")
    p.add_argument("--replicas", help="comma-separated R of the timings (default 1,8,64,128; smoke: 1,2)")
    p.add_argument("--pdb", help="structure (default: the benchmark's packaged BPTI; smoke: trp-cage)")
    p.add_argument("--budget", type=float, help="seconds for all stages together (default 450; smoke 200)")
    p.add_argument("--reference-replicas", help="comma-separated R of the reference backend's timings "
                                                "(default 8,64; smoke: 1,2)")
    p.add_argument("--openmm-replicas", help="comma-separated R of the OpenMM rows (default 1,8,64,128; smoke: 1,2)")
    for name in ("openmm-steps", "warmup", "repeats", "threads"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--prediction", default=str(PREDICTION),
                   help="JSON with the predicted errors vs the oracle (key 'prediction'; "
                        "default docs/tf32-accuracy.json)")
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated stages to run (default all)")
    p.add_argument("--martini-ff", help="folder of the MARTINI 3 .itp files for the MARTINI row (default .martini_ff/, "
                                        "else ../shared/martini/m3)")
    p.add_argument("--max-memory-gb", type=float, help="skip a timing predicted to need more (default 100)")
    p.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)        # set by the parent for a child
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.backends = [b for b in args.backends.split(",") if b]
    args.replicas = sorted({int(r) for r in args.replicas.split(",") if r})
    args.reference_replicas = sorted({int(r) for r in args.reference_replicas.split(",") if r})
    args.openmm_replicas = sorted({int(r) for r in args.openmm_replicas.split(",") if r})
    args.stages = [s for s in STAGES if s in args.stages.split(",")]
    # the backend compiled, quantized and put into OpenMM: triton if selected, else the last non-reference one
    fused = [b for b in args.backends if b != "reference"]
    args.kernel_backend = "triton" if "triton" in fused else (fused or args.backends)[-1]
    return args


def structure(args):
    """Context: the path of the structure (the benchmark's packaged BPTI unless ``--pdb``)."""
    from flashschnet.openmm.benchmark.defaults import default_pdb

    return contextlib.nullcontext(Path(args.pdb)) if args.pdb else default_pdb()


def config(args, pdb, **kw) -> Dict[str, Any]:
    """A :mod:`flashschnet.openmm.benchmark.measure` configuration (built-in model, float32 by default)."""
    import torch

    return dict(dict(pdb=str(pdb), model=None, device=args.device, dtype="float32", quantize="none",
                     threads=args.threads or torch.get_num_threads(), warmup=args.warmup), **kw)


def openmmtorch_version(mod) -> str:
    """The openmm-torch module's version: its ``__version__``, else its distribution's (the acellera wheels:
    :func:`flashschnet.doctor.openmmtorch_distributions`, a CUDA build named before the CPU one)."""
    if getattr(mod, "__version__", None):
        return str(mod.__version__)
    from flashschnet.doctor import openmmtorch_distributions

    dists = sorted(openmmtorch_distributions(), key=lambda d: d[0].endswith("-cpu"))
    return f"{dists[0][0]} {dists[0][1]}" if dists else "?"


def rel(a, b) -> float:
    """max |a - b| / max |b|."""
    return float((a - b).abs().max() / b.abs().max())


# ---------------------------------------------------------------------------------------------------- stages
def stage_environment(args, st: Stage) -> None:
    """Stage 1: nvidia-smi, versions, the machine, OpenMM's platforms and plugin load failures, CUDA libraries."""
    import torch

    from flashschnet.openmm.benchmark.machine import machine_info

    def smi():
        q = "--query-gpu=name,driver_version,memory.total"
        res = subprocess.run(["nvidia-smi", q, "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        return {"gpus": res.stdout.strip().splitlines(), "returncode": res.returncode}

    def versions():
        import numpy
        import triton

        cuda = torch.cuda.is_available()
        return {"python": sys.version.split()[0], "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                "triton": triton.__version__, "numpy": numpy.__version__, "cuda_available": cuda,
                "gpu": torch.cuda.get_device_name(0) if cuda else None,
                "gpu_memory_gb": torch.cuda.get_device_properties(0).total_memory / 2**30 if cuda else None}

    def platforms():
        import openmm

        from flashschnet.openmm.platforms import loaded_platforms

        out = {"openmm": openmm.__version__, "plugins_dir": openmm.Platform.getDefaultPluginsDirectory(),
               "platforms": loaded_platforms(),
               "plugin_load_failures": list(openmm.Platform.getPluginLoadFailures())}
        try:  # openmm-torch: the module (its plugins' load failures are among OpenMM's above)
            from flashschnet.openmm.force import _import_openmmtorch

            mod = _import_openmmtorch()
            out["openmmtorch"] = f"{openmmtorch_version(mod)} ({getattr(mod, '__file__', '?')})"
        except Exception as exc:  # recorded here; the openmm stage falls back to the PythonForce
            out["openmmtorch"] = f"cannot load: {type(exc).__name__}: {exc}"[:300]
        print(f"OpenMM {out['openmm']} platforms: {', '.join(out['platforms'])}\nplugin load failures:",
              *(out["plugin_load_failures"] or ["none"]), sep="\n  ")
        return out

    def cuda_libraries():  # what the OpenMM CUDA plugin links to: loadable here?
        import ctypes

        def load(lib):
            try:
                return bool(ctypes.CDLL(lib)) and "loads"
            except OSError as exc:
                return str(exc)

        libs = ("libcuda.so.1", "libnvrtc.so.13", "libcufft.so.12")
        return dict({lib: load(lib) for lib in libs}, LD_LIBRARY_PATH=os.environ.get("LD_LIBRARY_PATH", ""))

    if args.device == "cuda":
        st.run("nvidia-smi", smi)
    else:
        st.skip("nvidia-smi", "--device cpu")
    st.run("versions", versions)
    st.run("machine", lambda: machine_info(args.device, torch.get_num_threads()))
    st.run("openmm platforms", platforms)
    if args.device == "cuda":
        st.run("cuda libraries", cuda_libraries)


def stage_compile(args, st: Stage) -> None:
    """Stage 2: first (compiling) and second call of the kernel backend, float32 then 16-bit weights, float64 last."""
    import torch

    import flashschnet
    from flashschnet.fused.engine import running_engine
    from flashschnet.openmm.benchmark import measure
    from flashschnet.openmm.benchmark.report import label

    def two_calls(pdb, mol, variant: str, dtype: str, matmul: str = "auto", graph: bool = False,
                  compress: str = "none") -> Dict[str, Any]:
        tdtype = getattr(torch, dtype)
        model = measure.load(config(args, pdb, backend=args.kernel_backend, quantize=variant, matmul=matmul,
                                    cuda_graph=graph, compress=compress, dtype=dtype), args.device)
        n = min(COMPILE_BEADS, int(mol.n_beads))
        pos = measure.positions(mol, 1, tdtype, args.device)[:, :n].contiguous()
        types = torch.as_tensor(mol.bead_types[:n], dtype=torch.long, device=args.device)
        times, notes = [], io.StringIO()
        if args.device == "cuda":
            torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(notes), \
                contextlib.redirect_stderr(notes):
            warnings.simplefilter("always")
            for _ in range(4 if graph else 2):          # a graph is captured at the third call
                t0 = time.perf_counter()
                energy, forces = model.energy_forces(pos, types)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        text = notes.getvalue() + "".join(f"warning: {w.message}\n" for w in caught)
        print(text, end="")
        return {"beads": n, "first_call_s": times[0], "second_call_s": times[1], "call_s": times,
                "network_backend": model.network.backend, "engine": running_engine(model, args.device),
                "energy_dtype": str(energy.dtype),
                "finite": bool(torch.isfinite(energy).all() and torch.isfinite(forces).all()), "notes": text[-1500:]}

    with structure(args) as pdb:
        mol = flashschnet.map_pdb(str(pdb))
        # every kernel variant a float32 step launches: 16-bit weights, and (triton) bf16 / fp16 products of
        # float32 weights, a CUDA-graph capture and the table kernels of compressed models
        runs = [(v, "auto", False, "none") for v in VARIANTS]
        if args.kernel_backend == "triton":
            runs += [("none", "bf16", False, "none"), ("none", "fp16", False, "none"), ("none", "auto", True, "none")]
            runs += [("none", "auto", False, t) for t in TABLES]
        for variant, matmul, graph, comp in runs:
            name = label(args.kernel_backend, variant, matmul, graph, comp)
            st.run(f"{name} float32: first (compiling) and second call",
                   lambda: two_calls(pdb, mol, variant, "float32", matmul, graph, comp), backend=args.kernel_backend,
                   quantize=variant, matmul=matmul, cuda_graph=graph, dtype="float32", compress=comp)
        st.run(f"{args.kernel_backend}+none float64: first and second call",
               lambda: two_calls(pdb, mol, "none", "float64"), need_s=args.float64_need_s,
               backend=args.kernel_backend, quantize="none", dtype="float64", compress="none")
        if args.kernel_backend == "triton":        # tables run the triton kernels in float64 on a GPU too
            st.run(f"{label('triton', compress=TABLES[0])} float64: first and second call",
                   lambda: two_calls(pdb, mol, "none", "float64", compress=TABLES[0]), need_s=args.float64_need_s,
                   backend="triton", quantize="none", dtype="float64", compress=TABLES[0])


def stage_correctness(args, st: Stage) -> None:
    """Stage 3: every backend x weight variant, float32, against the mlcg oracle and each other; repeatability.
    Triton: also the compressed models (each table dtype) on the table kernels and on the reference backend."""
    import torch

    from flashschnet.options import ModelOptions, prepare_model

    A = torch.load(ORACLE, weights_only=True)
    pos = A["positions_A"].to(args.device, torch.float32)
    types = A["bead_types"].to(args.device)
    e_ref, f_ref = A["energies_kcal_mol"], A["forces_kcal_mol_A"]
    outputs: Dict[Any, Any] = {}

    def check(backend: str, variant: str, comp: str = "none", matmul: str = "auto") -> Dict[str, Any]:
        model = prepare_model(ORACLE, ModelOptions(backend=backend, matmul=matmul, compress=comp, quantize=variant),
                              args.device)
        runs = [tuple(t.detach() for t in model.energy_forces(pos, types)) for _ in range(3)]
        e, f = (t.double().cpu() for t in runs[0])
        row = {"energy_rel_err_vs_oracle": rel(e, e_ref), "forces_rel_err_vs_oracle": rel(f, f_ref),
               "bitwise_repeatable": all(torch.equal(runs[0][i], r[i]) for r in runs[1:] for i in (0, 1)),
               "finite": bool(torch.isfinite(e).all() and torch.isfinite(f).all())}
        for other in args.backends:
            if other != backend and (other, variant, comp) in outputs:
                row[f"energy_rel_diff_vs_{other}"] = rel(e, outputs[other, variant, comp][0])
                row[f"forces_rel_diff_vs_{other}"] = rel(f, outputs[other, variant, comp][1])
        if matmul == "auto":
            outputs[backend, variant, comp] = (e, f)
        return row

    for variant in VARIANTS:
        for backend in args.backends:
            st.run(f"{backend}+{variant} float32 on {ORACLE.name}", lambda: check(backend, variant),
                   backend=backend, quantize=variant, dtype="float32", compress="none")
    if args.kernel_backend == "triton":       # exact (ieee) and bf16 products of float32 weights (auto: tf32)
        for mm in ("ieee", "bf16"):
            st.run(f"triton/mm={mm}+none float32 on {ORACLE.name}", lambda: check("triton", "none", matmul=mm),
                   backend="triton", quantize="none", matmul=mm, dtype="float32", compress="none")
    if args.kernel_backend == "triton":       # the table kernels vs the same tables in plain PyTorch
        for comp in TABLES:
            for backend in [b for b in ("reference", "triton") if b in args.backends]:
                st.run(f"{backend} with {comp} tables float32 on {ORACLE.name}", lambda: check(backend, "none", comp),
                       backend=backend, quantize="none", dtype="float32", compress=comp)
    precision_checks(args, st)


def stage_timings(args, st: Stage) -> None:
    """Stage 4: energy_forces timings and peak memory per backend and R, skipping predicted overruns; ratios."""
    import torch

    from flashschnet.openmm.benchmark import measure
    from flashschnet.openmm.benchmark.report import compute_ratios, label, predict_mb, record_label

    # (backend, 16-bit weights, matmul precision, CUDA graph, filter tables): every backend as it comes, then the
    # triton backend's products in bf16 / fp16 (auto = tf32 for float32 weights), with bf16 weights,
    # graph-replayed, and compressed (the table kernels)
    configs = [(b, "none", "auto", False, "none") for b in args.backends]
    if args.kernel_backend == "triton":
        configs += [("triton", "none", "bf16", False, "none"), ("triton", "none", "fp16", False, "none"),
                    ("triton", "bf16", "auto", False, "none"), ("triton", "none", "bf16", True, "none")]
        configs += [("triton", "none", "auto", False, t) for t in TIMED_TABLES]
    elif args.kernel_backend != "reference":
        configs.append((args.kernel_backend, "bf16", "auto", False, "none"))
    done = st.data["results"]

    def too_much(name: str, R: int) -> Optional[str]:
        """Why not to run ``name`` at R: it failed at a smaller R, or would exceed the memory limit or the time
        left (predicted linearly in R from a smaller R)."""
        failed = [e["replicas"] for e in st.data["errors"] if record_label(e) == name]
        if failed:
            return f"failed at R={min(failed)} (see errors)"
        mem = predict_mb(done, name, R)
        if mem and mem["predicted_mb"] > args.max_memory_gb * 1024:
            return (f"predicted {mem['predicted_mb'] / 1024:.1f} GB > {args.max_memory_gb:g} GB "
                    f"(linear in R from R={mem['from_replicas']})")
        prev = [r for r in done if record_label(r) == name and r["replicas"] < R]
        if prev:
            base = max(prev, key=lambda r: r["replicas"])
            need = (args.warmup + args.repeats) * base["median_ms"] / 1e3 * R / base["replicas"] + 5.0
            if need > st.left():
                return f"predicted {need:.0f} s > the {st.left():.0f} s left (linear in R from R={base['replicas']})"
        return None

    def measure_one(pdb, backend: str, variant: str, matmul: str, graph: bool, comp: str, R: int) -> Dict[str, Any]:
        out = measure.energy_forces(config(args, pdb, kind="energy_forces", backend=backend, quantize=variant,
                                           matmul=matmul, cuda_graph=graph, compress=comp, replicas=R,
                                           repeats=args.repeats))
        if args.device == "cuda":
            out["peak_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
            torch.cuda.empty_cache()
        return out

    with structure(args) as pdb:
        for R in args.replicas:
            for backend, variant, matmul, graph, comp in configs:
                name = label(backend, variant, matmul, graph, comp)
                tags = dict(backend=backend, quantize=variant, matmul=matmul, cuda_graph=graph, compress=comp,
                            replicas=R)
                why = too_much(name, R)
                if backend == "reference" and R not in args.reference_replicas:
                    continue                     # the reference only where the ratios are wanted (8, 64)
                if why:
                    st.skip(f"{name} R={R}", why, **tags)
                else:
                    st.run(f"{name} R={R}", lambda: measure_one(pdb, backend, variant, matmul, graph, comp, R),
                           need_s=1.0, **tags)
    st.data["ratios"] = compute_ratios(done)


def stage_openmm(args, st: Stage) -> None:
    """Stage 5: the OpenMM rows of :func:`openmm_plan` (TorchForce, with and without CUDA graph, and PythonForce;
    the parallel-tempering and MARTINI rows) on the first platform of CUDA, OpenCL, CPU that runs."""
    from flashschnet.openmm.benchmark import measure  # (imports torch, then openmm: the order they need)
    from flashschnet.openmm.benchmark.report import label
    from flashschnet.openmm.platforms import loaded_platforms

    torch_ok, why_not_torch = True, ""
    try:
        from flashschnet.openmm.force import _import_openmmtorch

        mod = _import_openmmtorch()
        log(f"openmmtorch {openmmtorch_version(mod)} from {getattr(mod, '__file__', '?')}")
    except Exception as exc:  # the fallback: every TorchForce row as an openmm.PythonForce row, recorded
        torch_ok, why_not_torch = False, f"{type(exc).__name__}: {exc}"[:300]
        st.add("errors", {"item": "import openmmtorch", "status": "error", "error": why_not_torch,
                          "traceback": traceback.format_exc()[-2000:]})
        log(f"openmmtorch cannot load ({why_not_torch}): PythonForce fallback")
    loaded = loaded_platforms()
    steps, plan = args.openmm_steps, openmm_plan(args, torch_ok)
    described = {TORCH: "TorchForce (openmm-torch)",
                 GRAPH: "TorchForce (openmm-torch) with useCUDAGraphs",
                 PYTHON: ("openmm.PythonForce" if torch_ok else
                          f"PythonForce fallback (openmm.PythonForce; openmmtorch cannot load: {why_not_torch})")}
    setups: List[float] = []   # seconds of a row outside its timed loop (model, scripting, Context, warm-up)

    def tags_of(r: Dict[str, Any], platform: str) -> Dict[str, Any]:
        if r["kind"] == "martini":
            return dict(platform=platform, kind="martini", system="BPTI (4PTI) in MARTINI 3 water, 0.15 M NaCl",
                        backend="MARTINI 3 (no network)", quantize="none", replicas=1,
                        network_force="none (pair potentials)")
        return dict(platform=platform, kind=r["kind"], variant=r["variant"], backend=r["backend"],
                    quantize=r["quantize"], matmul=r["matmul"], compress=r["compress"], cuda_graph=False,
                    replicas=r["replicas"], steps=steps, openmm_force=r["force"], network_force=described[r["force"]])

    def name_of(r: Dict[str, Any], platform: str) -> str:
        if r["kind"] == "martini":
            return f"OpenMM {platform} MARTINI 3 BPTI x {max(steps * 10, 20)} steps of 20 fs"
        what = "parallel tempering, an exchange every 10 steps, " if r["kind"] == "tempering" else ""
        return (f"OpenMM {platform} {label(r['backend'], r['quantize'], r['matmul'], False, r['compress'])} "
                f"[{r['force']}] {what}R={r['replicas']} x {steps} steps")

    def key(rec: Dict[str, Any]):
        return (rec.get("kind"), label(rec["backend"], rec.get("quantize", "none"), rec.get("matmul", "auto"),
                                       False, rec.get("compress", "none")), rec.get("openmm_force"))

    def predicted_s(r: Dict[str, Any]) -> float:
        """Seconds row ``r`` is predicted to take: the median set-up so far plus its steps, linear in R from the
        largest smaller R of the same configuration (else the set-up, doubled, alone)."""
        setup = sorted(setups)[len(setups) // 2] if setups else 0.0
        same = [o for o in st.data["results"] if o.get("kind") == r["kind"] and "ms_per_step" in o
                and key(o) == key(dict(r, openmm_force=r.get("force"))) and o["replicas"] <= r["replicas"]]
        if not same:
            return 2.0 * setup
        base = max(same, key=lambda o: o["replicas"])
        per_step = base["ms_per_step"] / 1e3 * r["replicas"] / base["replicas"]
        return setup + (steps + max(1, args.warmup) + 5) * per_step

    def why_not(r: Dict[str, Any], platform: str) -> Optional[str]:
        if st.left() < 1.0:
            return f"stage deadline: {max(st.left(), 0):.0f} s left"
        if r["kind"] == "martini":
            return None
        if r["force"] == GRAPH and not torch_ok:
            return f"openmmtorch cannot load ({why_not_torch}): no TorchForce"
        if r["force"] == GRAPH and platform != "CUDA":
            return f"openmm-torch CUDA graphs need the CUDA platform (platform {platform})"
        failed = [e["replicas"] for e in st.data["errors"] if "openmm_force" in e and e.get("kind") == r["kind"]
                  and key(e) == key(dict(r, openmm_force=r["force"])) and e["replicas"] < r["replicas"]]
        if failed:
            return f"failed at R={min(failed)} (see errors)"
        need = predicted_s(r)
        if need > st.left():
            return f"predicted {need:.0f} s > the {max(st.left(), 0):.0f} s left (set-up + steps, linear in R)"
        return None

    def one(r: Dict[str, Any], platform: str, pdb) -> Callable[[], Dict[str, Any]]:
        if r["kind"] == "martini":
            ff = next((Path(d) for d in ([args.martini_ff] if args.martini_ff else MARTINI_FF)
                       if (Path(d) / "martini_v3.0.0.itp").exists()), None)
            return lambda: martini_loop(platform, ff, max(steps * 10, 20))
        cfg = config(args, pdb, kind=r["kind"], backend=r["backend"], quantize=r["quantize"], matmul=r["matmul"],
                     compress=r["compress"], replicas=r["replicas"], steps=steps, platform=platform,
                     network_force="python" if r["force"] == PYTHON else "torch",
                     torch_cuda_graph=r["force"] == GRAPH)
        if r["kind"] == "tempering":
            return lambda: measure.tempering_loop(dict(cfg, exchange_interval=min(10, steps)))
        return lambda: measure.openmm_loop(cfg)

    def attempt(r: Dict[str, Any], platform: str, pdb) -> str:
        """Run or skip row ``r``: "ok", "skipped" or "error"."""
        tags = tags_of(r, platform)
        why = why_not(r, platform)
        if not why and r["kind"] == "martini" and not next(
                (d for d in ([args.martini_ff] if args.martini_ff else MARTINI_FF)
                 if (Path(d) / "martini_v3.0.0.itp").exists()), None):
            why = "no MARTINI 3 .itp files (--martini-ff, .martini_ff/ or ../shared/martini/m3)"
        if why:
            st.skip(name_of(r, platform), why, **tags)
            return "skipped"
        rec = st.run(name_of(r, platform), one(r, platform, pdb), need_s=1.0, **tags)
        if rec and "seconds" in rec:
            setups.append(max(rec["wall_s"] - rec["seconds"], 0.0))
        return "error" if rec is None else "ok"

    with structure(args) as pdb:
        platform = None
        for name in (["CUDA", "OpenCL", "CPU"] if args.device == "cuda" else ["CPU"]):
            if name not in loaded:
                st.skip(f"OpenMM {name}", "platform not loaded (see environment: plugin load failures)",
                        platform=name)
                continue
            if attempt(plan[0], name, pdb) != "error":       # ran, or skipped (the deadline): this platform
                platform = name
                break
            # the probe failed: does the platform run at all (a PythonForce)? If so, stay (the error is recorded)
            probe = dict(plan[0], force=PYTHON)
            if attempt(probe, name, pdb) != "error":
                platform = name
                if probe in plan:
                    plan.remove(probe)
                break
        if platform is None:
            st.add("errors", {"item": "OpenMM platform", "status": "error",
                              "error": "no OpenMM platform of CUDA, OpenCL, CPU ran the probe row"})
            return
        for r in plan[1:]:
            attempt(r, platform, pdb)


def martini_loop(platform: str, ff_dir: Path, steps: int) -> Dict[str, Any]:
    """MARTINI 3 BPTI (the committed system of :data:`MARTINI_SYSTEM`, equal to GROMACS term by term) on OpenMM
    ``platform``: 200 minimisation iterations, 20 fs Langevin at 300 K; ns/day over ``steps`` after 10 warm-up
    steps."""
    import openmm
    import openmm.unit as u

    from flashschnet.openmm.martini.system import build_system, read_gro
    from flashschnet.openmm.martini.topology import read_topology

    top = read_topology(MARTINI_SYSTEM / "system.top", include_dirs=[str(ff_dir)])
    pos, box = read_gro(MARTINI_SYSTEM / "system.gro")
    system = build_system(top, box)
    integrator = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1.0 / u.picosecond, 0.020 * u.picoseconds)
    ctx = openmm.Context(system, integrator, openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(pos)
    openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, 200)
    integrator.step(10)
    ctx.getState(getEnergy=True)
    t0 = time.perf_counter()
    integrator.step(steps)
    e = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
    wall = time.perf_counter() - t0
    return {"particles": system.getNumParticles(), "steps": steps, "dt_fs": 20.0, "wall_s_loop": wall,
            "ns_per_day_per_replica": steps * 20e-6 / wall * 86400.0,
            "ns_per_day_aggregate": steps * 20e-6 / wall * 86400.0, "ms_per_step": wall / steps * 1e3,
            "potential_kJ_mol": e}


# ------------------------------------------------------------------------------------------ parent and child
def run_stage(name: str, argv: List[str], deadline: float, result: Path) -> Dict[str, Any]:
    """Run stage ``name`` as this script with ``argv`` and ``--stage`` in a child process that saves its record
    in ``result`` after every item and is killed :data:`GRACE_S` after ``deadline`` (a ``time.time()``).

    Returns
    -------
    dict
        The record with ``status`` (ok; partial: skips; error: errors) and ``wall_s``; a child that crashed or
        was killed adds a ``stage`` error and keeps the items it had saved.
    """
    cmd = [sys.executable, "-u", str(Path(__file__).resolve()), *argv, "--stage", name,
           "--deadline", repr(deadline), "--result", str(result)]
    log(f"== stage {name} ({deadline - time.time():.0f} s until its deadline)")
    t0, problem = time.time(), None
    try:
        rc = subprocess.run(cmd, timeout=max(deadline - time.time(), 1.0) + GRACE_S).returncode
        if rc != 0:
            problem = f"stage process exit status {rc}" + (" (killed by a signal)" if rc < 0 else "")
    except subprocess.TimeoutExpired:
        problem = f"stage process killed {GRACE_S:.0f} s after its deadline (items after the last recorded lost)"
    data = json.loads(result.read_text()) if result.exists() else {"results": [], "skips": [], "errors": []}
    if problem:
        data["errors"].append({"item": "stage", "status": "error", "error": problem})
        log(f"stage {name}: {problem}")
    data["status"] = "error" if data["errors"] else ("partial" if data["skips"] else "ok")
    data["wall_s"] = round(time.time() - t0, 1)
    return data


def summary(report: Dict[str, Any]) -> str:
    """The report as readable text: stages, skips and errors, compile and correctness lines, the timings table
    of :func:`flashschnet.openmm.benchmark.report.format_table`."""
    lines = ["", "== device checks: stages"]
    for name, s in report["stages"].items():
        lines.append(f"{name:>12}: {s['status']:<8} {s['wall_s']:6.1f} s  {len(s['results'])} ok, "
                     f"{len(s['skips'])} skipped, {len(s['errors'])} errors")
        lines += [f"{'':>14}{e['status']}: {e['item']}: {e.get('reason') or e.get('error')}"
                  for e in s["skips"] + s["errors"]]
    for r in report["stages"].get("compile", {}).get("results", []):
        lines.append(f"compile {r['item']}: first {r['first_call_s']:.2f} s, second {r['second_call_s'] * 1e3:.1f} ms,"
                     f" backend {r['network_backend']} ran engine {r.get('engine', '?')}, finite {r['finite']}")
    for r in report["stages"].get("correctness", {}).get("results", []):
        if "check" in r:
            lines.append(f"{r['check']} check ({r['backend']}, matmul {r['matmul']}): measured E "
                         f"{r['energy_measured']:.2e} F {r['forces_measured']:.2e}, predicted E "
                         f"{r['energy_predicted']:.2e} F {r['forces_predicted']:.2e}: "
                         f"{'PASS' if r['passed'] else 'FAIL'} ({r['rule']})")
            continue
        diffs = ", ".join(f"{k.replace('_rel_diff_vs_', ' vs ')} {v:.1e}" for k, v in r.items() if "_diff_vs_" in k)
        tables = "" if r.get("compress", "none") == "none" else f"+{r['compress']} tables"
        mm = "" if r.get("matmul", "auto") == "auto" else f"/mm={r['matmul']}"
        lines.append(f"correctness {r['backend']}{tables}+{r['quantize']}{mm}: "
                     f"vs oracle E {r['energy_rel_err_vs_oracle']:.1e} "
                     f"F {r['forces_rel_err_vs_oracle']:.1e}; bitwise repeatable {r['bitwise_repeatable']}"
                     + (f"; {diffs}" if diffs else ""))
    try:
        from flashschnet.openmm.benchmark.report import format_table

        rows = report["timings"]
        view = {"machine": dict({"device": report["settings"]["device"], "device_name": "?", "threads": "?"},
                                **report["machine"]),
                "settings": {"pdb_name": Path(report["settings"]["pdb"]).name,
                             "n_beads": next((r["n_beads"] for r in rows if "n_beads" in r), "?"), "dtype": "float32",
                             "repeats": report["settings"]["repeats"], "warmup": report["settings"]["warmup"]},
                "results": rows, "ratios": report["ratios"], "openmm": report["openmm"]}
        lines += ["", format_table(view)]
    except Exception as exc:  # the table is a convenience; device.json has the numbers
        lines.append(f"(no timings table: {type(exc).__name__}: {exc})")
    try:  # the three targets, as tools/device_report.py renders them
        from flashschnet.openmm.benchmark.device_report import targets

        lines += ["", "== targets" + (" (a CPU run: the GPU's targets, only to exercise the logic)"
                                      if report["settings"]["device"] != "cuda" else "")]
        lines += [f"{t['status']:>12}: {t['name']}: {t['measured']} (target {t['threshold']}; "
                  f"{t.get('missing') or t['detail']})" for t in targets(report)]
    except Exception as exc:
        lines.append(f"(no targets: {type(exc).__name__}: {exc})")
    return "\n".join(lines)


def commit() -> Optional[str]:
    """The checkout's commit: ``$FLASHSCHNET_COMMIT`` (set by whoever copies the tree without .git), else
    ``git rev-parse HEAD`` (+ ``-dirty`` with uncommitted changes to tracked files), else None."""
    if os.environ.get("FLASHSCHNET_COMMIT"):
        return os.environ["FLASHSCHNET_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"], timeout=20).returncode
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: Optional[List[str]] = None) -> int:
    """Run every stage, each in a child process, and write ``OUT/device.json``; as a child, run one stage."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.threads:  # CPU threads of torch in the stages (smoke: 1, so that a busy test machine is not oversubscribed)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.stage:  # a child: one stage
        st = Stage(args.result, args.deadline)
        try:
            globals()[f"stage_{args.stage}"](args, st)
        except Exception as exc:  # e.g. an import: recorded; the next stage still runs
            st.add("errors", {"item": "stage", "status": "error", "error": f"{type(exc).__name__}: {exc}"[:500],
                              "traceback": traceback.format_exc()[-2000:]})
        write_json(st.data, st.path)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    settings = {k: v for k, v in vars(args).items() if k not in ("stage", "deadline", "result")}
    settings.update(pdb=args.pdb or "flashschnet/examples/4PTI_bpti.pdb (packaged)", oracle=str(ORACLE.relative_to(ROOT)),
                    shares=SHARES, command="python tools/device_checks.py " + " ".join(argv),
                    commit=commit(), started_utc=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)))
    report: Dict[str, Any] = {"settings": settings, "machine": {}, "stages": {}, "timings": [], "ratios": [],
                              "openmm": []}
    with tempfile.TemporaryDirectory(prefix="device-checks-") as tmp:
        for i, name in enumerate(STAGES):
            if name not in args.stages:
                continue
            deadline = start + args.budget * (1.0 - sum(SHARES[s] for s in STAGES[i + 1:]))
            stage = report["stages"][name] = run_stage(name, argv, deadline, Path(tmp) / f"{name}.json")
            if name == "environment":  # machine_info, versions, GPUs, OpenMM platforms and libraries in one dict
                for r in stage["results"]:
                    report["machine"].update({k: v for k, v in r.items() if k not in BOOKKEEPING})
            elif name == "timings":
                report["timings"] = sorted((r for r in stage["results"] + stage["skips"] + stage["errors"]
                                            if "replicas" in r), key=lambda r: r["seq"])
                report["ratios"] = stage.get("ratios", [])
            elif name == "openmm":
                report["openmm"] = sorted((r for r in stage["results"] + stage["skips"] + stage["errors"]
                                           if "platform" in r and "backend" in r), key=lambda r: r["seq"])
            report["total_wall_s"] = round(time.time() - start, 1)
            write_json(report, out / "device.json")
    failed = [name for name, stage in report["stages"].items() if stage["errors"]]
    report["passed"] = not failed
    write_json(report, out / "device.json")
    print(summary(report), flush=True)
    log(f"wrote {out / 'device.json'} ({report['total_wall_s']:.0f} s): "
        + (f"FAILED: errors in {', '.join(failed)}" if failed else "passed (no errors)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
