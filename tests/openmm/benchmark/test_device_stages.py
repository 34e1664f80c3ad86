"""flashschnet.openmm.benchmark.device_stages (the device checks' environment, compile and correctness stages; the
whole stages run in tests/tools/device/test_device_checks.py's smoke run): the relative error, openmm-torch's version,
the oracle's place, and the environment stage on a CPU (nvidia-smi skipped, versions, OpenMM's platforms, the
baseline tree recorded)."""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import pytest
import torch

from flashschnet.openmm.benchmark import device_stages as ds
from flashschnet.openmm.benchmark.device_checks import Stage
from tests.conftest import ROOT


def test_rel_version_and_oracle():
    assert ds.rel(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0])) == pytest.approx(0.25)
    assert ds.openmmtorch_version(SimpleNamespace(__version__="1.10")) == "1.10"
    assert ds.oracle_path(argparse.Namespace(root=str(ROOT))).exists()


def test_environment_stage_on_a_cpu(tmp_path):
    (tmp_path / "flashschnet").mkdir()
    (tmp_path / "flashschnet" / "__init__.py").write_text("")
    (tmp_path / "COMMIT").write_text("f4fff81e\n")
    st = Stage(str(tmp_path / "env.json"), time.time() + 60)
    ds.stage_environment(argparse.Namespace(device="cpu", baseline=str(tmp_path)), st)
    assert [s["item"] for s in st.data["skips"]] == ["nvidia-smi"] and not st.data["errors"]
    got = {r["item"]: r for r in st.data["results"]}
    assert got["versions"]["torch"] == torch.__version__ and got["versions"]["cuda_available"] in (True, False)
    assert "CPU" in got["openmm platforms"]["platforms"]
    assert got["baseline tree"]["baseline_present"] is True and got["baseline tree"]["baseline_commit"] == "f4fff81e"
