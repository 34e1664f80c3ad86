"""CG training data from an all-atom reference run (``.npz`` of :mod:`flashschnet.openmm.reference_md`): mapped
positions (Angstrom) and aggregated forces (kcal/mol/Angstrom), the units of mlcg models."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .forcemap import build_force_map

NM_TO_A = 10.0
KJ_TO_KCAL = 1.0 / 4.184


@dataclass
class CGData:
    """Mapped frames. ``positions`` [F, N, 3] Angstrom, ``forces`` [F, N, 3] kcal/mol/Angstrom (float64),
    ``temperature_K`` of the reference run."""

    positions: np.ndarray
    forces: np.ndarray
    temperature_K: float

    @property
    def n_frames(self) -> int:
        return len(self.positions)


def load_reference(path: str) -> dict:
    """The arrays of a reference-run ``.npz`` (no pickles), with one-line errors."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: reference data not found (make it with `flashschnet-train md`)")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError) as exc:      # EOFError: an empty file
        raise InputError(f"{path}: not a reference-data .npz ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    need = ("positions_nm", "forces_kj_mol_nm", "atoms", "bonds", "temperature_K")
    missing = [k for k in need if k not in data]
    if missing:
        raise InputError(f"{path}: lacks {', '.join(missing)} (not written by `flashschnet-train md`)")
    return data


def map_reference(path: str, mol) -> CGData:
    """Map a reference run onto the CG molecule ``mol`` (from :func:`flashschnet.cg.map_pdb` of the same PDB):
    slice positions and aggregated forces, converted to Angstrom and kcal/mol."""
    data = load_reference(path)
    atoms = [(int(r), str(rn), str(n), str(e)) for r, rn, n, e in data["atoms"]]
    fmap = build_force_map(atoms, [tuple(b) for b in data["bonds"]], mapping=mol.mapping)
    if fmap.n_beads != mol.n_beads:
        raise InputError(f"{path}: the all-atom system maps to {fmap.n_beads} beads but {mol.source or 'the PDB'} "
                         f"to {mol.n_beads}; use the PDB the reference run was made from")
    pos = fmap.positions(data["positions_nm"].astype(np.float64)) * NM_TO_A
    frc = fmap.forces(data["forces_kj_mol_nm"].astype(np.float64)) * (KJ_TO_KCAL / NM_TO_A)
    return CGData(positions=pos, forces=frc, temperature_K=float(data["temperature_K"]))
