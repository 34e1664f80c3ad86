"""Langevin integrators whose temperature is set per particle, so that the packed replicas of one Context can
each have their own temperature (parallel tempering in one Context): single stepping and multiple time stepping.

**Single stepping** (:func:`tempering_integrator`). OpenMM's ``LangevinMiddleIntegrator`` scheme (Zhang et al.,
J. Phys. Chem. A 2019; BAOAB with the thermostat in the middle of the drift), written as a
:class:`openmm.CustomIntegrator` with a per-DOF variable ``kT`` in place of the global temperature:

    v <- v + dt f/m                       (B, a full kick)
    x <- x + dt/2 v                       (A)
    v <- a v + sqrt((1 - a^2) kT/m) xi    (O, a = exp(-gamma dt), xi ~ N(0, 1) per degree of freedom)
    x <- x + dt/2 v                       (A)
    (constraints: positions, then v <- v + (x - x_unconstrained)/dt)

Why this scheme: it is the integrator flashschnet-simulate uses at one temperature (so a ladder of one rung
would sample what a plain run samples), its configurational distribution is exact for harmonic potentials
at any stable step and has the smallest step-size error among the common Langevin splittings for
anharmonic ones (Leimkuhler & Matthews 2013), which matters at the large CG time steps we run; and the
velocities it reports are those after the thermostat, whose kinetic temperature is right at large steps (a
BAOAB integrator's on-step velocities run cold there: 270 K for 300 K at 4 fs with the trp-cage model).

**Multiple time stepping** (:func:`mts_integrator`; RESPA, Tuckerman et al. 1992, with the inner steps above):
one step of length ``dt`` (the *outer* step) is

    v <- v + dt f_outer/m                 (the outer force group, once per step)
    k times:  the single step above with h = dt/k and f = f_inner (the inner force group)

This is BAOAB-RESPA (OpenMM's ``MTSLangevinIntegrator``, Lagardere et al. 2019) with its cycle started at the
outer kick, as LangevinMiddle is BAOAB started at the kick: the two give the same positions; the velocities
reported are again those after a thermostat. A run whose outer force vanishes (inner model = full model) repeats
single stepping at ``h`` to rounding without friction (test); with friction the trajectories differ in their
random numbers only (OpenMM's custom integrators draw per-DOF numbers per computation of the program, and the
outer kick is one more). Distilled multiple time stepping (DMTS) puts the
priors and a cheap distilled model in the inner group and ``full - inner`` in the outer one
(:mod:`flashschnet.openmm.dynamics`).

``kT`` is part of the integrator's state, so OpenMM's checkpoints carry it with the random generator's state: a
resumed run continues bitwise. Particles of mass 0 (frozen, dropped replicas) are not moved by OpenMM.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import openmm

from .units import BOLTZMANN_KJ_MOL_K


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
    return mts_integrator(dt_ps, 1, friction_per_ps, temperatures_K, seed, outer_group=None, inner_group=None)


def mts_integrator(dt_ps: float, inner_steps: int, friction_per_ps: float, temperatures_K: Sequence[float], seed: int,
                   outer_group: Optional[int] = 0, inner_group: Optional[int] = 1) -> openmm.CustomIntegrator:
    """The multiple-time-step integrator above: outer step ``dt_ps``, ``inner_steps`` inner steps per outer step.

    Parameters
    ----------
    dt_ps : float
        The outer (integrator) step, ps; the inner step is ``dt_ps / inner_steps``.
    inner_steps : int
        k >= 1.
    friction_per_ps : float
        Langevin friction gamma, 1/ps (the thermostat acts in every inner step).
    temperatures_K : sequence of float, [n_particles]
    seed : int
        The random generator's seed (1 .. 2**31 - 1).
    outer_group, inner_group : int or None
        Force groups of the outer kick and the inner steps; ``outer_group=None`` leaves the outer kick out and
        ``inner_group=None`` kicks with all forces (single stepping: :func:`tempering_integrator`).
    """
    k = int(inner_steps)
    if k < 1:
        raise ValueError(f"inner_steps must be >= 1, got {inner_steps}")
    integrator = openmm.CustomIntegrator(dt_ps)
    integrator.addGlobalVariable("a", float(np.exp(-friction_per_ps * float(dt_ps) / k)))
    # the inner step: the integrator's own dt when k = 1 (the variables of run directories written before
    # multiple time stepping existed, so their checkpoints load), else a global variable h = dt/k
    h = "dt"
    if k > 1:
        h = "h"
        integrator.addGlobalVariable("h", float(dt_ps) / k)
    integrator.addPerDofVariable("kT", 0.0)
    integrator.addPerDofVariable("x1", 0.0)
    integrator.addUpdateContextState()
    if outer_group is not None:
        integrator.addComputePerDof("v", f"v + dt*f{int(outer_group)}/m")
        integrator.addConstrainVelocities()
    f = "f" if inner_group is None else f"f{int(inner_group)}"
    for _ in range(k):
        integrator.addComputePerDof("v", f"v + {h}*{f}/m")
        integrator.addConstrainVelocities()
        integrator.addComputePerDof("x", f"x + 0.5*{h}*v")
        integrator.addComputePerDof("v", "a*v + sqrt((1 - a*a)*kT/m)*gaussian")
        integrator.addComputePerDof("x", f"x + 0.5*{h}*v")
        integrator.addComputePerDof("x1", "x")
        integrator.addConstrainPositions()
        integrator.addComputePerDof("v", f"v + (x - x1)/{h}")
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
