"""flashschnet.fused.emulation: the operand roundings of each emulated product precision on chosen bit patterns
(tf32 to nearest with ties away from zero, tf32 by truncation, bfloat16 to nearest even; inf and NaN kept, a
rounding up to inf), the names it knows, and the error measures. The emulated energies and forces themselves
(against the torch backend and the kernels' tf32 prediction): tests/tools/device/test_tf32_accuracy.py."""
from __future__ import annotations

import math

import pytest
import torch

from flashschnet.fused import emulation as em


def test_roundings_of_each_precision():
    u = 2.0 ** -10                                            # one tf32 ulp at 1
    x = torch.tensor([1 + u / 2, 1 + u + u / 2, 1 + u / 4, -(1 + u / 2), 1 + 3 * u / 4, 3.0], dtype=torch.float32)
    assert em.round_tf32(x).tolist() == [1 + u, 1 + 2 * u, 1.0, -(1 + u), 1 + u, 3.0]     # ties away from zero
    assert em.truncate_tf32(x).tolist() == [1.0, 1 + u, 1.0, -1.0, 1.0, 3.0]             # low 13 bits dropped
    b = 2.0 ** -7                                             # one bfloat16 ulp at 1
    y = torch.tensor([1 + b / 2, 1 + b + b / 2, 1 + 3 * b / 4, -(1 + b / 2)], dtype=torch.float32)
    assert em.round_bf16(y).tolist() == [1.0, 1 + 2 * b, 1 + b, -1.0]                    # ties to even
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), torch.finfo(torch.float32).max])
    for fn in (em.round_tf32, em.truncate_tf32):
        out = fn(special)
        assert out[0] == math.inf and out[1] == -math.inf and bool(torch.isnan(out[2]))
    assert em.round_tf32(special)[3] == math.inf                                         # the largest float rounds up
    assert em.truncate_tf32(special)[3] < torch.finfo(torch.float32).max
    assert em.round_tf32(x.double()).dtype == torch.float32
    assert em.rounding("ieee")(x) is x and em.rounding("tf32") is em.round_tf32
    assert set(em.ROUNDINGS) == set(em.PRECISIONS)
    with pytest.raises(ValueError, match="unknown product precision 'fp16'"):
        em.rounding("fp16")
    with pytest.raises(ValueError, match="unknown implementation 'mlcg'"):
        em.energy_forces("mlcg", None, None, None, "ieee")


def test_error_measures():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 2.0], [3.0, 2.0]], dtype=torch.float64)
    assert em.rel(a, b) == 2.0 / 3.0                         # max |a - b| / max |b|
    assert em.rel_rmse(a, b) == pytest.approx(2.0 / math.sqrt(18.0), rel=1e-15)
    e, e_true = torch.tensor([1.5, -2.0], dtype=torch.float32), torch.tensor([1.0, -2.0], dtype=torch.float64)
    out = em.errors(e, a.float(), e_true, b)
    assert out == {"energy_rel_err_vs_float64": 0.25, "forces_rel_err_vs_float64": 2.0 / 3.0,
                   "forces_rel_rmse_vs_float64": pytest.approx(2.0 / math.sqrt(18.0)),
                   "energy_max_abs_err": 0.5, "forces_max_abs_err": 2.0}
