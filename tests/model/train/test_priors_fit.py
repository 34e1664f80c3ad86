"""flashschnet.train.priors_fit: Boltzmann-inverted priors. The Fourier fit of a dihedral's histogram recovers a
known potential; priors fitted to a reference run (bonds from its mean and variance):
tests/model/train/test_fit.py (they share its all-atom reference run)."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.train.priors_fit import KB_KCAL, _fourier_fit


def test_fourier_fit_recovers_a_known_dihedral_potential():
    kT = KB_KCAL * 300.0
    rng = np.random.default_rng(3)
    grid = np.linspace(-np.pi, np.pi, 20001)
    u = 1.2 * np.cos(grid) - 0.7 * np.sin(2 * grid)                  # kcal/mol
    p = np.exp(-u / kT)
    samples = rng.choice(grid, size=400_000, p=p / p.sum())
    k1, k2, _ = _fourier_fit(samples, kT, n_degs=3)
    assert k2[0] == pytest.approx(1.2, abs=0.08) and k1[1] == pytest.approx(-0.7, abs=0.08)
    assert abs(k1[0]) < 0.08 and abs(k2[1]) < 0.08 and abs(k1[2]) < 0.08 and abs(k2[2]) < 0.08
