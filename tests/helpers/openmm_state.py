"""An OpenMM Context on a named platform and its energy and forces in OpenMM's units (test_force.py, test_system.py)."""
from __future__ import annotations

import openmm
import openmm.unit as u

KJ = u.kilojoule_per_mole
KJ_NM = u.kilojoule_per_mole / u.nanometer


def verlet_context(system, platform: str) -> openmm.Context:
    """A Context of ``system`` with a Verlet integrator (1 fs) on the platform named ``platform``."""
    return openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))


def energy_forces(ctx, groups=-1):
    """(potential energy in kJ/mol, forces [n, 3] in kJ/mol/nm) of the force ``groups`` of ``ctx``."""
    st = ctx.getState(getEnergy=True, getForces=True, groups=groups)
    return st.getPotentialEnergy().value_in_unit(KJ), st.getForces(asNumpy=True).value_in_unit(KJ_NM)
