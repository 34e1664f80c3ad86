"""A Langevin integrator whose temperature is set per particle, so that the packed replicas of one Context can
each have their own temperature (parallel tempering in one Context).

We chose OpenMM's ``LangevinMiddleIntegrator`` scheme (Zhang et al., J. Phys. Chem. A 2019; BAOAB with the
thermostat in the middle of the drift), written as a :class:`openmm.CustomIntegrator` with a per-DOF variable
``kT`` in place of the global temperature:

    v <- v + dt f/m                       (B, a full kick)
    x <- x + dt/2 v                       (A)
    v <- a v + sqrt((1 - a^2) kT/m) xi    (O, a = exp(-gamma dt), xi ~ N(0, 1) per degree of freedom)
    x <- x + dt/2 v                       (A)
    (constraints: positions, then v <- v + (x - x_unconstrained)/dt)

Why this scheme: it is the integrator flashschnet-simulate uses at one temperature (so a ladder of one rung
would sample what a plain run samples), its configurational distribution is exact for harmonic potentials
at any stable step and has the smallest step-size error among the common Langevin splittings for
anharmonic ones (Leimkuhler & Matthews 2013), which matters at the large CG time steps we run. ``kT`` is
part of the integrator's state, so OpenMM's checkpoints carry it with the random generator's state: a
resumed run continues bitwise. Particles of mass 0 (frozen, dropped replicas) are not moved by OpenMM.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import openmm

from ..units import BOLTZMANN_KJ_MOL_K


def tempering_integrator(dt_ps: float, friction_per_ps: float, temperatures_K: Sequence[float],
                         seed: int) -> openmm.CustomIntegrator:
    """The integrator above, with particle ``i`` at ``temperatures_K[i]`` (set with
    :func:`set_particle_temperatures`; any Context made with it keeps them).

    Parameters
    ----------
    dt_ps : float
        Time step, ps.
    friction_per_ps : float
        Langevin friction gamma, 1/ps.
    temperatures_K : sequence of float, [n_particles]
    seed : int
        The random generator's seed (1 .. 2**31 - 1).
    """
    integrator = openmm.CustomIntegrator(dt_ps)
    integrator.addGlobalVariable("a", float(np.exp(-friction_per_ps * dt_ps)))
    integrator.addPerDofVariable("kT", 0.0)
    integrator.addPerDofVariable("x1", 0.0)
    integrator.addUpdateContextState()
    integrator.addComputePerDof("v", "v + dt*f/m")
    integrator.addConstrainVelocities()
    integrator.addComputePerDof("x", "x + 0.5*dt*v")
    integrator.addComputePerDof("v", "a*v + sqrt((1 - a*a)*kT/m)*gaussian")
    integrator.addComputePerDof("x", "x + 0.5*dt*v")
    integrator.addComputePerDof("x1", "x")
    integrator.addConstrainPositions()
    integrator.addComputePerDof("v", "v + (x - x1)/dt")
    integrator.setRandomNumberSeed(int(seed))
    set_particle_temperatures(integrator, temperatures_K)
    return integrator


def set_particle_temperatures(integrator: openmm.CustomIntegrator, temperatures_K: Sequence[float]) -> None:
    """Set each particle's temperature (K) [n_particles] (the per-DOF ``kT``, kJ/mol)."""
    kt = BOLTZMANN_KJ_MOL_K * np.asarray(temperatures_K, dtype=np.float64)
    integrator.setPerDofVariableByName("kT", [openmm.Vec3(t, t, t) for t in kt.tolist()])


def particle_temperatures(integrator: openmm.CustomIntegrator) -> np.ndarray:
    """Each particle's temperature (K) [n_particles], read back from the integrator."""
    kt = np.asarray([v[0] for v in integrator.getPerDofVariableByName("kT")], dtype=np.float64)
    return kt / BOLTZMANN_KJ_MOL_K
