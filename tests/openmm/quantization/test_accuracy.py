"""flashschnet.openmm.quantization.accuracy (what the quantization report measures): the NVE drift fit recovers a
known slope, and a flat series has no measurable drift."""
from __future__ import annotations


def test_drift_fit_recovers_a_known_slope():
    import numpy as np

    from flashschnet.openmm.quantization.accuracy import drift_fit

    t = np.linspace(0.0, 10.0, 201)                        # ps
    noise = np.random.default_rng(0).normal(0.0, 0.5, t.size)
    fit = drift_fit(t, 3.0 + 40.0 * t * 1e-3 + noise)      # 40 kJ/mol/ns
    assert abs(fit["slope"] - 40.0) < 3 * fit["stderr"] and 5.0 < fit["stderr"] < 30.0
    flat = drift_fit(t, 3.0 + noise)
    assert abs(flat["slope"]) < 3 * flat["stderr"]
