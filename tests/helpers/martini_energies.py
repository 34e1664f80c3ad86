"""MARTINI System energies grouped as GROMACS reports them (for the term-by-term comparisons with gmx_d mdrun -rerun)."""
from __future__ import annotations

import openmm
import openmm.unit as u

from flashschnet.openmm.martini.system import GROUPS


def gromacs_terms(system, pos, platform: str = "Reference") -> dict:
    """GROMACS's energy terms of ``system`` at ``pos`` (kJ/mol; virtual sites as given, like mdrun -rerun): one per
    force group, the reaction field's exclusion and self terms counted in Coulomb (SR), and the potential."""
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(pos)
    e = {name: ctx.getState(getEnergy=True, groups={g}).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
         for g, name in enumerate(GROUPS)}
    e["Coulomb (SR)"] += e.pop("Coulomb exclusions") + e.pop("Coulomb self")
    e["Potential"] = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
    return e
