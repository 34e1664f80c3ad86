"""What every reporter here shares: OpenMM's reporting schedule and the units of the numbers they record."""
from __future__ import annotations

import openmm.unit as u

KJ_MOL = u.kilojoule_per_mole
KJ_MOL_NM = u.kilojoule_per_mole / u.nanometer
BOLTZMANN_KJ_MOL_K = (u.BOLTZMANN_CONSTANT_kB * u.AVOGADRO_CONSTANT_NA).value_in_unit(KJ_MOL / u.kelvin)


def steps_to_next(simulation, interval: int) -> int:
    """Steps from the simulation's current step to the next multiple of ``interval``."""
    return interval - simulation.currentStep % interval
