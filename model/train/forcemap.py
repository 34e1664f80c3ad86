"""All-atom -> CG: the configurational map (bead = one atom's position, a *slice* map) and the aggregated force
map (bead force = sum of the forces on the atoms of the bead's group).

For a slice map ``R_I = r_{k(I)}`` every force map ``F_I = sum_i b_Ii f_i`` with ``b_{I,k(J)} = delta_IJ`` gives
the mean force in expectation (Ciccotti, Kapral & Vanden-Eijnden 2005; Kramer et al. 2023). Summing each
bead's whole atom group -- its heavy atom, the side chain beyond CB for the CB bead, and every hydrogen with the
heavy atom it is bonded to -- satisfies that, and keeps each hydrogen constrained to its heavy atom (HBonds
constraints) inside one group, where the constraint forces cancel. Glycine has no CB: its HA2/HA3 go with CA.

Pure Python/NumPy (no openmm): the atoms come as plain lists, e.g. from an OpenMM or mdtraj topology.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..cg.residue_data import MAPPINGS
from ..errors import InputError

#: backbone heavy-atom names -> bead (5-bead mapping); every other heavy atom of a residue goes to CB
BACKBONE_BEAD = {"N": "N", "CA": "CA", "C": "C", "O": "O", "OXT": "O", "OT1": "O", "OT2": "O"}


@dataclass
class ForceMap:
    """The slice position map and aggregated force map of one all-atom system onto its CG beads.

    Attributes
    ----------
    site_atom : ndarray [N] int
        All-atom index whose position is bead I's position.
    group : ndarray [n_atoms] int
        Bead index of every atom (-1: not in any bead, e.g. water or ions; their forces are dropped).
    """

    site_atom: np.ndarray
    group: np.ndarray

    @property
    def n_beads(self) -> int:
        return len(self.site_atom)

    def positions(self, xyz: np.ndarray) -> np.ndarray:
        """CG positions [..., N, 3] from all-atom positions [..., n_atoms, 3] (same unit)."""
        return np.asarray(xyz)[..., self.site_atom, :]

    def forces(self, f: np.ndarray) -> np.ndarray:
        """CG forces [..., N, 3]: per bead, the sum of its group's all-atom forces [..., n_atoms, 3]."""
        f = np.asarray(f, dtype=np.float64)
        keep = np.flatnonzero(self.group >= 0)
        agg = np.zeros((self.n_beads, len(self.group)))
        agg[self.group[keep], keep] = 1.0
        return np.einsum("Ia,...ax->...Ix", agg, f)


def build_force_map(atoms: Sequence[Tuple[int, str, str, str]], bonds: Sequence[Tuple[int, int]],
                    mapping: str = "5bead") -> ForceMap:
    """The force map of an all-atom protein topology.

    Parameters
    ----------
    atoms : sequence of (residue index, residue name, atom name, element symbol)
        Every atom of the all-atom system, in order. Residues are numbered in file order; only residues with a
        CA are protein residues (others, e.g. water, map to no bead).
    bonds : sequence of (i, j)
        Atom-atom bonds (to put each hydrogen with its heavy atom).
    mapping : str
        ``"5bead"`` (N, CA, CB, C, O; glycine without CB) or ``"ca"``; beads are ordered by residue, then in
        :data:`flashschnet.cg.residue_data.MAPPINGS` order, as :func:`flashschnet.cg.map_pdb` orders them.

    Returns
    -------
    ForceMap
    """
    if mapping not in MAPPINGS:
        raise InputError(f"unknown CG mapping {mapping!r}; known: {', '.join(MAPPINGS)}")
    n = len(atoms)
    residues: dict = {}
    for i, (res, resname, name, element) in enumerate(atoms):
        residues.setdefault(int(res), {})[str(name)] = i
    heavy_bead: List[int] = [-1] * n
    site_atom: List[int] = []
    for res in sorted(residues):
        names = residues[res]
        if "CA" not in names:
            continue                                    # not an amino acid: no bead
        beads = {}
        for bead in MAPPINGS[mapping]:
            if bead in names:
                beads[bead] = len(site_atom)
                site_atom.append(names[bead])
            elif bead != "CB":
                raise InputError(f"residue {res} ({atoms[names['CA']][1]}): atom {bead} missing; the all-atom "
                                 "structure must have complete backbones")
        for name, i in names.items():
            if atoms[i][3].upper() == "H":
                continue
            if mapping == "ca":
                heavy_bead[i] = beads["CA"]
            elif name in BACKBONE_BEAD:
                heavy_bead[i] = beads[BACKBONE_BEAD[name]]
            else:
                heavy_bead[i] = beads.get("CB", beads["CA"])
    group = np.array(heavy_bead, dtype=np.int64)
    for a, b in bonds:                                  # hydrogens follow the heavy atom they are bonded to
        for h, x in ((a, b), (b, a)):
            if atoms[h][3].upper() == "H" and atoms[x][3].upper() != "H":
                group[h] = heavy_bead[x]
    return ForceMap(site_atom=np.array(site_atom, dtype=np.int64), group=group)
