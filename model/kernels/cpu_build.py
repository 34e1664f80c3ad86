"""Building the C kernels of :mod:`~flashschnet.kernels.cpu_pairs` and :mod:`~flashschnet.kernels.cpu_nodes` (and
the benchmarks' C loops): the system C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``), one set of flags, a
cache keyed by the source, the compiler, the flags and the CPU (``~/.cache/flashschnet/kernels``, or
``$FLASHSCHNET_KERNEL_CACHE``), each library verified by the sha256 written beside it before it is loaded
(:func:`verified`).

Why not ``torch.utils.cpp_extension``: it needs a C++ toolchain and Python headers and builds for minutes; these
kernels are plain C loaded with ``ctypes`` and build in about a second.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable, List, Optional

_log = logging.getLogger("flashschnet")

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


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified(lib: Path) -> bool:
    """Whether a cached library's bytes match the sha256 written beside it when it was built (``<lib>.sha256``):
    a damaged library -- a flipped byte, a zeroed block, a truncation -- may load and compute garbage, or crash
    the process that loads it, so none is loaded unverified."""
    try:
        return (lib.parent / (lib.name + ".sha256")).read_text().strip() == _digest(lib)
    except OSError:
        return False


def compile_library(cc: str, flags: List[str], cache: Path, source: str, name: str) -> Path:
    """``source`` compiled with ``flags`` into ``cache`` (``name-<key>.so`` and its sha256 ``name-<key>.so.sha256``;
    an existing one whose bytes match its sha256 is reused, another is rebuilt with a one-line note); OSError with
    the compiler's first error line when it fails."""
    key = hashlib.sha256("\0".join([source, cc, " ".join(flags), cpu_key(), platform.machine()]).encode())
    lib = cache / f"{name}-{key.hexdigest()[:16]}.so"
    if lib.exists():
        if verified(lib):
            return lib
        _log.warning(f"flashschnet: the compiled kernels {lib} do not match their sha256 (a damaged file, or two "
                     f"builds racing); rebuilt")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_text(source)
        out = Path(tmp) / f"{name}.so"
        res = subprocess.run([cc, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, text=True)
        if res.returncode != 0:
            errors = [ln for ln in res.stderr.splitlines() if "error" in ln] or res.stderr.splitlines() or [""]
            raise OSError(f"{cc} failed: {errors[0].strip() or f'exit status {res.returncode}'}")
        stamp = Path(tmp) / "sha256"
        stamp.write_text(_digest(out) + "\n")
        # each rename is atomic: a reader sees whole files; one between the two renames (or two builders
        # interleaving theirs) finds a library that does not match its sha256 and builds again
        os.replace(stamp, lib.parent / (lib.name + ".sha256"))
        os.replace(out, lib)
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


class Library:
    """A C library built (:func:`build`, into :func:`cache_dir`) and loaded with ``ctypes`` on first call, its
    functions declared by ``declare(lib)``; the call returns the ``ctypes.CDLL``, or None when it cannot be built
    here -- with one note, logged once: ``flashschnet: WHAT could not be built (...); FALLBACK``."""

    def __init__(self, source: str, name: str, declare: Callable, what: str, fallback: str):
        self.source, self.name, self.declare, self.what, self.fallback = source, name, declare, what, fallback
        self._lock = threading.Lock()
        self._lib: Optional[ctypes.CDLL] = None
        self._tried = False

    def __call__(self) -> Optional[ctypes.CDLL]:
        with self._lock:
            if not self._tried:
                self._tried = True
                try:
                    lib = ctypes.CDLL(str(build(self.source, self.name, cache_dir())))
                    self.declare(lib)
                    self._lib = lib
                except OSError as exc:
                    _log.warning(f"flashschnet: {self.what} could not be built ({exc}); {self.fallback}")
            return self._lib

    def forget(self) -> None:
        """Build again on the next call (tests)."""
        with self._lock:
            self._lib, self._tried = None, False
