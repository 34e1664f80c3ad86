"""flashschnet.openmm.reference_md: the all-atom reference MD's settings and inputs refused in one line before any
force field is set up, and nothing written. (A real reference run, its frames and forces mapped:
tests/model/train/test_train.py.)"""
from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.reference_md import reference_md

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.mark.parametrize("kw, message", [
    ({"frames": 0}, "--frames and --interval must be >= 1 and --equilibration >= 0, got 0, 500, 1000"),
    ({"interval": 0}, "--frames and --interval must be >= 1 and --equilibration >= 0, got 2, 0, 1000"),
    ({"equilibration_steps": -1}, "--frames and --interval must be >= 1 and --equilibration >= 0, got 2, 500, -1"),
    ({"dt_fs": 0.0}, "--dt must be a positive finite number (fs), got 0.0"),
    ({"temperature_K": float("nan")}, "--temperature must be a positive finite number (K), got nan"),
    ({"friction_per_ps": -1.0}, "friction must be a non-negative finite number (1/ps), got -1.0"),
    ({"platform": "NoSuchPlatform"}, "OpenMM platform 'NoSuchPlatform' is not available here (available: "),
    ({"pdb": "missing.pdb"}, "missing.pdb: OpenMM cannot read it as a PDB file"),
])
def test_bad_settings_and_inputs_are_one_line_and_write_nothing(tmp_path, kw, message):
    args = {"pdb": PDB, "out": str(tmp_path / "ref.npz"), "frames": 2, "progress": False, "echo": pytest.fail, **kw}
    with pytest.raises(InputError) as exc:
        reference_md(**args)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value), str(exc.value)
    assert list(tmp_path.iterdir()) == []
