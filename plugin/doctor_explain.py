"""What a failure seen by ``flashschnet-doctor``'s OpenMM checks means, and what to run, in one line.

* :func:`explain_failure` turns one of ``openmm.Platform.getPluginLoadFailures()`` (``"Error loading library
  PATH: REASON"``, REASON being the dynamic loader's message) into one line naming what to run: the NVIDIA
  driver missing, a library of the platform missing, an ABI mismatch (undefined symbol, ``GLIBCXX_...`` not
  found), openmm-torch loaded before torch, a platform library that did not load dragging its dependents;
* :func:`explain_error`: a hint for an error of a force check (Context creation or evaluation);
* :func:`known_xml_crash` / :func:`xml_crash_warning`: the one known crash of a supported set (openmm 8.6 with
  acellera's openmm-torch 1.10: reading back the XML of a System that holds a TorchForce) and its warning line;
* :class:`Env`: what the explanations depend on (versions, installed builds, the NVIDIA driver).

Text in, text out: this module runs no check and imports no OpenMM (the checks are
:mod:`flashschnet.openmm.doctor`'s).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..backends import CUDA_MAJORS
from ..doctor import OPENMMTORCH_BUILDS, cuda_install_command, cuda_major, flashschnet_requirements, versions

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
    openmmml_version: Optional[str] = None

    @classmethod
    def current(cls, info: Optional[Dict[str, Any]] = None) -> "Env":
        info = info if info is not None else versions()
        return cls(torch_version=info.get("torch"), torch_cuda=info.get("torch_cuda"),
                   openmm_version=info.get("openmm"),
                   openmmtorch=[(d["name"], d["version"]) for d in info.get("openmmtorch_distributions", [])],
                   platform_packages=[(d["name"], d["version"]) for d in info.get("openmm_platform_packages", [])],
                   driver=bool(info.get("nvidia_driver")), requirements=flashschnet_requirements(),
                   openmmml_version=info.get("openmmml"))


# -- explanations ------------------------------------------------------------------------------------------

def _plugin(lib: str) -> Tuple[str, Optional[str], bool]:
    """(file name, platform, is openmm-torch's) of a plugin library path."""
    base = os.path.basename(lib)
    stem = re.sub(r"\.(so|dylib|dll)(\.[\d.]+)?$", "", base)
    stem = stem[3:] if stem.startswith("lib") else stem
    m = _PLATFORM_OF.search(stem)
    return base, (m.group(1) if m else None), stem.startswith("OpenMMTorch")


def describe_library(base: str, platform: Optional[str], torch_plugin: bool) -> str:
    """A plugin library in words: ``openmm-torch's CUDA plugin (libOpenMMTorchCUDA.so)``, ``OpenMM's CUDA
    platform (libOpenMMCUDA.so)`` or ``OpenMM's ... plugin (...)``."""
    where = f" {platform}" if platform else ""
    if torch_plugin:
        return f"openmm-torch's{where} plugin ({base})"
    main = re.fullmatch(r"libOpenMM(CUDA|OpenCL|HIP|CPU|Metal)\.(so|dylib|dll)", base)
    return f"OpenMM's{where} platform ({base})" if main else f"OpenMM's{where} plugin ({base})"


def torch_build(env: Env) -> Tuple[str, str]:
    """(the openmm-torch distribution installed (or the one torch's CUDA wants), its version or spec)."""
    if env.openmmtorch:
        return env.openmmtorch[0]
    name = OPENMMTORCH_BUILDS.get(cuda_major(env.torch_cuda)) or OPENMMTORCH_BUILDS[None]
    return name, ""


def pin(name: str, version: str) -> str:
    """``name==version`` (``name`` alone when the version is unknown)."""
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
    what = describe_library(base, platform, torch_plugin)
    out = {"library": lib, "platform": platform, "torch_plugin": torch_plugin, "reason": reason}
    ov = env.openmm_version or "?"
    missing = _CANNOT_OPEN.search(reason)
    dep = missing.group("dep") if missing else ""
    undefined = _UNDEFINED.search(reason)
    version = _VERSION_NOT_FOUND.search(reason)
    tdist, tver = torch_build(env)

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
                                       f"{pin(tdist, tver) if 'Torch' in dep else repr('openmm==' + ov)}")
    if dep.startswith("libOpenMM"):
        _, dep_platform, dep_torch = _plugin(dep)
        return done("depends", f"{what} needs {describe_library(dep, dep_platform, dep_torch)}, which did not load: see that "
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
                               f"--force-reinstall --no-deps {pin(tdist, tver)}")
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
    package = pin(tdist, tver) if torch_plugin else f"'openmm=={ov}'"
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
        tdist, tver = torch_build(env)
        if not env.openmmtorch:
            return f"openmm-torch is not installed: pip install {OPENMMTORCH_BUILDS.get(cuda_major(env.torch_cuda))}"
        return ("openmm-torch has no kernels on this platform: see its plugin failures above (or openmm was imported "
                f"before torch), else pip install --force-reinstall --no-deps {pin(tdist, tver)}")
    if "No module named 'openmmtorch'" in m:
        return (f"openmm-torch is not installed: pip install {OPENMMTORCH_BUILDS[None]} "
                f"(or {cuda_install_command(env.torch_cuda)})")
    if "has no attribute 'PythonForce'" in m:
        return (f"openmm {env.openmm_version} has no PythonForce: pip install "
                f"'{env.requirements.get('openmm', 'openmm')}'")
    return ""


# -- the known XML crash of openmm 8.6 + openmm-torch 1.10 -------------------------------------------------

#: the OpenMM release line from which acellera's openmm-torch 1.10 (compiled against OpenMM 8.5) crashes in
#: ``TorchForceProxy::deserialize``: OpenMM 8.6 changed ``SerializationNode``'s ABI (``getStringProperty`` returns by
#: value instead of by const reference; a return type is not part of a mangled name, so the plugin still links)
XML_CRASH_OPENMM = (8, 6)
#: the openmm-torch release line of those builds
XML_CRASH_OPENMMTORCH = (1, 10)
#: the verified set, which reads such XML back
VERIFIED_OPENMM, VERIFIED_OPENMMML = "8.5.2", "1.7"


def _release(version: Optional[str]) -> Tuple[int, ...]:
    """(8, 6, 1) for "8.6.1", (1, 10) for "1.10.post1"; () when unreadable."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def known_xml_crash(env: Env) -> Optional[Tuple[str, str]]:
    """The openmm-torch build (name, version) of ``env`` that crashes when a System holding a TorchForce is read back
    from XML with ``env``'s openmm (openmm >= 8.6 with acellera's openmm-torch 1.10), else None. Versions only:
    nothing is run."""
    if _release(env.openmm_version)[:2] < XML_CRASH_OPENMM:
        return None
    return next(((n, v) for n, v in env.openmmtorch
                 if n.lower().startswith("acellera-openmmtorch") and _release(v)[:2] == XML_CRASH_OPENMMTORCH), None)


def xml_crash_warning(env: Env, problem: Optional[str] = None) -> str:
    """The doctor's line for :func:`known_xml_crash` (``problem``: what the probe process died of)."""
    tdist, tver = known_xml_crash(env) or torch_build(env)
    seen = f" (the probe process {problem})" if problem else ""
    ml = f" 'openmmml=={VERIFIED_OPENMMML}'" if env.openmmml_version else ""
    return (f"WARNING: reading the XML back crashes{seen}: known with openmm {env.openmm_version or '?'} and {tdist} "
            f"{tver} (built against OpenMM 8.5; OpenMM 8.6 changed SerializationNode's ABI). flashschnet never does "
            f"it: its commands are not affected. In your own code do not XmlSerializer.deserialize or .clone, pickle "
            f"or copy a System holding a TorchForce (writing its XML, State XML and checkpoints work); to do that, use "
            f"the verified set: pip install 'openmm=={VERIFIED_OPENMM}'{ml} (docs/install.md)")
