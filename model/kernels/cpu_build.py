"""Building the C kernels of :mod:`~flashschnet.kernels.cpu_pairs` (and the benchmarks' C loops): the system C
compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``), one set of flags, a cache keyed by the source, the compiler,
the flags and the CPU (``~/.cache/flashschnet/kernels``, or ``$FLASHSCHNET_KERNEL_CACHE``).

Why not ``torch.utils.cpp_extension``: it needs a C++ toolchain and Python headers and builds for minutes; these
kernels are plain C loaded with ``ctypes`` and build in about a second.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List

#: -ffp-contract=fast: ``a * b + c`` is one fused multiply-add (ISO C modes default to off); -march=native: the
#: CPU's own vector instructions (the cache key holds the CPU)
FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-ffp-contract=fast", "-fno-math-errno", "-fPIC", "-shared",
         "-std=gnu11"]
#: -fopenmp: the segment loops on OpenMP threads -- GNU OpenMP, the runtime PyTorch's wheels load
#: (``libgomp.so.1``), so the loops share PyTorch's thread pool instead of competing with its spinning threads
OPENMP = ["-fopenmp"]


def cache_dir() -> Path:
    return Path(os.environ.get("FLASHSCHNET_KERNEL_CACHE") or Path.home() / ".cache" / "flashschnet" / "kernels")


def cpu_key() -> str:
    """What ``-march=native`` depends on: the CPU's model name and flags."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags", "Features"))]
        return "\n".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def compile_library(cc: str, flags: List[str], cache: Path, source: str, name: str) -> Path:
    """``source`` compiled with ``flags`` into ``cache`` (``name-<key>.so``; an existing one is reused); OSError
    with the compiler's first error line when it fails."""
    key = hashlib.sha256("\0".join([source, cc, " ".join(flags), cpu_key(), platform.machine()]).encode())
    lib = cache / f"{name}-{key.hexdigest()[:16]}.so"
    if lib.exists():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_text(source)
        out = Path(tmp) / f"{name}.so"
        res = subprocess.run([cc, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, text=True)
        if res.returncode != 0:
            errors = [ln for ln in res.stderr.splitlines() if "error" in ln] or res.stderr.splitlines() or [""]
            raise OSError(f"{cc} failed: {errors[0].strip() or f'exit status {res.returncode}'}")
        os.replace(out, lib)              # atomic: concurrent builders leave one complete file
    return lib


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise OSError("no C compiler found (set CC)")
    return cc


def build(source: str, name: str, cache: Path, openmp: bool = True) -> Path:
    """The library of ``source``, with OpenMP where the compiler has it (and ``openmp``), else without."""
    cc = compiler()
    if openmp:
        try:
            return compile_library(cc, FLAGS + OPENMP, cache, source, name)
        except OSError:
            pass
    return compile_library(cc, FLAGS, cache, source, name)
