"""``python -m flashschnet.doctor``: what works on this machine -- the part of the doctor without OpenMM.

The doctor has three parts, split along the package's import rule (``flashschnet`` never imports openmm,
docs/architecture.md):

* this module (``flashschnet.doctor``): the installed versions (read with :mod:`importlib.metadata`, nothing
  imported but torch), the tiny 3-bead CGSchNet every check uses, the checks of our backends
  (``reference``, ``torch``, ``triton``) on each device, and :func:`run_probe`, which runs a check in a fresh
  Python process with a timeout (a crashing kernel or plugin, or a slow compile, ends that process, not the
  doctor);
* :mod:`flashschnet.openmm.doctor`: the OpenMM platforms, the plugin load failures explained, and a
  TorchForce and a PythonForce evaluated on each platform;
* :mod:`flashschnet.scripts.doctor`: the command line (``flashschnet-doctor``), the report and the exit status.

``python -m flashschnet.doctor`` needs a module of this name, but the command line lives in
``flashschnet.scripts.doctor`` and imports :mod:`flashschnet.openmm`; this module runs it with
:func:`runpy.run_module` (a module name, not an import statement), so ``flashschnet`` keeps no import of the
OpenMM side and the CLI is written once. Without openmm installed the command still reports the versions and
the backends.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .backends import cuda_extra

#: the prefix of a probe's result lines on its stdout (one JSON object per line)
MARKER = "FLASHSCHNET_DOCTOR "

#: the tiny network of every check: 3 beads, one interaction block (fused-backend compatible: tanh, cosine
#: cutoffs from 0), float32, seeded random weights (the same numbers on every machine)
TINY_CONFIG = {
    "hidden_channels": 16, "num_filters": 16, "num_interactions": 1, "embedding_size": 4,
    "output_hidden_layer_widths": [16], "activation": "tanh",
    "rbf": {"kind": "gaussian", "num_rbf": 16, "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 6.0}},
    "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 6.0},
}
TINY_SEED = 20261203
#: the 3 beads' positions (Angstrom, all pairs within the 6 A cutoff) and types
TINY_POSITIONS_A = [[0.0, 0.0, 0.0], [3.8, 0.0, 0.0], [1.0, 3.5, 0.6]]
TINY_TYPES = [1, 2, 3]

#: openmm-torch's builds (acellera's wheels; module ``openmmtorch``), by torch's CUDA major (None: CPU torch)
OPENMMTORCH_BUILDS = {None: "acellera-openmmtorch-cpu", "12": "acellera-openmmtorch-cu12",
                      "13": "acellera-openmmtorch-cu13"}

#: float32 agreement of the fused backends with the float64 reference: relative to the largest force
#: (triton's default float32 filter products use tf32 tensor cores: ~1e-3)
TOLERANCE = {"reference": 1e-4, "torch": 1e-4, "triton": 1e-2}


# -- versions ----------------------------------------------------------------------------------------------

def _dist_version(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def distributions_matching(predicate) -> List[Tuple[str, str]]:
    """(name, version) of the installed distributions whose lower-case name satisfies ``predicate``."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name and predicate(name.lower()):
            found[name] = dist.version
    return sorted(found.items())


def openmmtorch_distributions() -> List[Tuple[str, str]]:
    """The installed distributions that provide the module ``openmmtorch`` (acellera's ``-cpu``/``-cu12``/
    ``-cu13`` builds, conda-forge's ``openmmtorch``, ...): (name, version)."""
    from importlib import metadata

    names = set(metadata.packages_distributions().get("openmmtorch", []))
    named = distributions_matching(lambda n: n.replace("_", "-") in ("openmmtorch", "openmm-torch")
                                   or n.startswith("acellera-openmmtorch"))
    names.update(n for n, _ in named)
    return sorted((n, _dist_version(n) or "?") for n in names)


def flashschnet_requirements() -> Dict[str, str]:
    """Lower-case distribution name -> the requirement the installed flashschnet declares for it (the core
    ones, not the extras'), e.g. ``{"openmm": "openmm<8.7,>=8.5"}``; empty when flashschnet is not installed."""
    import re
    from importlib import metadata

    try:
        reqs = metadata.requires("flashschnet") or []
    except metadata.PackageNotFoundError:
        return {}
    out = {}
    for r in reqs:
        if ";" in r:          # an extra's
            continue
        out[re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0].strip().lower()] = r.strip()
    return out


def cuda_major(torch_cuda: Optional[str]) -> Optional[str]:
    """"12" for torch.version.cuda "12.8", None for a CPU build."""
    return str(torch_cuda).split(".")[0] if torch_cuda else None


def cuda_install_command(torch_cuda: Optional[str]) -> str:
    """The GPU install to name: the extra matching torch's CUDA major version (CUDA 13, the PyPI default of
    torch 2.11, for a CPU torch or another CUDA)."""
    return f"pip install 'flashschnet[{cuda_extra(torch_cuda)}]'"


def nvidia_driver_present() -> bool:
    """Whether the NVIDIA driver's ``libcuda.so.1`` can be loaded here."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def versions() -> Dict[str, Any]:
    """The versions that matter, "not installed" where absent (torch is imported: its CUDA is asked)."""
    import platform

    out: Dict[str, Any] = {"python": platform.python_version(), "executable": sys.executable,
                           "flashschnet": _dist_version("flashschnet")}
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["cuda_devices"] = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                               if out["cuda_available"] else [])
    except Exception as exc:      # torch missing or broken: every other check says so too
        out.update(torch=None, torch_error=_one_line(exc), torch_cuda=None, cuda_available=False, cuda_devices=[])
    for key, dist in (("triton", "triton"), ("numpy", "numpy"), ("openmm", "openmm"), ("openmmml", "openmmml")):
        out[key] = _dist_version(dist)
    dists = openmmtorch_distributions()
    out["openmmtorch_distributions"] = [{"name": n, "version": v} for n, v in dists]
    out["openmmtorch"] = dists[0][1] if dists else None
    # OpenMM's GPU platforms come in their own distributions from openmm 8.6 (openmm-cuda-12, openmm-cuda-13)
    out["openmm_platform_packages"] = [{"name": n, "version": v} for n, v in distributions_matching(
        lambda n: n.startswith(("openmm-cuda", "openmm-opencl", "openmm-hip")))]
    out["nvidia_driver"] = nvidia_driver_present()
    return out


def openmmtorch_note(dists: Sequence[Tuple[str, str]], torch_cuda: Optional[str],
                     driver: bool = True) -> Optional[str]:
    """One line when the openmm-torch installation needs attention (builds that clash, or a build for another
    CUDA than torch's; ``driver``: whether this machine has an NVIDIA driver), else None.

    The CPU build beside one CUDA build of the same release is what ``pip install 'flashschnet[cuda13]'`` (or
    ``cuda12``) makes: the core needs the CPU build, the extra adds the CUDA build, whose files are a superset of
    the same release's (the libraries both ship export the same symbols), so that pair is one CUDA build."""
    versions = dict(dists)
    names = [n for n, _ in dists]
    cuda_builds = [n for n in names if not n.endswith("-cpu")]
    if len(cuda_builds) == 1 and len(names) == 2 and len(set(versions.values())) == 1:
        names = cuda_builds                          # the [cudaXX] extra's layout
    major = cuda_major(torch_cuda)
    want = OPENMMTORCH_BUILDS.get(major)
    if len(names) > 1:
        keep = want if want in names else names[0]
        drop = " ".join(n for n in names if n != keep)
        listed = ", ".join(f"{n} {versions[n]}" for n in names)
        return (f"{len(names)} openmm-torch builds that clash are installed ({listed}): they overwrite each other's "
                f"files; keep one: pip uninstall -y {drop} && pip install --force-reinstall --no-deps "
                f"{keep}=={versions[keep]}")
    if len(names) != 1 or not names[0].startswith("acellera-openmmtorch") or want is None or names[0] == want:
        return None
    have = names[0]
    if have.endswith("-cpu"):      # without a GPU that is right (the OpenMM section names the GPU install)
        return (f"{have} has no CUDA kernels (TorchForce runs on Reference/CPU only; torch here is built with "
                f"CUDA {torch_cuda}): for the CUDA platform: {cuda_install_command(torch_cuda)}") if driver else None
    return (f"{have} is built for another CUDA than torch (torch.version.cuda = {torch_cuda}): "
            f"pip uninstall -y {have} && {cuda_install_command(torch_cuda)}")


# -- the tiny model ----------------------------------------------------------------------------------------

def tiny_model(backend: Optional[str] = None, device: str = "cpu", dtype=None, matmul: str = "auto"):
    """The doctor's 3-bead CGSchNet (:data:`TINY_CONFIG`, seeded weights) as a :class:`flashschnet.LoadedModel`
    with ``backend`` on ``device`` in ``dtype`` (default float32); the caller's random state is left alone."""
    import torch

    from .config import DEFAULT_UNITS
    from .loaded import LoadedModel
    from .nn.schnet import CGSchNet

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        network = CGSchNet(TINY_CONFIG, backend=backend, units=dict(DEFAULT_UNITS), device=str(device),
                           matmul=matmul)
    network = network.to(device=device, dtype=dtype or torch.float32).eval()
    return LoadedModel(network=network, metadata={"description": "flashschnet doctor: 3-bead test network",
                                                  "placeholder": True})


def tiny_inputs(device: str = "cpu", dtype=None):
    """(positions [1, 3, 3] in Angstrom, bead types [3]) of the tiny model."""
    import torch

    pos = torch.tensor([TINY_POSITIONS_A], dtype=dtype or torch.float32, device=device)
    return pos, torch.tensor(TINY_TYPES, dtype=torch.long, device=device)


# -- probes in a fresh process -----------------------------------------------------------------------------

def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines() or [type(exc).__name__])[0][:limit]


def emit(result: Dict[str, Any]) -> None:
    """Write one result line of a probe (flushed, so results written before a crash still arrive)."""
    print(MARKER + json.dumps(result), flush=True)


def run_probe(module: str, function: str, args: Sequence[Any], timeout: float,
              env: Optional[Dict[str, str]] = None) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """Run ``module.function(*args)`` in a fresh Python (this interpreter) and collect what it :func:`emit`\\ s.

    Returns ``(results, problem)``: ``problem`` is None when the process ended normally, else one line (timed
    out, crashed with a signal, exit status and its last stderr line). The results written before a crash are
    kept.
    """
    code = (f"import json, sys\nfrom {module} import {function} as probe\n"
            f"probe(*json.loads(sys.argv[1]))\n")
    penv = dict(os.environ if env is None else env)
    penv.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True,
                              timeout=timeout, env=penv)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        stdout, stderr, rc = text(exc.stdout), text(exc.stderr), None
    results = []
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            try:
                results.append(json.loads(line[len(MARKER):]))
            except ValueError:
                pass
    if rc is None:
        return results, f"timed out after {timeout:g} s (a slow machine: raise --timeout)"
    if rc == 0:
        return results, None
    tail = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = f": {tail[-1][:300]}" if tail else ""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return results, f"crashed ({name}) after {time.perf_counter() - t0:.0f} s{last}"
    return results, f"exit status {rc}{last}"


# -- our backends ------------------------------------------------------------------------------------------

TRITON_ON_CPU = "GPU only (runs here only under TRITON_INTERPRET=1 for tests)"


def backend_probe(device: str) -> None:
    """(In a probe process.) A tiny ``energy_forces`` call of each backend on ``device``, against the float64
    reference backend on the CPU; emits one result per backend."""
    import math

    import torch

    pos64, types = tiny_inputs("cpu", torch.float64)
    e_ref, f_ref = tiny_model("reference", "cpu", torch.float64).network.energy_forces(pos64, types)
    scale = max(1.0, float(f_ref.abs().max()))
    for backend in ("reference", "torch", "triton"):
        if backend == "triton" and not device.startswith("cuda"):
            continue
        out: Dict[str, Any] = {"backend": backend, "device": device}
        try:
            t0 = time.perf_counter()
            net = tiny_model(backend, device).network
            pos, tt = tiny_inputs(device)
            e, f = net.energy_forces(pos, tt)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            e, f = e.double().cpu(), f.double().cpu()
            err = max(float((e - e_ref).abs().max()), float((f - f_ref).abs().max())) / scale
            finite = bool(torch.isfinite(e).all() and torch.isfinite(f).all())
            ok = finite and err <= TOLERANCE[backend]
            out.update(status="ok" if ok else "wrong", energy=float(e.sum()), rel_error=err if math.isfinite(err)
                       else None, tolerance=TOLERANCE[backend], finite=finite, seconds=time.perf_counter() - t0)
        except Exception as exc:
            out.update(status="error", error=_one_line(exc))
        emit(out)


def check_backends(timeout: float = 300.0, devices: Optional[Sequence[str]] = None,
                   cuda_available: Optional[bool] = None) -> List[Dict[str, Any]]:
    """Which backend runs on which device: one row per (device, backend), each with ``status`` ("ok", "wrong",
    "error", "not run") and a one-line ``line``. Devices: cpu, and cuda when torch sees a GPU."""
    if cuda_available is None:
        import torch

        cuda_available = bool(torch.cuda.is_available())
    if devices is None:
        devices = ["cpu"] + (["cuda"] if cuda_available else [])
    rows: List[Dict[str, Any]] = []
    for device in devices:
        results, problem = run_probe("flashschnet.doctor", "backend_probe", [device], timeout)
        got = {r["backend"]: r for r in results}
        for backend in ("reference", "torch", "triton"):
            if backend == "triton" and device == "cpu":
                rows.append({"backend": backend, "device": device, "status": "not run", "line": TRITON_ON_CPU})
                continue
            r = dict(got.get(backend) or {"backend": backend, "device": device, "status": "error",
                                          "error": problem or "no result"})
            r["line"] = _backend_line(r)
            rows.append(r)
    if "cuda" not in devices:
        rows.append({"backend": "*", "device": "cuda", "status": "not run",
                     "line": "no CUDA device visible to torch (torch.cuda.is_available() is False)"})
    return rows


def _backend_line(r: Dict[str, Any]) -> str:
    if r["status"] == "ok":
        return f"ok (E = {r['energy']:.6g} kcal/mol, {r['rel_error']:.1e} from the float64 reference)"
    if r["status"] == "wrong":
        what = "non-finite result" if not r.get("finite") else \
            f"off by {r['rel_error']:.1e} from the float64 reference (tolerance {r['tolerance']:g})"
        return f"WRONG: {what}"
    return f"FAILS: {r.get('error')}"


if __name__ == "__main__":
    import runpy

    # the command line is flashschnet.scripts.doctor; run it by name (see the module docstring)
    runpy.run_module("flashschnet.scripts.doctor", run_name="__main__", alter_sys=True)
