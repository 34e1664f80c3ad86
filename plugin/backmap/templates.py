"""pdbfixer's residue templates with the most common side-chain chi1.

pdbfixer builds a missing side chain in the conformation of its template (overlaid on N, CA, C, O and CB), and
its soft minimisation only moves it off other atoms: the template's chi1 (N-CA-CB-XG) is, mostly, the chi1 of every
rebuilt side chain. Six templates of pdbfixer 1.12 have a rare one (ASP +41, GLN +69, the others trans, measured from
the files): :func:`common_chi1_templates` turns their side chains about CA-CB to chi1 = -65 (the "m" rotamer,
the most common chi1 of these residues in the Top500 rotamer library of Lovell et al., Proteins 40:389, 2000);
the other templates keep theirs (already the most common: m for CYS, HIS, ILE, LEU, LYS, MET, ASN, TYR; t for VAL;
SER and THR near m or p; PRO is a ring).
"""
from __future__ import annotations

import math
from typing import Dict

import numpy as np

from ...cg.geometry import dihedral

#: residue -> (gamma atom, chi1 in degrees) set in its template
CHI1: Dict[str, tuple] = {"ARG": ("CG", -65.0), "ASP": ("CG", -65.0), "GLN": ("CG", -65.0),
                          "GLU": ("CG", -65.0), "PHE": ("CG", -65.0), "TRP": ("CG", -65.0)}


def _chi(p0, p1, p2, p3) -> float:
    """Dihedral p0-p1-p2-p3 in degrees."""
    return math.degrees(dihedral(p0, p1, p2, p3))


def _rotate(points: np.ndarray, origin: np.ndarray, axis: np.ndarray, degrees: float) -> np.ndarray:
    """``points`` turned by ``degrees`` about the line through ``origin`` along ``axis`` (Rodrigues)."""
    k = axis / np.linalg.norm(axis)
    t = math.radians(degrees)
    v = points - origin
    return origin + v * math.cos(t) + np.cross(k, v) * math.sin(t) + np.outer(v @ k, k) * (1 - math.cos(t))


def beyond(topology, first: str, before: str) -> list:
    """Indices of the atoms reached from atom ``first`` without passing ``before`` (its side of that bond)."""
    atoms = {a.name: a.index for a in topology.atoms()}
    nbr: Dict[int, set] = {}
    for a, b in topology.bonds():
        nbr.setdefault(a.index, set()).add(b.index)
        nbr.setdefault(b.index, set()).add(a.index)
    start, stop = atoms[first], atoms[before]
    seen, todo = {start}, [start]
    while todo:
        for j in nbr.get(todo.pop(), ()):
            if j != stop and j not in seen:
                seen.add(j)
                todo.append(j)
    return sorted(seen - {start})


def common_chi1_templates(fixer) -> None:
    """Set chi1 of the templates in :data:`CHI1` in ``fixer`` (a ``PDBFixer``; its ``templates`` are replaced)."""
    import openmm.unit as unit

    for name, (gamma, target) in CHI1.items():
        t = fixer.templates.get(name)
        if t is None:
            continue
        xyz = np.array([p.value_in_unit(unit.nanometer) for p in t.positions], dtype=np.float64)
        at = {a.name: a.index for a in t.topology.atoms()}
        if not all(k in at for k in ("N", "CA", "CB", gamma)):
            continue
        moving = beyond(t.topology, "CB", "CA")
        n, ca, cb = xyz[at["N"]], xyz[at["CA"]], xyz[at["CB"]]
        delta = target - _chi(n, ca, cb, xyz[at[gamma]])
        new = xyz.copy()
        new[moving] = _rotate(xyz[moving], cb, cb - ca, delta)
        if abs((_chi(n, ca, cb, new[at[gamma]]) - target + 180) % 360 - 180) > 1.0:   # the other sense
            new[moving] = _rotate(xyz[moving], cb, cb - ca, -delta)
        fixer.templates[name] = type(t)(t.topology, new * unit.nanometer, t.terminal)
