"""PyTorch's thread count of a CG run: the cores that no other program keeps busy when the run starts.

Why (measured with ``tools/benchmarks/threads_benchmark.py``; the table: docs/benchmarks.md, "Threads on an idle and a
loaded machine"). PyTorch's pip wheels run their parallel regions on GNU OpenMP (libgomp), whose idle threads
spin for about 3 ms before they sleep. On a 2-core machine with nothing else running, PyTorch's default of 2
threads is the fastest choice for the exact trp-cage model (1 thread: 25-35% slower). With one core kept busy by
another program, the thread that shares that core is preempted for whole scheduler slices and every parallel
region waits for it: 2 threads ran 2-5x slower than 1 (and much slower already beside a core other programs use
only part of the time). Making the threads sleep at once (``OMP_WAIT_POLICY=PASSIVE``) softens that cliff but
halves the speed on the idle machine; spinning forever (``ACTIVE``) gains about 10% on the idle machine but is
2-4x slower on the loaded one (and the policy is fixed when PyTorch's OpenMP library loads, so a run cannot follow
load that appears later); no fixed thread count or wait policy keeps within 20% of the best choice on both. So the count follows the machine: :func:`run_threads` samples ``/proc/stat`` for
:data:`SAMPLE_S` seconds once the run has read its input and runs PyTorch on the cores that other programs use
less than :data:`BUSY_CORE` of (at least one, at most PyTorch's default). A core counts as busy early because
the errors cost unequally: 1 thread on an idle machine loses at most about a third, 2 threads beside a busy
core lose half to four fifths.

Explicit choices win: ``--threads N`` (``RunSettings.threads``) or ``OMP_NUM_THREADS``. The wait policy and
OpenMM's CPU threads stay the libraries' defaults (OpenMM's CPU platform, which computes the priors, showed no
difference beyond the measurements' noise). The count is chosen once, at the start (load that starts later is
not followed; with the count chosen for you a long run on a shared machine may want ``--threads 1``), and is not
recorded in run.json: a resumed run chooses again. A run's result does not depend on its PyTorch thread count: the
fused pair loops run over fixed segments of the system (:class:`~flashschnet.fused.pair_loops.Segments`), and
tests/model/kernels/test_cpu_pairs.py checks 1, 2 and 3 threads bitwise.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Dict, Iterable, Mapping, Optional, Tuple

#: seconds of /proc/stat sampling at a run's start
SAMPLE_S = 0.2
#: a core other programs use at least this much of (in cores, over the sample) is not given a PyTorch thread
BUSY_CORE = 0.25


def _cpu_times(stat_path: str, cpus: Iterable[int]) -> Optional[Tuple[float, float]]:
    """(busy, total) clock ticks of ``cpus`` from a ``/proc/stat``-style file; busy is all but idle and iowait.
    None where the file or a CPU's line is missing."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = total = 0.0
    seen = 0
    try:
        with open(stat_path) as fh:
            for line in fh:
                parts = line.split()
                if parts and parts[0] in wanted:
                    ticks = [float(x) for x in parts[1:9]]
                    total += sum(ticks)
                    busy += sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0.0)
                    seen += 1
    except (OSError, ValueError):
        return None
    return (busy, total) if seen == len(wanted) and seen else None


def available_cpus() -> Tuple[int, ...]:
    """The CPUs this process may run on (its affinity; all of them where the OS does not say)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def busy_cores(sample_s: float = SAMPLE_S, cpus: Optional[Iterable[int]] = None, stat_path: str = "/proc/stat",
               sleep: Callable[[float], None] = time.sleep,
               own_cpu_s: Callable[[], float] = time.process_time) -> Optional[float]:
    """How many of ``cpus`` (default :func:`available_cpus`) other processes keep busy: their busy time over
    ``sample_s`` seconds (this process's own CPU time taken off), in cores. None where ``stat_path`` cannot be
    read (not Linux) or no time passed."""
    cpus = tuple(available_cpus() if cpus is None else cpus)
    own0, t0 = own_cpu_s(), time.perf_counter()
    before = _cpu_times(stat_path, cpus)
    sleep(sample_s)
    after = _cpu_times(stat_path, cpus)
    own, wall = own_cpu_s() - own0, time.perf_counter() - t0
    if before is None or after is None or after[1] <= before[1] or wall <= 0:
        return None
    # total ticks / CPUs = the sample's wall time in ticks (no clock-tick constant needed)
    busy = (after[0] - before[0]) / ((after[1] - before[1]) / len(cpus))
    return max(0.0, busy - own / wall)


def choose_torch_threads(requested: Optional[int], default: int, busy: Optional[float], cores: int,
                         environ: Mapping[str, str]) -> Tuple[int, str]:
    """PyTorch's thread count of a run, and why (``"requested"``, ``"OMP_NUM_THREADS"``, ``"default"``,
    ``"busy"``): ``requested`` (``--threads``) if given; else ``default`` (PyTorch's) if the user set
    ``OMP_NUM_THREADS`` or the load is unknown (``busy`` None); else the ``cores`` that other processes do not keep
    busy (``busy`` cores, each started one from :data:`BUSY_CORE` on, counted as whole), at least 1 and at most
    ``default``."""
    if requested:
        return int(requested), "requested"
    if environ.get("OMP_NUM_THREADS", "").strip():
        return default, "OMP_NUM_THREADS"
    if busy is None:
        return default, "default"
    free = cores - int(busy + 1.0 - BUSY_CORE)
    if free >= default:
        return default, "default"
    return max(1, free), "busy"


def _torch_threads_now() -> Optional[int]:
    import sys

    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


#: PyTorch's default thread count (read when this module is imported, which flashschnet does after torch) and
#: what :func:`run_threads` set last; a count that differs from the last one, found when nothing was requested,
#: was set by the program itself and becomes the default
_STATE: Dict[str, Optional[int]] = {"default": _torch_threads_now(), "last": None}


def run_threads(requested: Optional[int], echo: Callable[[str], None] = print,
                environ: Optional[Mapping[str, str]] = None) -> int:
    """Set PyTorch's thread count for a run (:func:`choose_torch_threads`; the load sampled with
    :func:`busy_cores` only when nothing was chosen) and return it. Echoes a note when busy cores lowered it."""
    import torch

    env = os.environ if environ is None else environ
    current = torch.get_num_threads()
    if _STATE["default"] is None or (not requested and current != _STATE["last"]):
        _STATE["default"] = current
    default = int(_STATE["default"])
    cpus = available_cpus()
    explicit = bool(requested) or bool(env.get("OMP_NUM_THREADS", "").strip())
    busy = None if explicit or default <= 1 else busy_cores(cpus=cpus)      # one thread: nothing to lower
    threads, why = choose_torch_threads(requested, default, busy, len(cpus), env)
    if threads != current:
        torch.set_num_threads(threads)
    _STATE["last"] = threads
    if why == "busy":
        echo(f"note: {busy:.1f} of {len(cpus)} cores busy with other programs: PyTorch on {threads} thread"
             f"{'s' if threads != 1 else ''} instead of {default} (--threads N to choose)")
    return threads
