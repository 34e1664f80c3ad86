"""flashschnet.scripts.doctor (flashschnet-doctor's command line): the exit status from the CPU results (0 TorchForce
works, 3 only the PythonForce, 1 nothing), the report's layout, the one-line refusals (an unwritable --json, a bad
--timeout), and a --json that cannot be written after the checks (exit 6). The run on this machine:
tests/openmm/test_doctor.py."""
from __future__ import annotations

import errno
import os

import pytest

import flashschnet.atomic as atomic
from tests.helpers.cli_errors import error_line
from flashschnet.scripts import doctor as cli


def _forces(platform, torch_status="ok", python_status="ok"):
    def one(status):
        return {"status": status, "line": "ok (E = 1 kJ/mol)" if status == "ok" else "FAILS: boom",
                "energy_kj": 1.0}
    return {"platform": platform, "device": "cpu", "python": one(python_status), "torch": one(torch_status)}


def _openmm(*forces, failures=()):
    loaded = [{"name": f["platform"], "speed": 1.0, "torch_kernels": True} for f in forces]
    notes = ["CUDA: not installed: pip install 'flashschnet[cuda13]'"]
    return {"platforms": {"loaded": loaded, "failures": list(failures), "notes": notes},
            "forces": list(forces), "xml": {"status": "ok", "line": "ok"}}


@pytest.mark.parametrize("torch_status, python_status, status", [
    ("ok", "ok", cli.EXIT_OK), ("ok", "error", cli.EXIT_OK), ("error", "ok", cli.EXIT_FALLBACK_ONLY),
    ("wrong", "ok", cli.EXIT_FALLBACK_ONLY), ("error", "error", cli.EXIT_BROKEN)])
def test_exit_status_follows_the_cpu_platform(torch_status, python_status, status):
    om = _openmm(_forces("Reference"), _forces("CPU", torch_status, python_status))
    v = cli.verdict(om)
    assert v["exit_status"] == status and "\n" not in v["line"]
    if status == cli.EXIT_FALLBACK_ONLY:
        assert "--network-force python" in v["line"]


def test_gpu_failures_do_not_change_the_exit_status():
    assert cli.verdict(_openmm(_forces("CPU"), _forces("CUDA", "error", "error")))["exit_status"] == cli.EXIT_OK


def test_no_cpu_platform_or_no_openmm_is_broken():
    assert cli.verdict(_openmm(_forces("Reference")))["exit_status"] == cli.EXIT_BROKEN
    assert cli.verdict(None)["exit_status"] == cli.EXIT_BROKEN
    assert {cli.EXIT_OK, cli.EXIT_BROKEN, cli.EXIT_USAGE, cli.EXIT_FALLBACK_ONLY} == {0, 1, 2, 3}


def test_report_layout():
    failure = {"kind": "driver", "line": "OpenMM's CUDA platform (libOpenMMCUDA.so) is installed but ...",
               "platform": "CUDA", "torch_plugin": False}
    om = _openmm(_forces("Reference"), _forces("CPU", "error", "ok"), failures=[failure])
    versions = {"python": "3.11.7", "executable": "/venv/bin/python", "flashschnet": "0.1.0", "torch": "2.11.0",
                "torch_cuda": None, "cuda_available": False, "cuda_devices": [], "triton": None, "numpy": "2.4.0",
                "openmm": "8.6.1", "openmmml": None, "openmmtorch": "1.10",
                "openmmtorch_distributions": [{"name": "acellera-openmmtorch-cpu", "version": "1.10"}],
                "openmm_platform_packages": [], "nvidia_driver": False, "openmmtorch_note": None}
    backends = [{"backend": "torch", "device": "cpu", "status": "ok", "line": "ok (E = 1 kcal/mol)"}]
    text = cli.format_report({"versions": versions, "openmm": om, "backends": backends, "verdict": cli.verdict(om)})
    lines = text.splitlines()
    assert "  triton         not installed" in lines and "  openmmml       not installed" in lines
    assert any(ln.startswith("  openmmtorch    1.10 (module openmmtorch from acellera-openmmtorch-cpu 1.10)")
               for ln in lines)
    assert "  driver: OpenMM's CUDA platform (libOpenMMCUDA.so) is installed but ..." in lines
    assert "  CPU            TorchForce  FAILS: boom" in lines
    assert lines[-1].startswith("verdict: only the fallback works") and lines[-1].endswith("(exit status 3)")
    text = cli.format_report({"versions": versions, "openmm": None, "openmm_error": "flashschnet.openmm cannot be "
                              "imported (...)", "backends": backends, "verdict": cli.verdict(None)})
    assert "  error          flashschnet.openmm cannot be imported (...)" in text.splitlines()


def test_unwritable_json_is_refused_in_one_line_before_any_check(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "collect", lambda timeout: pytest.fail("ran the checks"))
    assert cli.main(["--json", str(tmp_path)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("flashschnet-doctor: error: --json") and "is a directory" in err and "\n" not in err


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "soon"])
def test_bad_timeout_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--timeout", bad])
    assert info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_doctor_json_that_cannot_be_written(tmp_path, capsys, monkeypatch, write_faults):
    import flashschnet.scripts.doctor as doctor

    result = {"verdict": {"exit_status": doctor.EXIT_OK, "line": "the CPU path works"}}
    monkeypatch.setattr(doctor, "collect", lambda timeout: result)
    monkeypatch.setattr(doctor, "format_report", lambda r: "report")
    write_faults.fail("d.json.tmp", module=atomic, errno=errno.EROFS, on_open=True)
    assert doctor.main(["--json", str(tmp_path / "d.json")]) == 6
    line = error_line(capsys.readouterr().err, "flashschnet-doctor")
    assert "d.json" in line and "Read-only file system (EROFS)" in line and "choose another --json" in line
    assert os.listdir(tmp_path) == []
