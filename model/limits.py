"""Limits on user input that the libraries underneath cannot take, checked before any work starts.

Each check raises :class:`~flashschnet.errors.InputError` with one line naming the option and the limit.

* seeds: 1 .. 2**31 - 1. OpenMM takes a C ``int`` and treats 0 as "pick a random seed" (a run that cannot be
  repeated), so 0, negative and larger values are refused.
* threads: 1 .. 1024 (PyTorch and OpenMM's CPU platform start that many threads).
* memory: a job whose memory can be estimated from its size (beads x replicas, frames x atoms) is refused
  when even a lower bound of what it needs exceeds the memory available now (``MemAvailable`` of
  ``/proc/meminfo``; no check where that cannot be read), instead of being killed mid-run.
"""
from __future__ import annotations

import math
from typing import Optional

from .errors import InputError

SEED_MAX = 2**31 - 1
THREADS_MAX = 1024

#: a lower bound on the memory one CG bead of a run needs, bytes: positions, velocities and forces in OpenMM
#: and PyTorch, its share of the pair list and of the network's activations, its topology entry. Measured:
#: about 27 KiB per bead (trp-cage example model, fused CPU path, 64-256 replicas); the bound is well below
#: that, so no run that fits is refused.
MIN_BYTES_PER_BEAD = 8 * 1024

#: the largest particle count an OpenMM System can index (a C ``int``)
MAX_PARTICLES = 2**31 - 1


def check_seed(seed: Optional[int], option: str = "--seed") -> None:
    """``seed`` is None (pick one) or in 1 .. 2**31 - 1."""
    if seed is not None and not 1 <= seed <= SEED_MAX:
        raise InputError(f"{option} must be between 1 and {SEED_MAX} (OpenMM seeds are C ints and 0 means a random "
                         f"seed; leave {option} out for that), got {seed}")


def check_threads(threads: Optional[int], option: str = "--threads") -> None:
    """``threads`` is None (the library's default) or in 1 .. 1024."""
    if threads is not None and not 1 <= threads <= THREADS_MAX:
        raise InputError(f"{option} must be between 1 and {THREADS_MAX}, got {threads}")


def check_finite(value: float, option: str, unit: str = "", positive: bool = False, nonnegative: bool = False) -> None:
    """``value`` is a finite number (and positive or non-negative if asked)."""
    ok = math.isfinite(value) and (not positive or value > 0.0) and (not nonnegative or value >= 0.0)
    if not ok:
        kind = "a positive" if positive else "a non-negative" if nonnegative else "a"
        raise InputError(f"{option} must be {kind} finite number{' (' + unit + ')' if unit else ''}, got {value}")


def available_memory_bytes() -> Optional[int]:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes, or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits_in_memory(need_bytes: int, what: str, hint: str) -> None:
    """Raise when ``need_bytes`` (a lower bound) exceeds the memory available now.

    Parameters
    ----------
    need_bytes : int
        Lower bound of the memory the job needs, bytes.
    what : str
        The job, for the message (e.g. ``"--replicas 100000 x 97 beads"``).
    hint : str
        What to do instead (e.g. ``"use fewer replicas"``).
    """
    free = available_memory_bytes()
    if free is not None and need_bytes > free:
        raise InputError(f"{what} need at least {need_bytes / 2**30:.3g} GiB of memory, more than the "
                         f"{free / 2**30:.3g} GiB available; {hint}")


def check_replicas(replicas: int, n_beads: int, option: str = "--replicas") -> None:
    """``replicas`` packed copies of ``n_beads`` beads fit in one OpenMM System and (by the lower bound
    :data:`MIN_BYTES_PER_BEAD`) in the memory available now."""
    if replicas < 1:
        raise InputError(f"{option} must be >= 1, got {replicas}")
    total = replicas * n_beads
    if total > MAX_PARTICLES:
        raise InputError(f"{option} {replicas} x {n_beads} beads = {total} particles, more than an OpenMM System "
                         f"holds ({MAX_PARTICLES}); use fewer replicas")
    check_fits_in_memory(total * MIN_BYTES_PER_BEAD, f"{option} {replicas} x {n_beads} beads",
                         "use fewer replicas (or run them as several jobs)")
