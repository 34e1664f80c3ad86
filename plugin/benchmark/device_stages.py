"""The device checks' first three stages, each run in its own process by :mod:`.device_main`:

1. :func:`stage_environment` -- nvidia-smi, versions, the machine, OpenMM's platforms and plugin load failures, and
   whether the libraries the OpenMM CUDA plugin links to load;
2. :func:`stage_compile` -- first call (with Triton's JIT compile) and second call at 1 replica x 20 beads of the
   kernel backend (triton if selected) with float32, bf16 and fp16 weights (triton: also bf16 / fp16 products,
   the tabulated-filter kernels of float32 / float16 / bfloat16 tables, and last the model's CUDA graph, with
   float32 tables and plain); float64 last, only if time is left (and no capture failed). Triton's on-disk cache
   then serves the later stages;
3. :func:`stage_correctness` -- float32, every backend x {none, bf16, fp16} on the mlcg oracle ``mlcg_schnet_A.pt``:
   max relative errors (:func:`rel`) vs the oracle and vs the backends before it; three calls bitwise equal?
   (triton: also ieee and bf16 products); the precision check (:func:`.device_checks.precision_checks`); then
   (triton) the compressed models on the table kernels vs the same tables on the reference backend, and float32
   tables under the model's CUDA graph (eager calls, capture, replay) last.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict

from .device_checks import Stage, precision_checks, structure_path

__all__ = ["VARIANTS", "TABLES", "COMPILE_BEADS", "oracle_path", "rel", "openmmtorch_version", "stage_environment",
           "stage_compile", "stage_correctness"]

#: 16-bit weight variants checked (flashschnet.names.VARIANTS)
VARIANTS = ("none", "bf16", "fp16")
#: filter-table dtypes (flashschnet.transforms.COMPRESSIONS) whose table kernels the triton backend checks
TABLES = ("float32", "float16", "bfloat16")
COMPILE_BEADS = 20


def oracle_path(args) -> Path:
    """The mlcg oracle of the checkout (``tests/data/oracles/mlcg_schnet_A.pt``)."""
    return Path(args.root) / "tests" / "data" / "oracles" / "mlcg_schnet_A.pt"


def rel(a, b) -> float:
    """max |a - b| / max |b|."""
    return float((a - b).abs().max() / b.abs().max())


def openmmtorch_version(mod) -> str:
    """The openmm-torch module's version: its ``__version__``, else its distribution's (the acellera wheels:
    :func:`flashschnet.doctor.openmmtorch_distributions`, a CUDA build named before the CPU one)."""
    if getattr(mod, "__version__", None):
        return str(mod.__version__)
    from flashschnet.doctor import openmmtorch_distributions

    dists = sorted(openmmtorch_distributions(), key=lambda d: d[0].endswith("-cpu"))
    return f"{dists[0][0]} {dists[0][1]}" if dists else "?"


def stage_environment(args, st: Stage) -> None:
    """Stage 1: nvidia-smi, versions, the machine, OpenMM's platforms and plugin load failures, CUDA libraries."""
    import torch

    from .machine import machine_info

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

    def baseline():  # the baseline tree of the side-by-side rows (tools/device/fetch_device_baseline.sh)
        tree = Path(args.baseline)
        stamp = tree / "COMMIT"
        return {"baseline_tree": str(tree), "baseline_present": (tree / "flashschnet" / "__init__.py").exists(),
                "baseline_commit": stamp.read_text().strip() if stamp.exists() else None}

    if args.device == "cuda":
        st.run("nvidia-smi", smi)
    else:
        st.skip("nvidia-smi", "--device cpu")
    st.run("versions", versions)
    st.run("machine", lambda: machine_info(args.device, torch.get_num_threads()))
    st.run("openmm platforms", platforms)
    st.run("baseline tree", baseline)
    if args.device == "cuda":
        st.run("cuda libraries", cuda_libraries)


def stage_compile(args, st: Stage) -> None:
    """Stage 2: first (compiling) and second call of the kernel backend, float32 then 16-bit weights, float64 last."""
    import torch

    import flashschnet
    from flashschnet.fused.engine import running_engine

    from . import measure
    from .report import label

    def two_calls(pdb, mol, variant: str, dtype: str, matmul: str = "auto", graph: bool = False,
                  compress: str = "none") -> Dict[str, Any]:
        tdtype = getattr(torch, dtype)
        cfg = dict(pdb=pdb, model=None, device=args.device, dtype=dtype, quantize=variant, matmul=matmul,
                   cuda_graph=graph, compress=compress, backend=args.kernel_backend)
        model = measure.load(cfg, args.device)
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

    pdb = structure_path(args, "bpti")
    mol = flashschnet.map_pdb(pdb)
    # every kernel variant a float32 step launches: 16-bit weights, and (triton) bf16 / fp16 products of float32
    # weights, the table kernels of compressed models, and last the CUDA-graph captures
    runs = [(v, "auto", False, "none") for v in VARIANTS]
    if args.kernel_backend == "triton":
        runs += [("none", "bf16", False, "none"), ("none", "fp16", False, "none")]
        runs += [("none", "auto", False, t) for t in TABLES]
        runs += [("none", "auto", True, "float32"), ("none", "auto", True, "none")]
    for variant, matmul, graph, comp in runs:
        name = label(args.kernel_backend, variant, matmul, graph, comp)
        st.run(f"{name} float32: first (compiling) and second call",
               lambda: two_calls(pdb, mol, variant, "float32", matmul, graph, comp), backend=args.kernel_backend,
               quantize=variant, matmul=matmul, cuda_graph=graph, dtype="float32", compress=comp)
    broken = [e["item"] for e in st.data["errors"] if e.get("cuda_graph")]
    if broken:   # a failed capture can leave the CUDA context unusable: the optional float64 calls are not tried
        for dtype_item in (f"{args.kernel_backend}+none float64", f"{label('triton', compress=TABLES[0])} float64"):
            st.skip(f"{dtype_item}: first and second call", f"a CUDA-graph capture failed before ({broken[0]})",
                    backend=args.kernel_backend, dtype="float64")
        return
    st.run(f"{args.kernel_backend}+none float64: first and second call",
           lambda: two_calls(pdb, mol, "none", "float64"), need_s=args.float64_need_s,
           backend=args.kernel_backend, quantize="none", dtype="float64", compress="none")
    if args.kernel_backend == "triton":        # tables run the triton kernels in float64 on a GPU too
        st.run(f"{label('triton', compress=TABLES[0])} float64: first and second call",
               lambda: two_calls(pdb, mol, "none", "float64", compress=TABLES[0]), need_s=args.float64_need_s,
               backend="triton", quantize="none", dtype="float64", compress=TABLES[0])


def stage_correctness(args, st: Stage) -> None:
    """Stage 3: every backend x weight variant, float32, against the mlcg oracle and each other; repeatability.
    Triton: also the compressed models (each table dtype) on the table kernels and on the reference backend, and
    float32 tables under the model's CUDA graph (the third call replays the captured step)."""
    import torch

    from flashschnet.options import ModelOptions, prepare_model

    oracle = oracle_path(args)
    A = torch.load(oracle, weights_only=True)
    pos = A["positions_A"].to(args.device, torch.float32)
    types = A["bead_types"].to(args.device)
    e_ref, f_ref = A["energies_kcal_mol"], A["forces_kcal_mol_A"]
    outputs: Dict[Any, Any] = {}

    def check(backend: str, variant: str, comp: str = "none", matmul: str = "auto",
              graph: bool = False) -> Dict[str, Any]:
        model = prepare_model(oracle, ModelOptions(backend=backend, matmul=matmul, compress=comp, quantize=variant,
                                                   cuda_graph=graph), args.device)
        runs = [tuple(t.detach() for t in model.energy_forces(pos, types)) for _ in range(3)]
        e, f = (t.double().cpu() for t in runs[0])
        row = {"energy_rel_err_vs_oracle": rel(e, e_ref), "forces_rel_err_vs_oracle": rel(f, f_ref),
               "bitwise_repeatable": all(torch.equal(runs[0][i], r[i]) for r in runs[1:] for i in (0, 1)),
               "finite": bool(torch.isfinite(e).all() and torch.isfinite(f).all())}
        if graph:   # the replayed call against the eager one
            row["forces_rel_diff_replay_vs_eager"] = rel(runs[2][1].double().cpu(), f)
        for other in args.backends:
            if other != backend and (other, variant, comp) in outputs:
                row[f"energy_rel_diff_vs_{other}"] = rel(e, outputs[other, variant, comp][0])
                row[f"forces_rel_diff_vs_{other}"] = rel(f, outputs[other, variant, comp][1])
        if matmul == "auto" and not graph:
            outputs[backend, variant, comp] = (e, f)
        return row

    for variant in VARIANTS:
        for backend in args.backends:
            st.run(f"{backend}+{variant} float32 on {oracle.name}", lambda: check(backend, variant),
                   backend=backend, quantize=variant, dtype="float32", compress="none")
    if args.kernel_backend == "triton":       # exact (ieee) and bf16 products of float32 weights (auto: tf32)
        for mm in ("ieee", "bf16"):
            st.run(f"triton/mm={mm}+none float32 on {oracle.name}", lambda: check("triton", "none", matmul=mm),
                   backend="triton", quantize="none", matmul=mm, dtype="float32", compress="none")
    precision_checks(args, st)                # its rows are there: before the deadline can take them
    if args.kernel_backend == "triton":
        for comp in TABLES:                   # the table kernels vs the same tables in plain PyTorch
            for backend in [b for b in ("reference", "triton") if b in args.backends]:
                st.run(f"{backend} with {comp} tables float32 on {oracle.name}", lambda: check(backend, "none", comp),
                       backend=backend, quantize="none", dtype="float32", compress=comp)
        st.run(f"triton with float32 tables and the model's CUDA graph on {oracle.name}",
               lambda: check("triton", "none", "float32", graph=True), backend="triton", quantize="none",
               dtype="float32", compress="float32", cuda_graph=True)
