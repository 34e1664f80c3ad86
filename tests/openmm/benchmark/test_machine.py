"""flashschnet.openmm.benchmark.machine (what machine a benchmark ran on): the CPU model and the report's
``machine`` section -- cores, the threads and device asked for, library versions, memory."""
from __future__ import annotations

import os
import platform

import torch

from flashschnet.openmm.benchmark.machine import cpu_model, machine_info


def test_machine_section_of_a_cpu_run():
    info = machine_info("cpu", 3)
    assert info["threads"] == 3 and info["device"] == "cpu"
    assert info["cpu_model"] == cpu_model() == info["device_name"] and cpu_model().strip() == cpu_model() != ""
    assert info["cores"] == os.cpu_count() and 1 <= info["cores_available"] <= info["cores"]
    assert info["torch_version"] == torch.__version__ and info["python"] == platform.python_version()
    if os.path.exists("/proc/meminfo"):
        assert 0.1 < info["memory_gb"] < 1e5
    try:
        import openmm
    except ImportError:
        assert info["openmm_version"] is None
    else:
        assert info["openmm_version"] == openmm.version.version


def test_run_machine_names_the_checkouts_commit(tmp_path):
    import subprocess

    from tests.conftest import ROOT
    from flashschnet.openmm.benchmark.machine import run_machine

    info = run_machine(ROOT)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert info["commit"] == (head.stdout.strip() or None) and info["cpu"] == cpu_model()
    assert info["cores"] == os.cpu_count() and info["python"] == platform.python_version()
    assert info["date"].endswith(" UTC") and run_machine(tmp_path)["commit"] is None       # not a checkout
