"""flashschnet.openmm.units: the one place a model's units meet OpenMM's (the length and energy factors)."""
from __future__ import annotations

import pytest

from flashschnet.openmm.units import conversion_factors


def test_units_are_converted_in_one_place():
    assert conversion_factors({"length": "angstrom", "energy": "kcal/mol"}) == pytest.approx((0.1, 4.184), rel=1e-15)
    assert conversion_factors({"length": "nanometer", "energy": "kJ/mol"}) == (1.0, 1.0)
