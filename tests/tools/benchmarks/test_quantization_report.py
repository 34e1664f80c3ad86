"""tools/benchmarks/quantization_report.py (a maintainer's report generator; its code is
flashschnet.openmm.quantization, tested in tests/openmm/quantization/): --help run as a script."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "tools" / "benchmarks" / "quantization_report.py"


def test_help_run_as_a_script(tmp_path):
    res = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for flag in ("--out", "--variants", "--langevin-steps", "--nve-steps", "--oracle", "--quick"):
        assert flag in res.stdout
