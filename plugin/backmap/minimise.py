"""The restrained energy minimisation that ends every backmapped frame: amber14-all + implicit/gbn2, harmonic
restraints on the atoms that sit on beads, OpenMM's ``LocalEnergyMinimizer``.

:class:`RestrainedMinimiser` builds the System and Context once per set of atoms and reuses them for every frame.
A frame whose start is badly clashed (two heavy atoms 1.3 A apart, their hydrogens on top of each other: seen in CA
frames, where PULCHRA's carbonyl O can sit on a proline ring) can make the minimiser fail (a NaN coordinate) or
stop far from converged. Such a frame is minimised again from its start in two stages: first in a soft system
(amber14's bonded terms, a soft repulsion between heavy atoms closer than :data:`SOFT_NM` in place of the non-bonded
and solvation terms, the same restraints; pdbfixer softens its new atoms the same way), then in the full one.
``scale`` stiffens the restraints of one call (the rebuilder's retry of a frame whose minimisation turned a CA to D).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from .checks import near_in_graph

#: heavy atoms closer than this (nm) push each other apart in the soft stage
SOFT_NM = 0.3
#: force constant of the soft repulsion, kJ/mol/nm^2
SOFT_K = 10000.0
#: the soft stage's start: every atom moved by a normal random displacement of this size (nm), from this seed
JITTER_NM = 0.001
JITTER_SEED = 0


@dataclass
class Minimised:
    """One minimisation's outcome: ``positions_nm`` [n_atoms, 3]; ``rms_force`` (kJ/mol/nm); ``failed``: the
    minimiser's message where it failed on both tries (positions then are the start); ``soft``: the frame needed
    the soft stage."""

    positions_nm: np.ndarray
    rms_force: float
    failed: Optional[str] = None
    soft: bool = False


def _restraint(openmm, k: float, atoms: Sequence[int]):
    force = openmm.CustomExternalForce("0.5*k_backmap*((x-x0)^2+(y-y0)^2+(z-z0)^2)")
    force.addGlobalParameter("k_backmap", float(k))
    for name in ("x0", "y0", "z0"):
        force.addPerParticleParameter(name)
    for i in atoms:
        force.addParticle(int(i), [0.0, 0.0, 0.0])
    return force


class RestrainedMinimiser:
    """Minimises frames of one topology at a time (rebuilt when the atoms change).

    Parameters
    ----------
    forcefield : openmm.app.ForceField
    platform : openmm.Platform
    restraint_k, tolerance, max_iterations, cutoff_nm
        As :class:`~flashschnet.openmm.backmap.rebuild.BackmapSettings` says.
    properties : dict, optional
        Platform properties of the Contexts (e.g. ``{"Threads": "1"}``).
    """

    def __init__(self, forcefield, platform, restraint_k: float, tolerance: float, max_iterations: int,
                 cutoff_nm: float, properties: Optional[dict] = None):
        self.forcefield, self.platform, self.properties = forcefield, platform, dict(properties or {})
        self.restraint_k, self.tolerance, self.max_iterations = restraint_k, tolerance, max_iterations
        self.cutoff_nm = cutoff_nm
        self._key = None
        self._full = None
        self._held = {}            # (atom names, restrained atoms) -> {"full": ..., "soft": ...}
        self.exclude = None        # pairs of atoms bonded or 1-3 (the clash check's exclusions), per topology

    def _build(self, topology, mapped: Sequence[int]) -> None:
        """Make the Contexts of ``topology`` with restraints on ``mapped`` the current ones (built once per pair;
        a rebuilder uses one or two sets of restrained atoms)."""
        import openmm
        import openmm.app as app

        names = tuple((a.residue.index, a.name) for a in topology.atoms())
        key = (names, tuple(int(i) for i in mapped))
        if key == self._key:
            return
        if self._held and next(iter(self._held))[0] != names:
            self._held.clear()                # other atoms: the old Contexts are of no more use
        if not self._held:
            self.exclude = near_in_graph(topology)
        if key not in self._held:
            cut = float(self.cutoff_nm)
            system = self.forcefield.createSystem(topology, constraints=None, **(
                {"nonbondedMethod": app.CutoffNonPeriodic, "nonbondedCutoff": cut * openmm.unit.nanometer}
                if cut > 0 else {"nonbondedMethod": app.NoCutoff}))
            restraint = _restraint(openmm, self.restraint_k, mapped)
            system.addForce(restraint)
            integrator = openmm.VerletIntegrator(0.001)
            context = openmm.Context(system, integrator, self.platform, self.properties)
            self._held[key] = {"full": (context, restraint, integrator), "soft": None}
        self._key, self._topology, self._mapped = key, topology, list(mapped)
        self._full = self._held[key]["full"]

    def _soft_context(self):
        """The soft system (bonded terms, soft heavy-atom repulsion, restraints) of the current topology."""
        import openmm
        import openmm.app as app

        held = self._held[self._key]
        if held["soft"] is not None:
            return held["soft"]
        system = self.forcefield.createSystem(self._topology, constraints=None, nonbondedMethod=app.NoCutoff)
        keep = (openmm.HarmonicBondForce, openmm.HarmonicAngleForce, openmm.PeriodicTorsionForce)
        for i in reversed(range(system.getNumForces())):
            if not isinstance(system.getForce(i), keep):
                system.removeForce(i)
        soft = openmm.CustomNonbondedForce(f"{SOFT_K}*heavy1*heavy2*step({SOFT_NM}-r)*({SOFT_NM}-r)^2")
        soft.addPerParticleParameter("heavy")
        for atom in self._topology.atoms():
            soft.addParticle([0.0 if atom.element is not None and atom.element.symbol == "H" else 1.0])
        soft.createExclusionsFromBonds([(a.index, b.index) for a, b in self._topology.bonds()], 3)
        soft.setNonbondedMethod(openmm.CustomNonbondedForce.CutoffNonPeriodic)
        soft.setCutoffDistance(SOFT_NM)
        system.addForce(soft)
        restraint = _restraint(openmm, self.restraint_k, self._mapped)
        system.addForce(restraint)
        integrator = openmm.VerletIntegrator(0.001)
        held["soft"] = (openmm.Context(system, integrator, self.platform, self.properties), restraint, integrator)
        return held["soft"]

    def _run(self, held, start, targets: np.ndarray, scale: float = 1.0) -> Tuple[np.ndarray, float, Optional[str]]:
        import openmm
        import openmm.unit as unit

        context, restraint = held[0], held[1]
        for k, (i, p) in enumerate(zip(self._mapped, targets)):
            restraint.setParticleParameters(k, int(i), [float(v) for v in p])
        restraint.updateParametersInContext(context)
        context.setParameter("k_backmap", float(self.restraint_k) * scale)
        context.setPositions(start)
        try:
            openmm.LocalEnergyMinimizer.minimize(context, self.tolerance, self.max_iterations)
        except openmm.OpenMMException as exc:      # e.g. "Particle coordinate is NaN"
            return None, float("inf"), (str(exc).splitlines()[0] if str(exc) else "OpenMMException")
        state = context.getState(getPositions=True, getForces=True)
        xyz = np.asarray(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer), dtype=np.float64)
        forces = state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
        rms = float(np.sqrt(np.mean(np.square(forces))))
        if not (np.isfinite(xyz).all() and np.isfinite(rms)):
            return None, float("inf"), "Particle coordinate is NaN"
        return xyz, rms, None

    def minimise(self, topology, positions, mapped: Sequence[int], targets_nm: np.ndarray,
                 scale: float = 1.0) -> Minimised:
        """Minimise ``positions`` (an OpenMM Quantity of ``topology``'s atoms) with atoms ``mapped`` restrained to
        ``targets_nm`` [len(mapped), 3] (force constant ``scale`` times the settings'); the soft stage first where the
        direct try fails or does not converge."""
        import openmm.unit as unit

        self._build(topology, mapped)
        targets = np.asarray(targets_nm, dtype=np.float64)
        xyz, rms, failed = self._run(self._full, positions, targets, scale)
        if failed is None and rms <= self.tolerance:
            return Minimised(xyz, rms)
        first = (xyz, rms, failed)
        # atoms exactly on top of each other have no direction to move apart in (a NaN even in the soft system):
        # the soft stage starts from the positions moved by a fixed random 0.001 nm (seeded: reproducible)
        start = np.asarray(positions.value_in_unit(unit.nanometer), dtype=np.float64)
        jitter = np.random.default_rng(JITTER_SEED).normal(scale=JITTER_NM, size=start.shape)
        soft_xyz, _, soft_failed = self._run(self._soft_context(), (start + jitter) * unit.nanometer, targets, scale)
        if soft_failed is None:
            xyz2, rms2, failed2 = self._run(self._full, soft_xyz * unit.nanometer, targets, scale)
            if failed2 is None and (first[2] is not None or rms2 < first[1]):
                return Minimised(xyz2, rms2, soft=True)
        if first[2] is None:
            return Minimised(first[0], first[1])
        return Minimised(start, float("inf"), failed=first[2])
