"""The device checks' timing stages, each run in its own process by :mod:`.device_main`; every row runs in a row
worker (:class:`.device_rows.RowWorker`) of its source tree, the plans are :mod:`.device_checks`':

4. :func:`stage_timings` -- ``energy_forces`` of the network alone (:func:`.measure.energy_forces`) for the rows
   of :func:`.device_checks.timing_plan`: BPTI at every ``--replicas`` R, float32 tables with and without the
   model's CUDA graph, tf32 and bf16 products, the reference; lysozyme; peak GPU memory per row;
5. :func:`stage_baseline` -- the rows of :func:`.device_checks.baseline_plan` in a worker of the baseline tree
   (``--baseline``, default ``.baseline/``: ``tools/device/fetch_device_baseline.sh``), recorded with ``"tree":
   "baseline"`` beside the same rows of the checkout (``"tree": "current"``);
6. :func:`stage_openmm` -- the OpenMM loop (:func:`.measure.openmm_loop`, the network as an openmm-torch
   TorchForce, with and without openmm-torch's CUDA graph, or an ``openmm.PythonForce``), the do-nothing force
   (:func:`.overhead.null_loop`: OpenMM's share of a step) and a parallel-tempering run, for the rows of
   :func:`.device_checks.openmm_plan`, on the first of the CUDA, OpenCL and CPU platforms that runs the probe row
   (without ``openmmtorch``: the PythonForce fallback, recorded).

CUDA-only rows on a CPU (the model's CUDA graph with ``--device cpu``, openmm-torch's graph off the CUDA
platform) are skips with the reason.
"""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from .device_checks import (GRAPH, NETWORKS, PYTHON, TORCH, Stage, baseline_plan, config, log, openmm_plan,
                            openmm_steps, row_label, structure_path, timing_plan)
from .device_rows import RowWorker, run_plan

__all__ = ["maker", "graph_skip", "structure_skip", "stage_timings", "stage_baseline", "stage_openmm"]


def maker(args, platform: Optional[str] = None, described: Optional[Dict[str, str]] = None
          ) -> Callable[[Dict[str, Any]], Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    """``make(row) -> (item, tags, configuration)`` of :func:`.device_rows.run_plan` for OpenMM ``platform``;
    ``described``: how the records name each network force."""
    described = described or {}

    def make(r: Dict[str, Any]):
        net = NETWORKS.get(r["variant"], NETWORKS["exact"])
        tags = dict(kind=r["kind"], tree=r["tree"], structure=r["structure"], variant=r["variant"],
                    backend="none" if r["kind"] == "overhead" else (r.get("backend") or args.kernel_backend),
                    quantize=net["quantize"], matmul=net["matmul"], compress=net["compress"],
                    cuda_graph=net["cuda_graph"], replicas=r["replicas"])
        name = row_label(r, args.kernel_backend)
        if r["kind"] != "energy_forces":
            steps = openmm_steps(args, r["replicas"])
            tags.update(platform=platform, force=r["force"], openmm_force=r["force"], steps=steps,
                        network_force=described.get(r["force"], r["force"]))
            name = f"OpenMM {platform} {name} x {steps} steps"
        return name, tags, config(args, r, platform)

    return make


def graph_skip(args, r: Dict[str, Any], platform: Optional[str] = None) -> Optional[str]:
    """Why a CUDA-graph row cannot run here (None if it can): the model's graph needs ``--device cuda``,
    openmm-torch's the CUDA platform."""
    if NETWORKS.get(r["variant"], {}).get("cuda_graph") and args.device != "cuda":
        return f"the model's CUDA graph needs CUDA (--device {args.device})"
    if r.get("force") == GRAPH and platform != "CUDA":
        return f"openmm-torch CUDA graphs need the CUDA platform (platform {platform})"
    return None


def structure_skip(args, r: Dict[str, Any]) -> Optional[str]:
    """Why row ``r``'s structure cannot be read (None if it can)."""
    try:
        path = structure_path(args, r["structure"])
    except Exception as exc:
        return f"no {r['structure']} structure: {type(exc).__name__}: {exc}"
    return None if Path(path).exists() else f"no {r['structure']} structure at {path}"


def _skips(args, platform: Optional[str] = None, worker: Optional[RowWorker] = None, torch_why: str = ""):
    def extra(r):
        if worker is not None and worker.broken:
            return f"no row worker: {worker.broken}"
        if torch_why and r.get("force") == GRAPH:
            return f"openmmtorch cannot load ({torch_why}): no TorchForce"
        return graph_skip(args, r, platform) or structure_skip(args, r)
    return extra


def stage_timings(args, st: Stage) -> None:
    """Stage 4: the ``energy_forces`` rows of :func:`.device_checks.timing_plan` in a worker of the checkout's
    tree, skipping what is predicted from a smaller R to exceed the memory limit or the time left."""
    worker = RowWorker("current", root=args.baseline)
    try:
        run_plan(st, timing_plan(args), worker, maker(args), _skips(args, worker=worker),
                 max_memory_mb=args.max_memory_gb * 1024)
    finally:
        worker.close()


def _platform_for(args) -> Tuple[Optional[str], str]:
    """The OpenMM platform of the baseline's OpenMM rows (CUDA for a CUDA run, else CPU) and why not, if it did
    not load."""
    from flashschnet.openmm.platforms import loaded_platforms

    name = "CUDA" if args.device == "cuda" else "CPU"
    return (name, "") if name in loaded_platforms() else (None, f"OpenMM platform {name} not loaded")


def stage_baseline(args, st: Stage) -> None:
    """Stage 5: the rows of :func:`.device_checks.baseline_plan` in a worker of the baseline tree
    (``args.baseline``); each a skip with the reason when the tree is missing."""
    tree = Path(args.baseline)
    plan = baseline_plan(args)
    if not (tree / "flashschnet" / "__init__.py").exists():
        why = f"no baseline tree at {tree} (run tools/device/fetch_device_baseline.sh here; carry .baseline)"
        make = maker(args, "-")
        for r in plan:
            name, tags, _ = make(r)
            st.skip(name, why, **tags)
        return
    try:
        platform, why_platform = _platform_for(args)
    except Exception as exc:  # no OpenMM: the energy_forces rows still run
        platform, why_platform = None, f"OpenMM cannot load: {type(exc).__name__}: {exc}"
    worker = RowWorker("baseline", root=tree)
    inner = _skips(args, platform, worker)

    def extra(r):
        if r["kind"] != "energy_forces" and platform is None:
            return why_platform
        return inner(r)

    try:
        run_plan(st, plan, worker, maker(args, platform, {TORCH: "TorchForce (openmm-torch)",
                                                          GRAPH: "TorchForce (openmm-torch) with useCUDAGraphs"}),
                 extra, max_memory_mb=args.max_memory_gb * 1024)
    finally:
        worker.close()


def stage_openmm(args, st: Stage) -> None:
    """Stage 6: the OpenMM rows of :func:`.device_checks.openmm_plan` on the first platform of CUDA, OpenCL, CPU
    that runs the probe row (the plan's first; if it fails, a PythonForce probe decides whether the platform
    runs at all)."""
    from flashschnet.openmm.platforms import loaded_platforms

    from .device_stages import openmmtorch_version

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
    plan = openmm_plan(args, torch_ok)
    described = {TORCH: "TorchForce (openmm-torch)", GRAPH: "TorchForce (openmm-torch) with useCUDAGraphs",
                 PYTHON: ("openmm.PythonForce" if torch_ok else
                          f"PythonForce fallback (openmm.PythonForce; openmmtorch cannot load: {why_not_torch})")}
    worker = RowWorker("current", root=args.baseline)

    def attempt(rows, name):
        return run_plan(st, rows, worker, maker(args, name, described), _skips(args, name, worker, why_not_torch))

    try:
        platform = None
        for name in (["CUDA", "OpenCL", "CPU"] if args.device == "cuda" else ["CPU"]):
            if name not in loaded:
                st.skip(f"OpenMM {name}", "platform not loaded (see environment: plugin load failures)",
                        platform=name)
                continue
            if attempt(plan[:1], name)[0] != "error":       # ran, or skipped (the deadline): this platform
                platform = name
                break
            # the probe failed: does the platform run at all (a PythonForce)? If so, stay (the error is recorded)
            probe = dict(plan[0], force=PYTHON)
            if attempt([probe], name)[0] != "error":
                platform = name
                plan = [r for r in plan if r != probe]
                break
        if platform is None:
            st.add("errors", {"item": "OpenMM platform", "status": "error",
                              "error": "no OpenMM platform of CUDA, OpenCL, CPU ran the probe row"})
            return
        attempt(plan[1:], platform)
    finally:
        worker.close()
