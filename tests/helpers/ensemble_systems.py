"""Packed test systems with known Boltzmann distributions, as ensemble builders
(:class:`flashschnet.openmm.ensemble.block.BlockSystem`): replica ``r`` is ``particles`` independent particles
in a 3-D harmonic well U = k/2 |x|^2 (kJ/mol, nm). Picklable (Dask workers build them too)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import openmm
import openmm.app as app


def _topology(n: int) -> app.Topology:
    top = app.Topology()
    chain = top.addChain()
    for i in range(n):
        res = top.addResidue("HO", chain)
        top.addAtom("X", app.element.carbon, res)
    return top


class HarmonicBuilder:
    """``builder(replicas) -> BlockSystem`` of ``replicas`` x ``particles`` harmonic oscillators.

    ``energies`` is computed in numpy from the positions (the same formula as the CustomExternalForce).
    ``unstable_replica``: that replica (index within the block) sits on an inverted well, U = -k/2 |x|^2, so it
    runs away exponentially and its force soon exceeds any --max-force (tests of --on-blowup)."""

    def __init__(self, particles: int = 1, k: float = 100.0, mass: float = 12.0, start_nm: float = 0.05,
                 unstable_replica: Optional[int] = None):
        self.particles, self.k, self.mass, self.start_nm = int(particles), float(k), float(mass), float(start_nm)
        self.unstable_replica = unstable_replica

    def spring(self, replicas: int) -> np.ndarray:
        """Each replica's force constant [replicas]."""
        k = np.full(replicas, self.k)
        if self.unstable_replica is not None and self.unstable_replica < replicas:
            k[self.unstable_replica] = -self.k
        return k

    def __call__(self, replicas: int):
        from flashschnet.openmm.ensemble.block import BlockSystem

        n = replicas * self.particles
        system = openmm.System()
        for _ in range(n):
            system.addParticle(self.mass)
        force = openmm.CustomExternalForce("0.5*kp*(x*x + y*y + z*z)")
        force.addPerParticleParameter("kp")
        springs = self.spring(replicas)
        for i in range(n):
            force.addParticle(i, [float(springs[i // self.particles])])
        system.addForce(force)
        p = self.particles
        return BlockSystem(system=system, topology=_topology(n), trajectory_topology=_topology(p), particles=p,
                           masses_amu=np.full(p, self.mass), positions_nm=np.full((n, 3), self.start_nm),
                           energies=_Energies(springs, replicas, p))


class _Energies:
    """Per-replica harmonic energies (picklable)."""

    def __init__(self, springs, replicas, particles):
        self.springs, self.replicas, self.particles = np.asarray(springs, dtype=float), replicas, particles

    def __call__(self, pos_nm):
        x = np.asarray(pos_nm, dtype=np.float64).reshape(self.replicas, self.particles, 3)
        return 0.5 * self.springs * (x * x).sum(axis=(1, 2))


#: particles per walker of :func:`ladder_plan`'s runs (test_block.py, test_driver.py)
PARTICLES_PER_WALKER = 8


def ladder_plan(out, steps, **kw):
    """A checked 4-walker tempering plan (300-450 K, 2 blocks, an exchange every 10 steps, a frame every 50 and a
    checkpoint every 100), with ``kw`` replacing any of its fields."""
    from flashschnet.openmm.ensemble import EnsemblePlan, check_plan

    args = dict(out=str(out), steps=steps, temperatures_K=[300.0, 340.0, 390.0, 450.0], exchange_interval=10,
                report_interval=50, checkpoint_interval=100, dt_fs=4.0, friction_per_ps=2.0, seed=17, blocks=2)
    args.update(kw)
    p = EnsemblePlan(**args)
    check_plan(p)
    return p
