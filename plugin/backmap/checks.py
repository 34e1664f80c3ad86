"""Geometry checks of a backmapped structure (positions in nm, an OpenMM topology with bonds): heavy-atom clashes,
the chirality at CA, cis peptide bonds, and how far the mapped atoms moved from their beads.

Each function reads only positions and the topology, so the same checks judge every frame that
:mod:`flashschnet.openmm.backmap.rebuild` makes and the structures ``tools/benchmarks/backmap_quality.py`` compares.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Set, Tuple

import numpy as np

from ...cg.geometry import dihedral

#: heavy-atom pairs closer than this (nm) that are neither bonded nor 1-3 are a clash
CLASH_NM = 0.22
#: a mapped atom (N, CA, C, O, CB) farther than this (nm) from its bead after the minimisation is noted
DEVIATION_NM = 0.05
#: a peptide bond whose omega (CA-C-N-CA) is within this many degrees of 0 is cis
CIS_DEGREES = 90.0


def heavy_atoms(topology) -> np.ndarray:
    """Indices of the atoms that are not hydrogen."""
    return np.array([a.index for a in topology.atoms() if a.element is None or a.element.symbol not in ("H", "D")],
                    dtype=np.int64)


def near_in_graph(topology) -> Set[Tuple[int, int]]:
    """Pairs ``(i, j)``, i < j, of atoms one or two bonds apart."""
    nbr: Dict[int, Set[int]] = {}
    for a, b in topology.bonds():
        nbr.setdefault(a.index, set()).add(b.index)
        nbr.setdefault(b.index, set()).add(a.index)
    pairs = set()
    for i, js in nbr.items():
        for j in js:
            pairs.add((min(i, j), max(i, j)))
            for k in nbr.get(j, ()):
                if k != i:
                    pairs.add((min(i, k), max(i, k)))
    return pairs


def clashes(positions_nm: np.ndarray, topology, cutoff_nm: float = CLASH_NM,
            exclude=None) -> List[Tuple[int, int, float]]:
    """Heavy-atom pairs ``(i, j, distance_nm)`` closer than ``cutoff_nm`` that are not bonded or 1-3 (``exclude``:
    :func:`near_in_graph` of the topology, computed when not given)."""
    heavy = heavy_atoms(topology)
    exclude = near_in_graph(topology) if exclude is None else exclude
    xyz = np.asarray(positions_nm, dtype=np.float64)[heavy]
    out = []
    for lo in range(0, len(xyz), 256):                  # blocks of rows: memory 256 x n, not n x n
        d = np.linalg.norm(xyz[lo:lo + 256, None, :] - xyz[None, :, :], axis=-1)
        for a, b in zip(*np.nonzero(d < cutoff_nm)):
            a, b = int(a) + lo, int(b)
            if a < b:
                i, j = int(heavy[a]), int(heavy[b])
                if (min(i, j), max(i, j)) not in exclude:
                    out.append((i, j, float(d[a - lo, b])))
    return out


def _named(residue) -> Dict[str, int]:
    return {a.name: a.index for a in residue.atoms()}


def d_residues(positions_nm: np.ndarray, topology) -> List[int]:
    """Indices of the residues with N, CA, C and CB whose CA is D (an L amino acid has
    ``((N - CA) x (C - CA)) . (CB - CA) > 0``)."""
    xyz = np.asarray(positions_nm, dtype=np.float64)
    out = []
    for res in topology.residues():
        at = _named(res)
        if all(k in at for k in ("N", "CA", "C", "CB")):
            ca = xyz[at["CA"]]
            vol = np.dot(np.cross(xyz[at["N"]] - ca, xyz[at["C"]] - ca), xyz[at["CB"]] - ca)
            if vol < 0:
                out.append(res.index)
    return out


def omegas(positions_nm: np.ndarray, topology) -> Dict[int, float]:
    """``{residue index i: omega}`` (degrees, CA(i)-C(i)-N(i+1)-CA(i+1)) of every peptide bond C(i)-N(i+1) of the
    topology."""
    xyz = np.asarray(positions_nm, dtype=np.float64)
    out = {}
    for a, b in topology.bonds():
        if a.name == "N" and b.name == "C":
            a, b = b, a
        if a.name == "C" and b.name == "N" and a.residue.index != b.residue.index:
            ra, rb = _named(a.residue), _named(b.residue)
            if "CA" in ra and "CA" in rb:
                out[a.residue.index] = np.degrees(dihedral(xyz[ra["CA"]], xyz[a.index], xyz[b.index],
                                                           xyz[rb["CA"]]))
    return out


def cis_peptides(positions_nm: np.ndarray, topology) -> List[int]:
    """Residues ``i`` whose peptide bond to ``i + 1`` is cis (``|omega| <`` :data:`CIS_DEGREES`)."""
    return sorted(i for i, w in omegas(positions_nm, topology).items() if abs(w) < CIS_DEGREES)


@dataclass
class FrameCheck:
    """What the checks found in one backmapped frame (empty lists: all well).

    ``clashes``: ``(atom i, atom j, nm)`` (:func:`clashes`); ``d_residues``: residues with D chirality at CA where
    the CG input makes them L (a residue D in the beads themselves stays D, and is not noted);
    ``new_cis``: residues whose peptide bond is cis where the CG input does not make it so (cis in the skeleton's
    beads is kept, and not noted); ``max_deviation_nm``: the largest distance of a mapped atom from its bead;
    ``converged``: the minimiser stopped within its iteration limit.
    """

    clashes: List[Tuple[int, int, float]] = field(default_factory=list)
    d_residues: List[int] = field(default_factory=list)
    new_cis: List[int] = field(default_factory=list)
    max_deviation_nm: float = 0.0
    converged: bool = True

    def problems(self, topology, deviation_nm: float = DEVIATION_NM) -> List[str]:
        """One phrase per kind of problem, naming atoms and residues (empty: a good frame)."""
        atoms = list(topology.atoms())
        res = list(topology.residues())

        def atom(i):
            a = atoms[i]
            return f"{a.residue.name}{a.residue.id}:{a.name}"

        out = []
        if self.clashes:
            i, j, d = min(self.clashes, key=lambda c: c[2])
            out.append(f"{len(self.clashes)} heavy-atom clash(es) under {CLASH_NM * 10:.1f} A (closest "
                       f"{atom(i)}-{atom(j)} {d * 10:.2f} A)")
        if self.d_residues:
            out.append("D chirality at CA of " + ", ".join(f"{res[i].name}{res[i].id}" for i in self.d_residues[:5]))
        if self.new_cis:
            out.append("cis peptide bond after " + ", ".join(f"{res[i].name}{res[i].id}" for i in self.new_cis[:5]))
        if self.max_deviation_nm > deviation_nm:
            out.append(f"a mapped atom is {self.max_deviation_nm * 10:.2f} A from its bead (limit "
                       f"{deviation_nm * 10:.2f} A)")
        if not self.converged:
            out.append("the minimisation did not converge")
        return out


def check_frame(positions_nm: np.ndarray, topology, mapped: Sequence[int], targets_nm: np.ndarray,
                cis_in_input: Sequence[int] = (), exclude=None, converged: bool = True,
                d_in_input: Sequence[int] = ()) -> FrameCheck:
    """All checks of one frame: ``mapped`` atoms' distances from ``targets_nm`` (their beads); cis peptide bonds
    not in ``cis_in_input`` and D residues not in ``d_in_input`` are new."""
    xyz = np.asarray(positions_nm, dtype=np.float64)
    dev = np.linalg.norm(xyz[np.asarray(mapped, dtype=np.int64)] - np.asarray(targets_nm, dtype=np.float64), axis=1)
    return FrameCheck(clashes=clashes(xyz, topology, exclude=exclude),
                      d_residues=[i for i in d_residues(xyz, topology) if i not in set(d_in_input)],
                      new_cis=[i for i in cis_peptides(xyz, topology) if i not in set(cis_in_input)],
                      max_deviation_nm=float(dev.max()) if dev.size else 0.0, converged=converged)
