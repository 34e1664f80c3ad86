"""flashschnet.doctor (the doctor's part without OpenMM): probes in a fresh process survive crashes and
timeouts, the GPU install named by torch's CUDA, the openmm-torch installation notes, the backend probe. The
OpenMM part (flashschnet.openmm.doctor): tests/openmm/test_doctor.py."""
from __future__ import annotations

import json

from flashschnet import doctor


def test_a_probe_returns_what_it_emitted():
    results, problem = doctor.run_probe("flashschnet.doctor", "emit", [{"a": 1}], timeout=300)
    assert problem is None and results == [{"a": 1}]


def test_a_crashing_probe_is_one_line_not_a_crash():
    results, problem = doctor.run_probe("os", "abort", [], timeout=60)
    assert results == [] and problem.startswith("crashed (SIGABRT)") and "\n" not in problem


def test_a_slow_probe_times_out():
    results, problem = doctor.run_probe("time", "sleep", [30], timeout=1)
    assert results == [] and problem.startswith("timed out after 1 s") and "--timeout" in problem


def test_a_failing_probe_reports_its_last_error_line():
    results, problem = doctor.run_probe("json", "loads", ["{not json"], timeout=60)
    assert problem.startswith("exit status 1: json.decoder.JSONDecodeError")


def test_the_gpu_install_follows_torchs_cuda():
    assert doctor.cuda_install_command("12.8") == "pip install 'flashschnet[cuda12]'"
    assert doctor.cuda_install_command("13.0") == "pip install 'flashschnet[cuda13]'"
    assert doctor.cuda_install_command(None) == "pip install 'flashschnet[cuda13]'"


def test_openmmtorch_notes():
    # the [cuda13] extra's layout (the core's CPU build + the CUDA build of the same release): nothing to say
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10"), ("acellera-openmmtorch-cu13", "1.10")],
                                   "13.0") is None
    two = doctor.openmmtorch_note([("acellera-openmmtorch-cu12", "1.10"), ("acellera-openmmtorch-cu13", "1.10")],
                                  "13.0")
    assert "2 openmm-torch builds that clash" in two and "pip uninstall -y acellera-openmmtorch-cu12" in two
    assert "acellera-openmmtorch-cu13==1.10" in two
    mixed = doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.9"), ("acellera-openmmtorch-cu13", "1.10")],
                                    "13.0")
    assert "clash" in mixed, mixed
    cpu = doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], "13.0", driver=True)
    assert "no CUDA kernels" in cpu and cpu.endswith("for the CUDA platform: pip install 'flashschnet[cuda13]'")
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], "13.0", driver=False) is None
    other = doctor.openmmtorch_note([("acellera-openmmtorch-cu12", "1.10")], "13.0")
    assert "pip uninstall -y acellera-openmmtorch-cu12 && pip install 'flashschnet[cuda13]'" in other
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], None) is None
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cu13", "1.10")], "13.0") is None
    assert doctor.openmmtorch_note([], "13.0") is None
