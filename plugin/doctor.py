"""The OpenMM part of ``flashschnet-doctor``: which platforms load, why the others do not, and whether the
network evaluates as a TorchForce and as a PythonForce on each.

* :func:`explain_failure` turns one of ``openmm.Platform.getPluginLoadFailures()`` (``"Error loading library
  PATH: REASON"``, REASON being the dynamic loader's message) into one line naming what to run: the NVIDIA
  driver missing, a library of the platform missing, an ABI mismatch (undefined symbol, ``GLIBCXX_...`` not
  found), openmm-torch loaded before torch, a platform library that did not load dragging its dependents;
* :func:`platform_report`: the loaded platforms (and whether openmm-torch's kernels are there), each failure
  explained, and the platforms whose package is not installed at all;
* :func:`check_forces`: on one platform, in a fresh process with a timeout (a bad plugin can segfault), the
  doctor's 3-bead network (:func:`flashschnet.doctor.tiny_model`, backend ``torch``) as a PythonForce and as a
  TorchForce: energies finite and equal within float32 tolerance;
* :func:`check_xml_round_trip`: a System holding a TorchForce through ``XmlSerializer`` and back (openmm-torch
  builds compiled against another OpenMM crash there).
"""
from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch  # noqa: F401  (torch before openmm: openmm-torch's plugins need torch's libraries)

import openmm

from ..backends import CUDA_MAJORS
from ..doctor import (OPENMMTORCH_BUILDS, _one_line, cuda_install_command, cuda_major, emit,
                      flashschnet_requirements, run_probe, tiny_inputs, tiny_model, versions)

#: the kernel openmm-torch registers on each platform it supports
TORCH_KERNEL = "CalcTorchForce"
#: the GPU platforms whose absence is worth a line
GPU_PLATFORMS = ("CUDA", "OpenCL")
#: agreement of the TorchForce and PythonForce energies and forces (same float32 network, same positions):
#: relative to max(1, |value|)
FORCE_RTOL = 1e-4

_LOAD_ERROR = re.compile(r"^\s*Error loading library (?P<lib>.+?\.(?:so|dylib|dll)(?:\.[\d.]+)?): (?P<reason>.*)$",
                         re.S)
_PLATFORM_OF = re.compile(r"(CUDA|OpenCL|HIP|Reference|CPU|Metal)$")
_CANNOT_OPEN = re.compile(r"(?P<dep>[\w.+-]+?\.(?:so|dylib|dll)(?:\.[\d.]+)?): cannot open shared object file")
_UNDEFINED = re.compile(r"undefined symbol:\s*(?P<sym>\S+)")
_VERSION_NOT_FOUND = re.compile(r"version [`'](?P<ver>(?:GLIBCXX|GLIBC|CXXABI)_[\d.]+)' not found")
#: CUDA libraries whose soname number is not the CUDA major version: soname major -> CUDA major
_CUDA_SONAME = {"libcufft": {"11": "12", "12": "13"}, "libcusparse": {"12": "12"}, "libcurand": {"10": None}}
_CUDA_LIBS = ("libnvrtc", "libcudart", "libcufft", "libcublas", "libcublasLt", "libcusparse", "libcurand",
              "libnvJitLink", "libcudnn", "libnvToolsExt", "libcupti", "libnvrtc-builtins", "libcusolver")


@dataclass
class Env:
    """What the explanations depend on (tests pass their own)."""
    torch_version: Optional[str] = None
    torch_cuda: Optional[str] = None
    openmm_version: Optional[str] = None
    openmmtorch: List[Tuple[str, str]] = field(default_factory=list)       # installed builds: (name, version)
    platform_packages: List[Tuple[str, str]] = field(default_factory=list)  # openmm-cuda-13 etc.
    driver: bool = False                                                     # libcuda.so.1 loads
    requirements: Dict[str, str] = field(default_factory=dict)              # what flashschnet requires

    @classmethod
    def current(cls, info: Optional[Dict[str, Any]] = None) -> "Env":
        info = info if info is not None else versions()
        return cls(torch_version=info.get("torch"), torch_cuda=info.get("torch_cuda"),
                   openmm_version=info.get("openmm"),
                   openmmtorch=[(d["name"], d["version"]) for d in info.get("openmmtorch_distributions", [])],
                   platform_packages=[(d["name"], d["version"]) for d in info.get("openmm_platform_packages", [])],
                   driver=bool(info.get("nvidia_driver")), requirements=flashschnet_requirements())


# -- explanations ------------------------------------------------------------------------------------------

def _plugin(lib: str) -> Tuple[str, Optional[str], bool]:
    """(file name, platform, is openmm-torch's) of a plugin library path."""
    base = os.path.basename(lib)
    stem = re.sub(r"\.(so|dylib|dll)(\.[\d.]+)?$", "", base)
    stem = stem[3:] if stem.startswith("lib") else stem
    m = _PLATFORM_OF.search(stem)
    return base, (m.group(1) if m else None), stem.startswith("OpenMMTorch")


def _what(base: str, platform: Optional[str], torch_plugin: bool) -> str:
    where = f" {platform}" if platform else ""
    if torch_plugin:
        return f"openmm-torch's{where} plugin ({base})"
    main = re.fullmatch(r"libOpenMM(CUDA|OpenCL|HIP|CPU|Metal)\.(so|dylib|dll)", base)
    return f"OpenMM's{where} platform ({base})" if main else f"OpenMM's{where} plugin ({base})"


def _torch_build(env: Env) -> Tuple[str, str]:
    """(the openmm-torch distribution installed (or the one torch's CUDA wants), its version or spec)."""
    if env.openmmtorch:
        return env.openmmtorch[0]
    name = OPENMMTORCH_BUILDS.get(cuda_major(env.torch_cuda)) or OPENMMTORCH_BUILDS[None]
    return name, ""


def _pin(name: str, version: str) -> str:
    return f"{name}=={version}" if version else name


def _cuda_of(dep: str, env: Env) -> Optional[str]:
    """The CUDA major a missing CUDA library belongs to (from its soname), else torch's."""
    m = re.match(r"(lib[\w-]+?)\.so\.(\d+)", dep)
    if m:
        lib, num = m.group(1), m.group(2)
        if lib in _CUDA_SONAME:
            return _CUDA_SONAME[lib].get(num) or cuda_major(env.torch_cuda)
        if num in CUDA_MAJORS:
            return num
    return cuda_major(env.torch_cuda)


def explain_failure(message: str, env: Optional[Env] = None) -> Dict[str, Any]:
    """One plugin load failure (a string of ``openmm.Platform.getPluginLoadFailures()``) explained.

    Returns ``{"kind", "library", "platform", "torch_plugin", "reason", "line"}``; ``kind`` is one of
    ``driver``, ``missing-library``, ``opencl-runtime``, ``depends``, ``torch-import-order``, ``torch-cuda``,
    ``abi``, ``libstdcxx``, ``glibc``, ``unknown``; ``line`` is one line saying what it means and what to run.
    """
    env = env or Env()
    text = " ".join(str(message).split())
    m = _LOAD_ERROR.match(text)
    lib, reason = (m.group("lib"), m.group("reason")) if m else ("", text)
    base, platform, torch_plugin = _plugin(lib) if lib else ("?", None, False)
    what = _what(base, platform, torch_plugin)
    out = {"library": lib, "platform": platform, "torch_plugin": torch_plugin, "reason": reason}
    ov = env.openmm_version or "?"
    missing = _CANNOT_OPEN.search(reason)
    dep = missing.group("dep") if missing else ""
    undefined = _UNDEFINED.search(reason)
    version = _VERSION_NOT_FOUND.search(reason)
    tdist, tver = _torch_build(env)

    def done(kind: str, line: str) -> Dict[str, Any]:
        out.update(kind=kind, line=line)
        return out

    if dep.startswith(("libcuda.so", "nvcuda.dll", "libcuda.dylib")):
        return done("driver", f"{what} is installed but this machine has no NVIDIA driver ({dep} not found): nothing "
                              "to install here; on a GPU machine install or upgrade the NVIDIA driver")
    if dep.startswith(("libamdhip64", "libhiprtc")):
        return done("driver", f"{what} is installed but this machine has no AMD ROCm runtime ({dep} not found): "
                              "nothing to install here unless it has an AMD GPU (then install ROCm)")
    if dep.startswith("libOpenCL.so"):
        return done("opencl-runtime", f"{what} needs an OpenCL runtime ({dep} not found): OpenCL is optional (use "
                                      "CUDA on NVIDIA GPUs); to use it: apt-get install ocl-icd-libopencl1 plus your "
                                      "GPU vendor's OpenCL driver")
    if re.match(r"libOpenMM(Torch)?\.(so|dylib|dll)", dep):      # the core library itself, not a plugin
        return done("missing-library", f"{what} cannot find {dep}, the core library of "
                                       f"{'openmm-torch' if 'Torch' in dep else 'OpenMM'} (a broken or moved "
                                       f"installation): pip install --force-reinstall --no-deps "
                                       f"{_pin(tdist, tver) if 'Torch' in dep else repr('openmm==' + ov)}")
    if dep.startswith("libOpenMM"):
        _, dep_platform, dep_torch = _plugin(dep)
        return done("depends", f"{what} needs {_what(dep, dep_platform, dep_torch)}, which did not load: see that "
                               "library's line (same fix)")
    if re.match(r"lib(torch|c10)\w*\.so", dep):
        if re.match(r"lib(torch_cuda|c10_cuda)", dep) and not env.torch_cuda and env.torch_version:
            return done("torch-cuda", f"{what} needs a CUDA build of torch but torch {env.torch_version} is CPU-only "
                                      f"({dep} not found): install torch with CUDA and {cuda_install_command(None)}, "
                                      f"or keep the CPU build only: pip uninstall -y {tdist}; pip install "
                                      f"{OPENMMTORCH_BUILDS[None]}")
        return done("torch-import-order", f"{what} could not find torch's libraries ({dep} not found): openmm was "
                                          "imported before torch; import torch first (importing flashschnet.openmm "
                                          "loads the plugin again), or, if torch is missing: pip install "
                                          f"'{env.requirements.get('torch', 'torch')}'")
    if dep.startswith(_CUDA_LIBS):
        major = _cuda_of(dep, env)
        cmd = cuda_install_command(major if major in CUDA_MAJORS else env.torch_cuda)
        torch_major = cuda_major(env.torch_cuda)
        also = (f" (torch here is built with CUDA {env.torch_cuda}: use the build for CUDA {torch_major}, "
                f"{cuda_install_command(torch_major)})" if torch_major in CUDA_MAJORS and major and major != torch_major
                else "")
        return done("missing-library", f"{what} is missing the CUDA {major or ''} library {dep}: {cmd}{also}"
                    .replace("CUDA  library", "CUDA library"))
    if undefined:
        sym = undefined.group("sym")
        if torch_plugin:
            if re.search(r"6OpenMM|OpenMM::", sym):
                spec = env.requirements.get("openmm", f"openmm=={ov}")
                return done("abi", f"{what} ({tdist} {tver}) was built for another OpenMM than openmm {ov} here "
                                   f"(undefined symbol {sym}): install the OpenMM it was built for: pip install "
                                   f"'{spec}'")
            return done("abi", f"{what} ({tdist} {tver}) was built for another torch than torch "
                               f"{env.torch_version or '?'} here (undefined symbol {sym}): install the matching pair: "
                               f"pip install '{env.requirements.get('torch', 'torch')}' && pip install "
                               f"--force-reinstall --no-deps {_pin(tdist, tver)}")
        pkgs = " ".join(f"'{n}=={ov}'" for n, _ in env.platform_packages if platform and platform.lower() in n.lower())
        return done("abi", f"{what} comes from another OpenMM build than openmm {ov} (undefined symbol {sym}): "
                           f"reinstall the matching set: pip install --force-reinstall 'openmm=={ov}'"
                           + (f" {pkgs}" if pkgs else ""))
    if version:
        ver = version.group("ver")
        if ver.startswith(("GLIBCXX", "CXXABI")):
            return done("libstdcxx", f"{what} needs a newer C++ runtime (libstdc++ {ver} not found): in a conda "
                                     "environment run conda install -c conda-forge 'libstdcxx-ng>=13'; else remove "
                                     "the older libstdc++ from LD_LIBRARY_PATH")
        return done("glibc", f"{what} needs a newer C library than this system's ({ver} not found): use a newer "
                             "Linux (or container), or conda-forge's builds: conda install -c conda-forge openmm "
                             "openmm-torch")
    package = _pin(tdist, tver) if torch_plugin else f"'openmm=={ov}'"
    if missing:
        return done("missing-library", f"{what} needs {dep}, which is not installed: reinstall its package: "
                                       f"pip install --force-reinstall {package}")
    return done("unknown", f"{what} did not load ({reason[:200]}): reinstall its package: pip install "
                           f"--force-reinstall {package}")


def explain_error(message: str, env: Optional[Env] = None) -> str:
    """A hint for an error of a force check (Context creation or evaluation), "" when none applies."""
    env = env or Env()
    m = str(message)
    if "CUDA_ERROR_NO_DEVICE" in m or "no CUDA-capable device" in m:
        return "no GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
    if re.search(r"CUDA_ERROR_(INSUFFICIENT_DRIVER|UNSUPPORTED_PTX_VERSION|COMPAT_NOT_SUPPORTED)|driver version is "
                 r"insufficient", m):
        return ("the NVIDIA driver is older than this CUDA build needs: upgrade the driver, or use the CUDA 12 "
                f"builds: {cuda_install_command('12')}")
    if "does not support all required kernels" in m or "No registered implementation for kernel" in m:
        tdist, tver = _torch_build(env)
        if not env.openmmtorch:
            return f"openmm-torch is not installed: pip install {OPENMMTORCH_BUILDS.get(cuda_major(env.torch_cuda))}"
        return ("openmm-torch has no kernels on this platform: see its plugin failures above (or openmm was imported "
                f"before torch), else pip install --force-reinstall --no-deps {_pin(tdist, tver)}")
    if "No module named 'openmmtorch'" in m:
        return (f"openmm-torch is not installed: pip install {OPENMMTORCH_BUILDS[None]} "
                f"(or {cuda_install_command(env.torch_cuda)})")
    if "has no attribute 'PythonForce'" in m:
        return (f"openmm {env.openmm_version} has no PythonForce: pip install "
                f"'{env.requirements.get('openmm', 'openmm')}'")
    return ""


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
            f["line"] = (f"{_what(os.path.basename(f['library']), f['platform'], True)} failed because openmm was "
                         "imported before torch, and loaded again after import torch (flashschnet.openmm does this); "
                         "nothing to do for flashschnet; your own scripts must import torch first")
    notes = []
    failed_platforms = {f["platform"] for f in failures if not f["torch_plugin"]}
    failed_torch = {f["platform"] for f in failures if f["torch_plugin"]}
    if "Reference" in failed_torch:       # openmm-torch's Reference plugin serves the CPU platform too
        failed_torch.add("CPU")
    tdist, tver = _torch_build(env)
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
                       else f"pip install --force-reinstall --no-deps {_pin(tdist, tver)}")
                notes.append(f"{p['name']}: loaded, but openmm-torch ({tdist}) has no kernels for it: {fix}")
    return {"loaded": loaded, "failures": failures, "notes": notes}


# -- force checks (each platform in its own process) ------------------------------------------------------

def _device_for(platform: str) -> str:
    return "cuda" if platform in ("CUDA", "HIP") and torch.cuda.is_available() else "cpu"


def force_probe(platform: str) -> None:
    """(In a probe process.) The tiny network as a PythonForce, then as a TorchForce, on ``platform``: emits
    ``{"kind", "status", "energy_kj", "forces", "seconds"}`` (or ``"error"``) for each, then the model's own."""
    import numpy as np

    from .force import add_network_force
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
            add_network_force(system, model, types, 1, kind=kind)
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
    from .force import add_network_force

    model = tiny_model("torch", "cpu")
    pos, types = tiny_inputs("cpu")
    system = openmm.System()
    for _ in range(len(types)):
        system.addParticle(12.0)
    add_network_force(system, model, types, 1, kind="torch")

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
    ``{"status", "line"}``."""
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
    tdist, tver = _torch_build(env)
    spec = env.requirements.get("openmm")
    fix = (f", or pip install '{spec}' (what flashschnet requires)" if spec and not _satisfies(spec, env.openmm_version)
           else "")
    return {"status": "error", "problem": problem,
            "line": f"FAILS {stage} ({problem}): openmm-torch {tdist} {tver} does not match openmm "
                    f"{env.openmm_version} for System XML; do not serialize Systems with a TorchForce{fix}"}


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

