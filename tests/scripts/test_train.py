"""flashschnet.scripts.train (flashschnet-train's command line): the outputs are checked before any work (``fit``
into an --out that holds a trained model, ``md`` into a folder: one line, exit status 2, nothing touched), and
--device is cpu, cuda or cuda:N. The three steps through this command: tests/model/train/test_train.py."""
from __future__ import annotations

import os

import pytest

from tests.conftest import EXAMPLES
from tests.helpers.cli_errors import error_line
from flashschnet.scripts.train import build_parser, main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def test_outputs_are_checked_before_any_work(tmp_path, capsys):
    out = tmp_path / "model"
    out.mkdir()
    (out / "best.pt").write_bytes(b"trained")
    assert main(["fit", PDB, "--data", str(tmp_path / "missing.npz"), "--out", str(out), "--quiet"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-train")
    assert line == f"flashschnet-train: error: {out}: already holds a trained model; choose another --out", line
    assert os.listdir(out) == ["best.pt"] and (out / "best.pt").read_bytes() == b"trained"
    assert main(["md", PDB, "--out", str(out), "--frames", "1", "--quiet"]) == 2
    line = error_line(capsys.readouterr().err, "flashschnet-train")
    assert f"--out {out}: is a directory; give a file name" in line, line
    assert os.listdir(out) == ["best.pt"]


def test_device_is_cpu_cuda_or_cuda_n(capsys):
    for device in ("cpu", "cuda", "cuda:1"):
        args = build_parser().parse_args(["fit", PDB, "--data", "d.npz", "--out", "o", "--device", device])
        assert args.device == device
    for bad in ("gpu", "cuda:", "cuda:x"):
        with pytest.raises(SystemExit) as info:
            main(["fit", PDB, "--data", "d.npz", "--out", "o", "--device", bad])
        assert info.value.code == 2
        assert f"argument --device: must be cpu, cuda or cuda:N, got '{bad}'" in capsys.readouterr().err
