"""flashschnet.openmm.doctor: the platform report on this machine (plugin load failures as doctor_explain explains
them, a torch plugin loaded again, the extra a missing GPU platform needs), the force and XML probes' results judged
(crashes, disagreement, the known XML crash as a warning), and ``python -m flashschnet.doctor`` end to end (exit 0,
the CPU platform, the TorchForce and PythonForce on CPU and Reference)."""
from __future__ import annotations

import json
import subprocess
import sys

import openmm

from flashschnet.openmm import doctor
from flashschnet.openmm.doctor import Env, platform_report
from tests.helpers.loader_messages import DRIVER, ENV, TORCH_FIRST


def test_platform_report_on_this_machine():
    rep = platform_report(Env.current())
    names = [p["name"] for p in rep["loaded"]]
    assert "Reference" in names and "CPU" in names
    assert len(rep["failures"]) == len(openmm.Platform.getPluginLoadFailures())
    assert all("\n" not in f["line"] for f in rep["failures"])
    assert all(p["torch_kernels"] for p in rep["loaded"] if p["name"] in ("Reference", "CPU"))
    if "CUDA" not in names and not any(f["platform"] == "CUDA" for f in rep["failures"]):
        assert any(n.startswith("CUDA:") and "pip install 'flashschnet[cuda" in n for n in rep["notes"]), rep["notes"]


def test_a_torch_plugin_loaded_again_after_torch_is_resolved(monkeypatch):
    monkeypatch.setattr(openmm.Platform, "getPluginLoadFailures", staticmethod(lambda: [TORCH_FIRST, DRIVER]))
    rep = platform_report(Env(torch_cuda="12.6", openmmtorch=[("acellera-openmmtorch-cu12", "1.10")],
                              openmm_version="8.6.1"))
    first, driver = rep["failures"]
    assert first["kind"] == "torch-import-order" and first.get("resolved")
    assert "loaded again after import torch" in first["line"]
    assert driver["kind"] == "driver" and not driver.get("resolved")
    # the CUDA platform failed to load: no "not installed" note for it
    assert not any(n.startswith("CUDA:") for n in rep["notes"])


def test_missing_gpu_platform_names_the_extra_for_torchs_cuda(monkeypatch):
    monkeypatch.setattr(openmm.Platform, "getPluginLoadFailures", staticmethod(lambda: []))
    rep = platform_report(Env(torch_cuda="12.8", openmmtorch=[("acellera-openmmtorch-cpu", "1.10")]))
    (cuda,) = [n for n in rep["notes"] if n.startswith("CUDA:")]
    assert "pip install 'flashschnet[cuda12]'" in cuda and "no NVIDIA driver" in cuda
    rep = platform_report(Env(torch_cuda=None, openmmtorch=[]))
    assert any("openmm-torch is not installed" in n for n in rep["notes"])


def _probe_returns(monkeypatch, results, problem):
    monkeypatch.setattr(doctor, "run_probe", lambda module, function, args, timeout: (results, problem))


def _ok(kind, energy, forces=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (-1.0, -1.0, 0.0))):
    return {"kind": kind, "status": "ok", "energy_kj": energy, "forces": [list(f) for f in forces], "device": "cpu"}


def test_a_torchforce_that_crashes_its_process_keeps_the_pythonforce_result(monkeypatch):
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0)], "crashed (SIGSEGV) after 2 s")
    out = doctor.check_forces("CPU", 60, ENV)
    assert out["python"]["status"] == "ok" and out["python"]["line"].startswith("ok (E = 1 kJ/mol)")
    assert out["torch"]["status"] == "error" and out["torch"]["line"] == "FAILS: crashed (SIGSEGV) after 2 s"
    assert "agree" not in out


def test_torchforce_and_pythonforce_must_agree(monkeypatch):
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0), _ok("torch", 1.0 + 1e-6)], None)
    out = doctor.check_forces("CPU", 60, ENV)
    assert out["torch"]["status"] == "ok" and out["agree"] and out["energy_difference_kj"] < 1e-5
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0), _ok("torch", 1.01)], None)
    out = doctor.check_forces("CPU", 60, ENV)
    assert out["torch"]["status"] == "wrong" and "PythonForce" in out["torch"]["line"]
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0), _ok("torch", float("nan"))], None)
    assert doctor.check_forces("CPU", 60, ENV)["torch"]["status"] == "wrong"
    skewed = _ok("torch", 1.0, forces=((1.0, 0.0, 0.0), (0.0, 1.5, 0.0), (-1.0, -1.5, 0.0)))
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0), skewed], None)
    assert doctor.check_forces("CPU", 60, ENV)["torch"]["status"] == "wrong"


def test_force_errors_are_explained(monkeypatch):
    err = {"kind": "torch", "status": "error", "error": "OpenMMException: Specified a Platform for a Context which "
                                                        "does not support all required kernels"}
    _probe_returns(monkeypatch, [_ok("model", 1.0), _ok("python", 1.0), err], None)
    line = doctor.check_forces("CPU", 60, ENV)["torch"]["line"]
    assert line.startswith("FAILS: OpenMMException") and "-> openmm-torch has no kernels" in line


def test_xml_round_trip_crash_is_explained(monkeypatch):
    """A crash of another pair than the known one (below) is a failure naming what flashschnet requires."""
    newer = Env(openmm_version="8.7.0", openmmtorch=[("acellera-openmmtorch-cpu", "1.11")],
                requirements={"openmm": "openmm<8.7,>=8.5"})
    _probe_returns(monkeypatch, [{"step": "serialized", "chars": 100}], "crashed (SIGSEGV) after 3 s")
    result = doctor.check_xml_round_trip(60, newer)
    assert result["status"] == "error" and not result.get("known")
    line = result["line"]
    assert line.startswith("FAILS deserializing (crashed (SIGSEGV)") and "does not match openmm 8.7.0" in line
    assert "pip install 'openmm<8.7,>=8.5'" in line
    _probe_returns(monkeypatch, [], "timed out after 60 s (a slow machine: raise --timeout)")
    assert doctor.check_xml_round_trip(60, ENV)["line"] == ("FAILS serializing: timed out after 60 s (a slow "
                                                             "machine: raise --timeout)")
    _probe_returns(monkeypatch, [{"step": "serialized"}, {"step": "done", "status": "ok"}], None)
    assert doctor.check_xml_round_trip(60, ENV)["status"] == "ok"


def test_the_known_xml_crash_is_a_warning_saying_what_to_avoid(monkeypatch):
    """openmm 8.6 + openmm-torch 1.10, the probe crashing while deserializing: a warning (flashschnet is not
    affected), what not to do in one's own code, and the verified set for those who need it (openmm-ml named only
    when installed); the crash while serializing is no known one."""
    _probe_returns(monkeypatch, [{"step": "serialized", "chars": 100}], "crashed (SIGSEGV) after 3 s")
    result = doctor.check_xml_round_trip(60, ENV)
    assert result["status"] == "warning" and result["known"]
    line = result["line"]
    assert line.startswith("WARNING: reading the XML back crashes (the probe process crashed (SIGSEGV) after 3 s)")
    for want in ("openmm 8.6.1 and acellera-openmmtorch-cpu 1.10", "SerializationNode", "flashschnet never does it",
                 "XmlSerializer.deserialize", "pickle", "pip install 'openmm==8.5.2'", "docs/install.md"):
        assert want in line, (want, line)
    assert "openmmml" not in line
    with_ml = Env(openmm_version="8.6.1", openmmtorch=[("acellera-openmmtorch-cu13", "1.10")], openmmml_version="1.8")
    assert "pip install 'openmm==8.5.2' 'openmmml==1.7'" in doctor.check_xml_round_trip(60, with_ml)["line"]
    _probe_returns(monkeypatch, [], "crashed (SIGSEGV) after 3 s")
    assert doctor.check_xml_round_trip(60, ENV)["status"] == "error"


def test_doctor_end_to_end(tmp_path):
    """``python -m flashschnet.doctor`` on this machine: exit 0, the CPU platform, the TorchForce evaluating on
    CPU and Reference, equal to the PythonForce, and the same in the JSON."""
    out = tmp_path / "doctor.json"
    res = subprocess.run([sys.executable, "-m", "flashschnet.doctor", "--json", str(out)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    text = res.stdout
    for want in ("versions", "torch", "openmm", "openmmtorch", "OpenMM platforms", "CPU            loads",
                 "Reference      loads", "CPU            TorchForce  ok", "CPU            PythonForce ok",
                 "Reference      TorchForce  ok", "torch (cpu)        ok", "triton (cpu)       GPU only",
                 "verdict: the CPU path works"):
        assert want in text, f"{want!r} not in the output:\n{text}"
    report = json.loads(out.read_text())
    forces = {f["platform"]: f for f in report["openmm"]["forces"]}
    assert forces["CPU"]["torch"]["status"] == "ok" and forces["CPU"]["python"]["status"] == "ok"
    assert forces["CPU"]["agree"] and forces["CPU"]["energy_difference_kj"] <= 1e-4
    assert abs(forces["CPU"]["torch"]["energy_kj"] - forces["Reference"]["torch"]["energy_kj"]) < 1e-4
    assert report["verdict"]["exit_status"] == 0
    # the XML round trip: ok, or with openmm 8.6 + openmm-torch 1.10 (requirements-openmm86.txt) the known crash's
    # warning (the probe process crashed, not the doctor)
    xml = report["openmm"]["xml"]
    assert xml["status"] == ("warning" if doctor.known_xml_crash_here() else "ok"), xml
    assert f"XML            System with a TorchForce through XmlSerializer and back: {xml['line']}" in text
    # one printed line per plugin load failure
    failures = report["openmm"]["platforms"]["failures"]
    lines = text.splitlines()
    if failures:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("plugin load failures"))
        shown = [ln for ln in lines[start + 1:start + 1 + len(failures)] if ln.startswith("  ")]
        assert [ln.strip() for ln in shown] == [f"{f['kind']}: {f['line']}" for f in failures]
