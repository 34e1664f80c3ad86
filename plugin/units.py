"""The one place where a model's own units meet OpenMM's (nm, kJ/mol, ps), and the units runs record.

Everything that crosses the boundary -- the network's positions and forces, the priors' parameters --
gets its factors from :func:`conversion_factors`.
"""
from __future__ import annotations

from typing import Dict, Tuple

import openmm.unit as u

#: the units of the numbers runs record and compute with: energies (kJ/mol), forces (kJ/mol/nm), and Boltzmann's
#: constant times Avogadro's (kJ/mol/K; kT of a walker, the thermostat, a temperature from kinetic energy)
KJ_MOL = u.kilojoule_per_mole
KJ_MOL_NM = u.kilojoule_per_mole / u.nanometer
BOLTZMANN_KJ_MOL_K = (u.BOLTZMANN_CONSTANT_kB * u.AVOGADRO_CONSTANT_NA).value_in_unit(KJ_MOL / u.kelvin)

_LENGTH = {"angstrom": u.angstrom, "nanometer": u.nanometer}
_ENERGY = {"kcal/mol": u.kilocalorie_per_mole, "kJ/mol": u.kilojoule_per_mole}


def conversion_factors(units: Dict[str, str]) -> Tuple[float, float]:
    """Return ``(length_to_nm, energy_to_kj)``: nanometres per model length unit and kJ/mol per model
    energy unit (mlcg models: 0.1 and 4.184)."""
    try:
        length = _LENGTH[units["length"]]
        energy = _ENERGY[units["energy"]]
    except KeyError as exc:
        raise ValueError(f"unknown model unit {exc.args[0]!r}; known: {sorted(_LENGTH)} and {sorted(_ENERGY)}") from None
    return (1.0 * length).value_in_unit(u.nanometer), (1.0 * energy).value_in_unit(u.kilojoule_per_mole)
