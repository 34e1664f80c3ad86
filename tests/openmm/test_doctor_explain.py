"""flashschnet.openmm.doctor_explain: every kind of plugin load failure explained in one line naming what to run (fed
the loader's real messages), force errors given a hint, the known XML crash told by the versions, and Env read from
the installed versions. The loader's messages and the environment ENV: tests/helpers/loader_messages.py (the
doctor's too, test_doctor.py)."""
from __future__ import annotations

import pytest

from flashschnet.openmm import doctor_explain
from flashschnet.openmm.doctor_explain import Env, explain_error, explain_failure
from tests.helpers.loader_messages import (CORE_MOVED, CUFFT12, DEPENDS, DRIVER, ENV, GLIBC, GLIBCXX, NVRTC, OPENCL,
                                           OPENMM_SYMBOL, OPENMM_SYMBOL_IN_TORCH, PLUGINS, TORCH_CUDA, TORCH_FIRST,
                                           TORCH_SYMBOL)

CPU_TORCH = Env(torch_version="2.11.0+cpu", torch_cuda=None, openmm_version="8.6.1",
                openmmtorch=[("acellera-openmmtorch-cu13", "1.10")], driver=True)

#: message -> (env, kind, text the line must hold)
CASES = {
    "driver": (DRIVER, ENV, "driver", "no NVIDIA driver"),
    "opencl": (OPENCL, ENV, "opencl-runtime", "apt-get install ocl-icd-libopencl1"),
    "depends": (DEPENDS, ENV, "depends", "libOpenMMCUDA.so"),
    "nvrtc": (NVRTC, ENV, "missing-library", "pip install 'flashschnet[cuda13]'"),
    "cufft-cuda12": (CUFFT12, ENV, "missing-library", "pip install 'flashschnet[cuda12]'"),
    "torch-abi": (TORCH_SYMBOL, ENV, "abi", "pip install --force-reinstall --no-deps acellera-openmmtorch-cpu==1.10"),
    "openmm-abi-in-torch-plugin": (OPENMM_SYMBOL_IN_TORCH, ENV, "abi", "pip install 'openmm<8.6,>=8.5'"),
    "openmm-abi": (OPENMM_SYMBOL, ENV, "abi", "pip install --force-reinstall 'openmm==8.6.1' 'OpenMM-CUDA-13==8.6.1'"),
    "glibcxx": (GLIBCXX, ENV, "libstdcxx", "conda install -c conda-forge 'libstdcxx-ng>=13'"),
    "glibc": (GLIBC, ENV, "glibc", "GLIBC_2.28"),
    "torch-first": (TORCH_FIRST, ENV, "torch-import-order", "import torch first"),
    "core-library": (CORE_MOVED, ENV, "missing-library",
                     "pip install --force-reinstall --no-deps acellera-openmmtorch-cpu==1.10"),
    "torch-cuda": (TORCH_CUDA, CPU_TORCH, "torch-cuda", "pip uninstall -y acellera-openmmtorch-cu13"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_kind_of_failure_is_explained_in_one_line(case):
    message, env, kind, text = CASES[case]
    out = explain_failure(message, env)
    assert out["kind"] == kind, out
    assert text in out["line"], out["line"]
    assert "\n" not in out["line"] and len(out["line"]) < 400
    assert out["library"].startswith(PLUGINS) and "Error loading" not in out["line"]


def test_the_explanations_name_the_platform_and_the_plugin():
    assert "OpenMM's CUDA platform (libOpenMMCUDA.so)" in explain_failure(DRIVER, ENV)["line"]
    assert "nothing to install here" in explain_failure(DRIVER, ENV)["line"]
    torch_plugin = explain_failure(TORCH_SYMBOL, ENV)
    assert torch_plugin["torch_plugin"] and torch_plugin["platform"] == "Reference"
    assert "another torch than torch 2.11.0+cu130" in torch_plugin["line"]
    assert "another OpenMM than openmm 8.6.1" in explain_failure(OPENMM_SYMBOL_IN_TORCH, ENV)["line"]
    # the CUDA major comes from the library's soname when it says it, else from torch's CUDA
    assert "[cuda12]" in explain_failure(NVRTC.replace(".so.13", ".so.12"), ENV)["line"]
    assert "torch here is built with CUDA 13.0" in explain_failure(NVRTC.replace(".so.13", ".so.12"), ENV)["line"]
    assert "[cuda12]" in explain_failure(NVRTC.replace(".so.13", ".so"), Env(torch_cuda="12.8"))["line"]


def test_unrecognised_failures_still_get_one_line():
    out = explain_failure("Error loading library /x/libOpenMMFoo.so: something unexpected happened", ENV)
    assert out["kind"] == "unknown" and "something unexpected happened" in out["line"] and "pip install" in out["line"]
    out = explain_failure("not a loader message at all", Env())
    assert out["kind"] == "unknown" and "\n" not in out["line"]


def test_force_errors_get_a_hint():
    assert "[cuda12]" in explain_error("Error initializing CUDA: CUDA_ERROR_INSUFFICIENT_DRIVER (35)", ENV)
    assert "nvidia-smi" in explain_error("Error initializing CUDA: CUDA_ERROR_NO_DEVICE (100) at ...", ENV)
    assert "plugin failures" in explain_error("OpenMMException: Specified a Platform for a Context which does not "
                                              "support all required kernels", ENV)
    assert explain_error("ValueError: something else", ENV) == ""


@pytest.mark.parametrize("openmm_version, builds, known", [
    ("8.6.1", [("acellera-openmmtorch-cpu", "1.10")], True),
    ("8.6.0", [("acellera-openmmtorch-cu13", "1.10"), ("acellera-openmmtorch-cpu", "1.10")], True),
    ("8.6.2rc1", [("acellera-openmmtorch-cu12", "1.10.post1")], True),
    ("8.5.2", [("acellera-openmmtorch-cpu", "1.10")], False),       # the verified set
    ("8.6.1", [("acellera-openmmtorch-cpu", "1.11")], False),       # a later build (against 8.6, presumably)
    ("8.6.1", [("openmmtorch", "1.10")], False),                    # conda-forge builds against the installed openmm
    ("8.6.1", [], False),
    (None, [("acellera-openmmtorch-cpu", "1.10")], False),
])
def test_the_known_xml_crash_is_told_by_the_versions(openmm_version, builds, known):
    env = Env(openmm_version=openmm_version, openmmtorch=builds)
    assert (doctor_explain.known_xml_crash(env) is not None) is known


def test_env_reads_openmmml():
    assert Env.current({"openmm": "8.6.1", "openmmml": "1.8"}).openmmml_version == "1.8"

