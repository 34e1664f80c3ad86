"""A platform or backend this machine lacks is one line naming why and the extra to install
(``flashschnet.openmm.platforms``, ``flashschnet.backends.gpu_hint``)."""
from __future__ import annotations

import pytest
import torch

import openmm
from tests.conftest import EXAMPLES
from flashschnet.backends import cuda_extra, resolve_backend
from flashschnet.errors import InputError
from flashschnet.openmm import platforms
from flashschnet.scripts.simulate import main

CUDA_PLUGIN = "/venv/lib/python3.11/site-packages/OpenMM.libs/lib/plugins/libOpenMMCUDA.so"


def _failures(monkeypatch, *lines):
    monkeypatch.setattr(openmm.Platform, "getPluginLoadFailures", staticmethod(lambda: tuple(lines)))
    monkeypatch.setattr(platforms, "loaded_platforms", lambda: ["Reference", "CPU"])


def test_the_extra_follows_torchs_cuda_version(monkeypatch):
    for version, extra in (("12.8", "cuda12"), ("13.0", "cuda13"), (None, "cuda13"), ("11.8", "cuda13")):
        monkeypatch.setattr(torch.version, "cuda", version)
        assert cuda_extra() == extra


def test_cuda_not_installed_names_the_extra(monkeypatch):
    import flashschnet.doctor

    _failures(monkeypatch)
    monkeypatch.setattr(flashschnet.doctor, "nvidia_driver_present", lambda: True)
    msg = platforms.missing_platform("CUDA")
    assert msg == ("OpenMM platform 'CUDA' is not available here (available: Reference, CPU): the CUDA platform is "
                   f"not installed; pip install 'flashschnet[{cuda_extra()}]'")


def test_cuda_neither_installed_nor_possible_without_a_driver_suggests_no_install(monkeypatch):
    """No CUDA plugin and no NVIDIA driver: the extra cannot help here, so the line says what is missing."""
    import flashschnet.doctor

    _failures(monkeypatch)
    monkeypatch.setattr(flashschnet.doctor, "nvidia_driver_present", lambda: False)
    msg = platforms.missing_platform("CUDA")
    assert "this machine has no NVIDIA driver (libcuda.so.1 does not load)" in msg and "pip install" not in msg, msg
    assert "--platform CPU or Reference" in msg and "flashschnet-doctor" in msg, msg


def test_platform_names_in_any_case():
    assert [platforms.platform_name(n) for n in ("cuda", "reference", "Cpu", "CPU", "opencl", "Vulkan")] == \
        ["CUDA", "Reference", "CPU", "CPU", "OpenCL", "Vulkan"]


def test_cuda_without_a_driver_says_so_and_installs_nothing(monkeypatch):
    _failures(monkeypatch, f"Error loading library {CUDA_PLUGIN}: libcuda.so.1: cannot open shared object file: "
                           "No such file or directory")
    msg = platforms.missing_platform("CUDA")
    assert "installed but this machine has no NVIDIA driver" in msg and "pip install" not in msg, msg


def test_cuda_plugin_failing_otherwise_is_explained_as_the_doctor_explains_it(monkeypatch):
    from flashschnet.openmm.doctor import Env, explain_failure

    nvrtc = (f"Error loading library {CUDA_PLUGIN}: libnvrtc.so.13: cannot open shared object file: "
             "No such file or directory")
    opencl = "Error loading library /x/libOpenMMOpenCL.so: libOpenCL.so.1: cannot open shared object file"
    _failures(monkeypatch, nvrtc, opencl)
    msg = platforms.missing_platform("CUDA")
    assert msg == ("OpenMM platform 'CUDA' is not available here (available: Reference, CPU): "
                   + explain_failure(nvrtc, Env.current())["line"]), msg
    assert "missing the CUDA 13 library libnvrtc.so.13: pip install 'flashschnet[cuda13]'" in msg, msg
    assert "needs an OpenCL runtime (libOpenCL.so.1 not found)" in platforms.missing_platform("OpenCL")


@pytest.mark.skipif("CUDA" in platforms.loaded_platforms(), reason="the CUDA platform loads on this machine")
def test_simulate_on_a_missing_cuda_platform_names_the_extra(tmp_path, capsys):
    rc = main([str(EXAMPLES / "1L2Y_trpcage.pdb"), "--model", str(EXAMPLES / "trpcage_placeholder.pt"),
               "--steps", "10", "--out", str(tmp_path / "o"), "--platform", "CUDA", "--backend", "triton", "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("flashschnet-simulate: error: OpenMM platform 'CUDA' is not available here"), err
    assert "flashschnet[cuda1" in err[-1] or "no NVIDIA driver" in err[-1], err
    assert not (tmp_path / "o").exists()       # refused before anything is written


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_triton_backend_without_a_gpu_names_the_extra(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(InputError, match=r"needs a CUDA device .*pip install 'flashschnet\[cuda1[23]\]'"):
        resolve_backend("triton", "cpu")


def test_a_run_records_the_platform_as_openmm_spells_it(tmp_path):
    from flashschnet.openmm.simulate import RunSettings

    s = RunSettings(pdb=str(EXAMPLES / "1L2Y_trpcage.pdb"), model=str(EXAMPLES / "trpcage_placeholder.pt"),
                    out=str(tmp_path / "o"), steps=10, platform="reference")
    s.validate()
    assert s.platform == "Reference"
