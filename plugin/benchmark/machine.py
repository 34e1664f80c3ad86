"""What machine a benchmark ran on: CPU model, cores, memory, device, library versions."""
from __future__ import annotations

import os
import platform as _platform
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Union


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or "unknown"


def machine_info(device: str, threads: int) -> Dict[str, Any]:
    """The ``machine`` section of a benchmark report (``memory_gb`` where /proc/meminfo is readable,
    ``openmm_version`` None where openmm cannot be imported)."""
    import torch

    info: Dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": _platform.python_version(),
        "torch_version": torch.__version__,
        "threads": threads,
        "device": device,
        "device_name": cpu_model() if device == "cpu" else torch.cuda.get_device_name(0),
        "platform": _platform.platform(),
    }
    try:
        with open("/proc/meminfo") as fh:
            info["memory_gb"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import openmm

        info["openmm_version"] = openmm.version.version
    except Exception:
        info["openmm_version"] = None
    return info


def run_machine(root: Union[str, Path]) -> Dict[str, Any]:
    """The ``machine`` record of a maintainer's benchmark run (``tools/``): CPU, cores, Python, the UTC date and
    the short commit of the checkout ``root`` (None outside a git checkout)."""
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": _platform.python_version(),
            "commit": commit.stdout.strip() or None, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
