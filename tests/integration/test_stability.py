"""The bundled example runs stably: 10,000 steps at 4 fs, 300 K with the placeholder model, unquantized and
with channel-wise fp16 weights (the issue's target for the 16-bit variant). Minutes each: marked slow."""
from __future__ import annotations

import pytest

from conftest import EXAMPLES
from flashschnet.openmm.quantization.accuracy import langevin_check


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["none", "fp16"])
def test_example_is_stable_for_10000_steps(tmp_path, variant):
    res = langevin_check(str(EXAMPLES / "1L2Y_trpcage.pdb"), str(EXAMPLES / "trpcage_placeholder.pt"), variant,
                         10_000, str(tmp_path / variant), seed=3, report_interval=500)
    assert res["completed"] and res["frames"] == 21       # the trajectory's frames: steps 0, 500, ..., 10000
    assert res["max_bond_deviation"] < 0.25, "a CG bond stretched or compressed by more than 25%"
    assert 240.0 < res["mean_temperature_K"] < 360.0
    assert res["stable"]
