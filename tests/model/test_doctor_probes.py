"""flashschnet.doctor (the doctor's part without OpenMM): probes in a fresh process survive crashes and
timeouts, the GPU install named by torch's CUDA, the openmm-torch installation notes, the backend probe."""
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
    two = doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10"), ("acellera-openmmtorch-cu13", "1.10")], "13.0")
    assert "2 openmm-torch builds" in two and "pip uninstall -y acellera-openmmtorch-cpu" in two
    assert "acellera-openmmtorch-cu13==1.10" in two
    cpu = doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], "13.0", driver=True)
    assert "no CUDA kernels" in cpu
    assert "pip uninstall -y acellera-openmmtorch-cpu && pip install 'flashschnet[cuda13]'" in cpu
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], "13.0", driver=False) is None
    other = doctor.openmmtorch_note([("acellera-openmmtorch-cu12", "1.10")], "13.0")
    assert "pip install acellera-openmmtorch-cu13==1.10" in other
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cpu", "1.10")], None) is None
    assert doctor.openmmtorch_note([("acellera-openmmtorch-cu13", "1.10")], "13.0") is None
    assert doctor.openmmtorch_note([], "13.0") is None


def test_flashschnet_requirements_are_read_from_its_metadata():
    reqs = doctor.flashschnet_requirements()
    assert reqs["openmm"].startswith("openmm") and reqs["torch"].startswith("torch")
    assert all(";" not in r for r in reqs.values())


def test_versions_name_what_is_installed():
    v = doctor.versions()
    assert v["torch"] and v["numpy"] and v["flashschnet"]
    for key in ("triton", "openmm", "openmmml", "openmmtorch"):
        assert key in v          # a version or None ("not installed")


def test_backend_probe_on_cpu(capsys):
    doctor.backend_probe("cpu")
    rows = [json.loads(ln[len(doctor.MARKER):]) for ln in capsys.readouterr().out.splitlines()
            if ln.startswith(doctor.MARKER)]
    assert [r["backend"] for r in rows] == ["reference", "torch"]          # triton: GPU only, not run on CPU
    assert all(r["status"] == "ok" and r["rel_error"] < 1e-5 for r in rows), rows
