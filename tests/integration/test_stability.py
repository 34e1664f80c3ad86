"""The bundled example runs stably at 4 fs, 300 K with the placeholder model: 10,000 steps unquantized, as a user
runs it (the float32 filter tables, the default), and 2,500 with channel-wise fp16 weights on the exact filter
network (whose forces on this model are within 1 % relative RMSE of float32's, tests/model/nn/test_quant.py; the
10,000-step run of every 16-bit variant on the exact network is a row of tools/benchmarks/quantization_report.py's
sweep, docs/quantization.md). About two minutes: slow."""
from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.quantization.accuracy import langevin_check


@pytest.mark.slow
@pytest.mark.parametrize("variant,steps,compress", [("none", 10_000, "auto"), ("fp16", 2_500, "none")])
def test_example_is_stable(tmp_path, variant, steps, compress):
    res = langevin_check(str(EXAMPLES / "1L2Y_trpcage.pdb"), str(EXAMPLES / "trpcage_placeholder.pt"), variant,
                         steps, str(tmp_path / variant), seed=3, report_interval=500, compress=compress)
    assert res["completed"] and res["frames"] == steps // 500 + 1   # the trajectory's frames: steps 0, 500, ...
    assert res["max_bond_deviation"] < 0.25, "a CG bond stretched or compressed by more than 25%"
    assert 240.0 < res["mean_temperature_K"] < 360.0
    assert res["stable"]
