"""flashschnet.openmm.ensemble.block: a block of walkers (one packed Context) on the harmonic test systems
(tests/helpers/ensemble_systems.py): a temperature change rescales the velocities and sets each particle's kT. The
driver's runs of blocks (resume, rollback, per-walker --on-blowup): test_driver.py."""
from __future__ import annotations

import os

import numpy as np
import openmm.unit as u
import pytest

from flashschnet.openmm.ensemble import block_specs
from flashschnet.openmm.ensemble.block import WalkerBlock
from flashschnet.openmm.integrators import particle_temperatures
from tests.helpers.ensemble_systems import HarmonicBuilder, ladder_plan, PARTICLES_PER_WALKER

P = PARTICLES_PER_WALKER


def test_set_temperatures_rescales_velocities_and_sets_each_particles_kT(tmp_path):
    spec = block_specs(ladder_plan(tmp_path, 10))[0]
    os.makedirs(tmp_path, exist_ok=True)
    block = WalkerBlock(HarmonicBuilder(particles=P), spec)
    block.start()
    ctx = block.simulation.context
    v0 = ctx.getState(getVelocities=True).getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)
    assert block.temperatures() == pytest.approx([300.0, 340.0])
    block.set_temperatures([340.0, 300.0])
    v1 = ctx.getState(getVelocities=True).getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)
    np.testing.assert_allclose(v1[:P], v0[:P] * np.sqrt(340.0 / 300.0), rtol=1e-12)
    np.testing.assert_allclose(v1[P:], v0[P:] * np.sqrt(300.0 / 340.0), rtol=1e-12)
    np.testing.assert_allclose(particle_temperatures(block.integrator), [340.0] * P + [300.0] * P, rtol=1e-12)
    block.close()
