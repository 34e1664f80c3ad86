"""AR(1) series, whose statistical inefficiency is known exactly (the sampling tests, tests/openmm/)."""
from __future__ import annotations

import numpy as np
from scipy.signal import lfilter


def ar1(phi: float, shape, seed: int) -> np.ndarray:
    """AR(1) series [..., n] with unit-variance noise, started in its stationary state (500 frames dropped)."""
    e = np.random.default_rng(seed).standard_normal(tuple(shape[:-1]) + (shape[-1] + 500,))
    return lfilter([1.0], [1.0, -phi], e, axis=-1)[..., 500:]
