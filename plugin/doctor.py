"""The OpenMM part of ``flashschnet-doctor``: which platforms load, why the others do not, and whether the
network evaluates as a TorchForce and as a PythonForce on each.

* :func:`platform_report`: the loaded platforms (and whether openmm-torch's kernels are there), each plugin load
  failure explained, and the platforms whose package is not installed at all;
* :func:`check_forces`: on one platform, in a fresh process with a timeout (a bad plugin can segfault), the
  doctor's 3-bead network (:func:`flashschnet.doctor.tiny_model`, backend ``torch``) as a PythonForce and as a
  TorchForce: energies finite and equal within float32 tolerance;
* :func:`check_xml_round_trip`: a System holding a TorchForce through ``XmlSerializer`` and back, in a fresh
  process (openmm-torch builds compiled against another OpenMM crash there: with openmm 8.6 and openmm-torch 1.10 a
  known crash, reported as a warning, :func:`known_xml_crash`).

What a failure means and what to run (:func:`explain_failure`, :func:`explain_error`, :class:`Env`) is
:mod:`flashschnet.openmm.doctor_explain`'s; they are importable from here too.
"""
from __future__ import annotations

import math
import os
import time
from typing import Any, Dict, Optional

import torch  # noqa: F401  (torch before openmm: openmm-torch's plugins need torch's libraries)

import openmm

from ..doctor import (OPENMMTORCH_BUILDS, _one_line, cuda_install_command, cuda_major, emit, run_probe, tiny_inputs,
                      tiny_model)
from .doctor_explain import (Env, describe_library, explain_error, explain_failure, known_xml_crash, pin, torch_build,
                             xml_crash_warning)

#: the kernel openmm-torch registers on each platform it supports
TORCH_KERNEL = "CalcTorchForce"
#: the GPU platforms whose absence is worth a line
GPU_PLATFORMS = ("CUDA", "OpenCL")
#: agreement of the TorchForce and PythonForce energies and forces (same float32 network, same positions):
#: relative to max(1, |value|)
FORCE_RTOL = 1e-4


# -- platforms ---------------------------------------------------------------------------------------------

def platform_report(env: Optional[Env] = None) -> Dict[str, Any]:
    """The platforms that loaded (with ``torch_kernels``: openmm-torch's kernels are there), every plugin load
    failure explained (:func:`explain_failure`), and ``notes``: one line per platform not installed at all or
    lacking openmm-torch's kernels."""
    env = env or Env.current()
    loaded = []
    for i in range(openmm.Platform.getNumPlatforms()):
        p = openmm.Platform.getPlatform(i)
        try:
            kernels = bool(p.supportsKernels([TORCH_KERNEL]))
        except Exception:
            kernels = False
        loaded.append({"name": p.getName(), "speed": p.getSpeed(), "torch_kernels": kernels})
    names = {p["name"]: p for p in loaded}
    failures = [explain_failure(f, env) for f in openmm.Platform.getPluginLoadFailures()]
    for f in failures:
        # a torch plugin that failed because openmm came first was loaded again by flashschnet.openmm
        if f["kind"] == "torch-import-order" and names.get(f["platform"] or "", {}).get("torch_kernels"):
            f["resolved"] = True
            what = describe_library(os.path.basename(f["library"]), f["platform"], True)
            f["line"] = (f"{what} failed because openmm was "
                         "imported before torch, and loaded again after import torch (flashschnet.openmm does this); "
                         "nothing to do for flashschnet; your own scripts must import torch first")
    notes = []
    failed_platforms = {f["platform"] for f in failures if not f["torch_plugin"]}
    failed_torch = {f["platform"] for f in failures if f["torch_plugin"]}
    if "Reference" in failed_torch:       # openmm-torch's Reference plugin serves the CPU platform too
        failed_torch.add("CPU")
    tdist, tver = torch_build(env)
    for name in GPU_PLATFORMS:
        if name in names or name in failed_platforms:
            continue
        if name == "CUDA":
            here = "" if env.driver else " (this machine has no NVIDIA driver: only useful on a GPU machine)"
            notes.append(f"CUDA: OpenMM's CUDA platform is not installed: {cuda_install_command(env.torch_cuda)}"
                         f"{here}")
        else:
            notes.append(f"{name}: not part of this OpenMM installation (optional)")
    if not env.openmmtorch:
        build = OPENMMTORCH_BUILDS.get(cuda_major(env.torch_cuda)) if env.driver else OPENMMTORCH_BUILDS[None]
        notes.append(f"openmm-torch is not installed (no TorchForce; the PythonForce works without it): pip install "
                     f"{build}")
    else:
        for p in loaded:
            if not p["torch_kernels"] and p["name"] not in failed_torch:
                fix = (f"pip uninstall -y {tdist} && {cuda_install_command(env.torch_cuda)}" if p["name"] == "CUDA"
                       else f"pip install --force-reinstall --no-deps {pin(tdist, tver)}")
                notes.append(f"{p['name']}: loaded, but openmm-torch ({tdist}) has no kernels for it: {fix}")
    return {"loaded": loaded, "failures": failures, "notes": notes}


# -- force checks (each platform in its own process) ------------------------------------------------------

def _device_for(platform: str) -> str:
    return "cuda" if platform in ("CUDA", "HIP") and torch.cuda.is_available() else "cpu"


def force_probe(platform: str) -> None:
    """(In a probe process.) The tiny network as a PythonForce, then as a TorchForce, on ``platform``: emits
    ``{"kind", "status", "energy_kj", "forces", "seconds"}`` (or ``"error"``) for each, then the model's own."""
    import numpy as np

    from .force import make_network_force
    from .units import conversion_factors

    device = _device_for(platform)
    try:
        model = tiny_model("torch", device)
        pos, types = tiny_inputs("cpu")
        length_to_nm, energy_to_kj = conversion_factors(model.network.units)
        e, f = model.network.energy_forces(pos.to(device), types.to(device))
        emit({"kind": "model", "status": "ok", "device": device, "energy_kj": float(e.sum()) * energy_to_kj,
              "forces": (f.double().cpu()[0] * (energy_to_kj / length_to_nm)).tolist()})
        plat = openmm.Platform.getPlatformByName(platform)
    except Exception as exc:
        emit({"kind": "model", "status": "error", "error": _one_line(exc)})
        return
    props = {"Threads": "1"} if platform == "CPU" else {}
    pos_nm = pos[0].double().numpy() * length_to_nm
    for kind in ("python", "torch"):
        t0 = time.perf_counter()
        try:
            system = openmm.System()
            for _ in range(len(types)):
                system.addParticle(12.0)
            system.addForce(make_network_force(kind, model, types, 1))
            ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), plat, props)
            ctx.setPositions(pos_nm)
            st = ctx.getState(getEnergy=True, getForces=True)
            energy = st.getPotentialEnergy().value_in_unit(openmm.unit.kilojoule_per_mole)
            forces = np.asarray(st.getForces(asNumpy=True).value_in_unit(
                openmm.unit.kilojoule_per_mole / openmm.unit.nanometer))
            emit({"kind": kind, "status": "ok", "energy_kj": float(energy), "forces": forces.tolist(),
                  "seconds": time.perf_counter() - t0})
            del ctx
        except Exception as exc:
            emit({"kind": kind, "status": "error", "error": _one_line(exc)})


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FORCE_RTOL * max(1.0, abs(b))


def _max_diff(fa, fb) -> float:
    return max((abs(x - y) for ra, rb in zip(fa, fb) for x, y in zip(ra, rb)), default=float("inf"))


def _finite(r: Dict[str, Any]) -> bool:
    return math.isfinite(r["energy_kj"]) and all(math.isfinite(x) for row in r["forces"] for x in row)


def check_forces(platform: str, timeout: float = 180.0, env: Optional[Env] = None) -> Dict[str, Any]:
    """Evaluate the tiny network as a PythonForce and as a TorchForce on ``platform`` in a fresh process
    (:func:`force_probe`). Returns ``{"platform", "device", "python": {...}, "torch": {...}}``; each has
    ``status`` ("ok", "wrong", "error"), ``line`` (one line), and ``energy_kj`` when evaluated. The TorchForce
    is "ok" when its energy and forces are finite and equal to the PythonForce's (or, without one, the
    model's) within :data:`FORCE_RTOL`."""
    env = env or Env()
    results, problem = run_probe("flashschnet.openmm.doctor", "force_probe", [platform], timeout)
    got = {r["kind"]: r for r in results}
    model = got.get("model")
    out: Dict[str, Any] = {"platform": platform, "device": (model or {}).get("device")}
    for kind in ("python", "torch"):
        r = dict(got.get(kind) or {})
        if not r:
            why = (model or {}).get("error") if model and model["status"] != "ok" else None
            r = {"status": "error", "error": why or problem or "no result"}
        if r["status"] == "ok":
            other = got.get("python") if kind == "torch" else got.get("torch")
            other = other if other and other.get("status") == "ok" else None
            ref = other or (model if model and model.get("status") == "ok" else None)
            if not _finite(r):
                r.update(status="wrong", line=f"WRONG: non-finite energy or forces (E = {r['energy_kj']})")
            elif ref is not None and not (_close(r["energy_kj"], ref["energy_kj"])
                                          and _max_diff(r["forces"], ref["forces"])
                                          <= FORCE_RTOL * max(1.0, max(abs(x) for row in ref["forces"] for x in row))):
                whose = "PythonForce" if ref is other else "model"
                r.update(status="wrong", line=f"WRONG: E = {r['energy_kj']:.7g} kJ/mol differs from the {whose}'s "
                                              f"{ref['energy_kj']:.7g} beyond float32 tolerance")
            else:
                r["line"] = f"ok (E = {r['energy_kj']:.7g} kJ/mol)"
        else:
            hint = explain_error(r.get("error", ""), env)
            r["line"] = f"FAILS: {r.get('error')}" + (f" -> {hint}" if hint else "")
        r.pop("forces", None)
        out[kind] = r
    if out["python"]["status"] == out["torch"]["status"] == "ok":
        out["agree"] = True
        out["energy_difference_kj"] = abs(out["python"]["energy_kj"] - out["torch"]["energy_kj"])
    return out


def xml_probe() -> None:
    """(In a probe process.) A System with the tiny network's TorchForce through XmlSerializer and back,
    evaluated on Reference before and after."""
    from .force import make_network_force

    model = tiny_model("torch", "cpu")
    pos, types = tiny_inputs("cpu")
    system = openmm.System()
    for _ in range(len(types)):
        system.addParticle(12.0)
    system.addForce(make_network_force("torch", model, types, 1))

    def energy(s):
        ctx = openmm.Context(s, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
        ctx.setPositions(pos[0].double().numpy() * 0.1)
        return ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(openmm.unit.kilojoule_per_mole)

    try:
        before = energy(system)
        text = openmm.XmlSerializer.serialize(system)
        emit({"step": "serialized", "chars": len(text)})
        after = energy(openmm.XmlSerializer.deserialize(text))
        emit({"step": "done", "status": "ok" if _close(after, before) else "wrong", "before": before, "after": after})
    except Exception as exc:
        emit({"step": "done", "status": "error", "error": _one_line(exc)})


def check_xml_round_trip(timeout: float = 120.0, env: Optional[Env] = None) -> Dict[str, Any]:
    """Serialize and deserialize a System holding a TorchForce (:func:`xml_probe`) in a fresh process:
    ``{"status", "line"}``; status "ok", "wrong", "error", or "warning": the known crash of openmm 8.6 with
    openmm-torch 1.10 (:func:`known_xml_crash`; nothing flashschnet does is affected)."""
    env = env or Env()
    results, problem = run_probe("flashschnet.openmm.doctor", "xml_probe", [], timeout)
    done = next((r for r in results if r.get("step") == "done"), None)
    if done is not None and done["status"] == "ok":
        return {"status": "ok", "line": "ok (serialized, deserialized, same energy)"}
    if done is not None:
        why = done.get("error") or f"energy {done.get('before')} became {done.get('after')}"
        return {"status": done["status"], "line": f"FAILS: {why}"}
    stage = "deserializing" if any(r.get("step") == "serialized" for r in results) else "serializing"
    if not (problem or "").startswith("crashed"):
        return {"status": "error", "problem": problem, "line": f"FAILS {stage}: {problem or 'no result'}"}
    if stage == "deserializing" and known_xml_crash(env):
        return {"status": "warning", "problem": problem, "known": True,
                "line": xml_crash_warning(env, problem)}
    tdist, tver = torch_build(env)
    spec = env.requirements.get("openmm")
    fix = (f", or pip install '{spec}' (what flashschnet requires)" if spec and not _satisfies(spec, env.openmm_version)
           else "")
    return {"status": "error", "problem": problem,
            "line": f"FAILS {stage} ({problem}): openmm-torch {tdist} {tver} does not match openmm "
                    f"{env.openmm_version} for System XML; do not serialize Systems with a TorchForce{fix}"}


def known_xml_crash_here() -> bool:
    """Whether this environment's openmm and openmm-torch are the known XML crash's (:func:`known_xml_crash`;
    versions only, nothing is run)."""
    from ..doctor import _dist_version, openmmtorch_distributions

    return known_xml_crash(Env(openmm_version=_dist_version("openmm"), openmmtorch=openmmtorch_distributions())) \
        is not None


def _satisfies(requirement: str, version: Optional[str]) -> bool:
    """Whether ``version`` meets ``requirement`` (True when either cannot be read)."""
    try:
        from packaging.requirements import Requirement

        return version is None or Requirement(requirement).specifier.contains(version, prereleases=True)
    except Exception:
        return True


def report(timeout: float = 180.0, info: Optional[Dict[str, Any]] = None, workers: Optional[int] = None
           ) -> Dict[str, Any]:
    """Everything OpenMM: ``platforms`` (:func:`platform_report`), ``forces`` (:func:`check_forces` for each
    loaded platform), ``xml`` (:func:`check_xml_round_trip`, when openmm-torch is installed). The probe processes
    run ``workers`` at a time (default: up to 4, at most the CPU count)."""
    from concurrent.futures import ThreadPoolExecutor

    env = Env.current(info)
    plats = platform_report(env)
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check_forces, p["name"], timeout, env) for p in plats["loaded"]]
        xml = pool.submit(check_xml_round_trip, timeout, env) if env.openmmtorch else None
        forces = [f.result() for f in futures]
        xml = xml.result() if xml is not None else \
            {"status": "not run", "line": "not run (openmm-torch is not installed)"}
    return {"platforms": plats, "forces": forces, "xml": xml}

