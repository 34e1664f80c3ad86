"""flashschnet.openmm.integrators: Langevin integrators with a temperature per particle, single and multiple time
stepping. Each particle's temperature is what it was set to and what the thermostat gives it (three groups of
free particles fully rethermalised in one step); the multiple-time-step integrator kicks with the outer force group
once per step and moves with the inner group's forces (a constant force in each, no friction: exact velocities)."""
from __future__ import annotations

import numpy as np
import openmm
import pytest

from flashschnet.openmm.integrators import (mts_integrator, particle_temperatures, set_particle_temperatures,
                                            tempering_integrator)
from flashschnet.openmm.units import BOLTZMANN_KJ_MOL_K


def _context(system, integrator, positions):
    ctx = openmm.Context(system, integrator, openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(positions)
    ctx.setVelocities(np.zeros_like(positions))
    return ctx


def test_each_particle_is_thermalised_at_its_own_temperature():
    """1000 free particles at each of 100, 300 and 900 K, friction 1e4/ps (a = exp(-40): the velocities are drawn
    afresh each step): the kinetic temperature of each group after one step is its own within 10 % (its sampling
    error is 2.6 %), and the temperatures read back are the ones set."""
    per, temps, mass = 1000, np.array([100.0, 300.0, 900.0]), 12.0
    target = np.repeat(temps, per)
    system = openmm.System()
    for _ in target:
        system.addParticle(mass)
    integrator = tempering_integrator(0.004, 1.0e4, target, seed=7)
    assert particle_temperatures(integrator) == pytest.approx(target, rel=1e-12)
    ctx = _context(system, integrator, np.zeros((len(target), 3)))
    integrator.step(1)
    v = ctx.getState(getVelocities=True).getVelocities(asNumpy=True)._value
    kinetic_t = (mass * (v ** 2).sum(axis=1)).reshape(3, per).mean(axis=1) / (3 * BOLTZMANN_KJ_MOL_K)
    assert kinetic_t == pytest.approx(temps, rel=0.1)
    set_particle_temperatures(integrator, target[::-1])
    assert particle_temperatures(integrator) == pytest.approx(target[::-1], rel=1e-12)


def _pushed(group, integrator):
    """A particle of mass 2 pushed by +3 kJ/mol/nm along x (a force in ``group``), one step from rest."""
    system = openmm.System()
    system.addParticle(2.0)
    force = openmm.CustomExternalForce("-3*x")
    force.addParticle(0, [])
    force.setForceGroup(group)
    system.addForce(force)
    ctx = _context(system, integrator, np.zeros((1, 3)))
    integrator.step(1)
    state = ctx.getState(getPositions=True, getVelocities=True)
    return state.getVelocities(asNumpy=True)._value[0, 0], state.getPositions(asNumpy=True)._value[0, 0]


def test_the_outer_group_kicks_once_a_step_and_the_inner_group_moves_each_inner_step():
    dt, k = 0.01, 2
    # outer force: one kick of dt f/m before the k inner steps, which drift by dt/k each
    v, x = _pushed(0, mts_integrator(dt, k, 0.0, [300.0], seed=1, outer_group=0, inner_group=1))
    assert v == pytest.approx(dt * 3 / 2, rel=1e-12) and x == pytest.approx(dt * dt * 3 / 2, rel=1e-12)
    # inner force: a kick of (dt/k) f/m in each inner step, then half a drift, another half after the thermostat
    v, x = _pushed(1, mts_integrator(dt, k, 0.0, [300.0], seed=1, outer_group=0, inner_group=1))
    h = dt / k
    assert v == pytest.approx(k * h * 3 / 2, rel=1e-12) and x == pytest.approx(h * h * 3 / 2 * (1 + 2), rel=1e-12)
    # a force in neither group moves nothing; single stepping kicks with every force
    assert _pushed(5, mts_integrator(dt, k, 0.0, [300.0], seed=1)) == (0.0, 0.0)
    v, x = _pushed(5, tempering_integrator(dt, 0.0, [300.0], seed=1))
    assert v == pytest.approx(dt * 3 / 2, rel=1e-12) and x == pytest.approx(dt * dt * 3 / 2, rel=1e-12)
    with pytest.raises(ValueError, match="inner_steps must be >= 1"):
        mts_integrator(dt, 0, 1.0, [300.0], seed=1)
