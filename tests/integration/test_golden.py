"""Behaviour unchanged across refactors: every golden output (tests/helpers/golden.py; captured on main with
``python tools/golden.py``) recomputed and compared -- energies and forces of every backend, precision, weight
variant and compression, through the model and through OpenMM, and the DCD coordinates of short CG, tempering and
MARTINI runs. Bitwise on the machine and library versions that captured them; elsewhere within each output's
tolerance (another CPU's vector instructions round differently), and the test says which comparison it made."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from helpers import golden

pytestmark = pytest.mark.usefixtures("one_torch_thread")


PART = "model"      # this file: the model's and OpenMM's energies and forces; test_golden_runs.py: the runs


def recompute(tmp_path_factory, part: str):
    """The golden outputs of ``part`` computed now (fails when the stored ones are missing)."""
    if not golden.GOLDEN.exists():
        pytest.fail(f"{golden.GOLDEN} missing: capture it with python tools/golden.py")
    return golden.compute(tmp_path_factory.mktemp("golden"), part=part)


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory):
    return recompute(tmp_path_factory, PART)


def test_every_golden_output_is_reproduced(recomputed):
    check(*recomputed, part=PART)


def check(values, skipped, part):
    """Compare the recomputed ``values`` of ``part`` with the stored golden arrays (see the module docstring)."""
    stored = np.load(golden.GOLDEN)
    names = [k for k in stored.files if golden.part_of(k) == part]
    meta = json.loads((golden.GOLDEN.parent / "fingerprint.json").read_text())
    bitwise = meta["fingerprint"] == golden.fingerprint()
    missing = sorted(set(names) - set(values) - {k for k in names
                                                 if any(k.startswith(s.split(":")[0]) for s in skipped)})
    assert not missing, f"golden outputs no longer computed: {missing}"
    assert not set(values) - set(names), f"new outputs without a golden value: {set(values) - set(names)}"
    differ = []
    for key in sorted(set(values) & set(names)):
        a, b = np.asarray(values[key]), stored[key]
        if a.shape != b.shape:
            differ.append(f"{key}: shape {a.shape} != {b.shape}")
        elif bitwise:
            if a.dtype != b.dtype or a.tobytes() != b.tobytes():
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).max()
                differ.append(f"{key}: not bitwise equal (max |diff| {diff:.3g})")
        else:
            rel = np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-300)
            if rel > golden.tolerance(key):
                differ.append(f"{key}: relative difference {rel:.3g} > {golden.tolerance(key):g}")
    assert not differ, "\n".join(differ)
    if not bitwise:
        warnings.warn(f"golden outputs compared within tolerance, not bitwise: captured on {meta['fingerprint']}, "
                      f"this machine is {golden.fingerprint()}")
    if skipped:
        warnings.warn(f"golden outputs not recomputed here: {skipped}")
