"""Atom geometry for ingestion: where a missing atom goes, from the atoms around it (Angstrom, numpy float64).

The cleaning step places a missing CB by :func:`ideal_cb` (:mod:`flashschnet.openmm.cleaning`); the CG mapping
places a missing C-terminal O bead by :func:`place_atom` with the previous residue's :func:`dihedral`
(:mod:`flashschnet.cg.mapping`). The differentiable geometry of the prior energy terms (PyTorch) is
:mod:`flashschnet.priors.geometry`.
"""
from __future__ import annotations

import math
from typing import Tuple

import numpy as np

__all__ = ["IDEAL_CB", "ideal_cb", "dihedral", "place_atom"]

#: the ideal CB from N, CA, C in Angstrom: CB = CA + A*(b x c) + B*b + C*c, b = CA - N, c = C - CA (the cross
#: product makes it Angstrom-only). The constants of the tetrahedral CB of protein-design codes (e.g. ProteinMPNN).
IDEAL_CB = (-0.58273431, 0.56802827, -0.54067466)


def ideal_cb(n, ca, c) -> np.ndarray:
    """Position (Angstrom) of an L-amino acid's CB from its N, CA and C positions (Angstrom; float arrays)."""
    n, ca, c = (np.asarray(v, dtype=float) for v in (n, ca, c))
    b, cc = ca - n, c - ca
    return IDEAL_CB[0] * np.cross(b, cc) + IDEAL_CB[1] * b + IDEAL_CB[2] * cc + ca


def dihedral(p0, p1, p2, p3) -> float:
    """Dihedral angle p0-p1-p2-p3 in radians (IUPAC sign convention)."""
    p0, p1, p2, p3 = (np.asarray(p, dtype=np.float64) for p in (p0, p1, p2, p3))
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    b1n = b1 / np.linalg.norm(b1)
    v = b0 - np.dot(b0, b1n) * b1n
    w = b2 - np.dot(b2, b1n) * b1n
    return float(math.atan2(np.dot(np.cross(b1n, v), w), np.dot(v, w)))


def place_atom(a, b, c, bond: float, angle: float, torsion: float) -> Tuple[float, float, float]:
    """Position d with |cd| = ``bond`` (Angstrom), angle b-c-d = ``angle`` and dihedral a-b-c-d = ``torsion``
    (radians)."""
    a, b, c = (np.asarray(p, dtype=np.float64) for p in (a, b, c))
    bc = c - b
    bc /= np.linalg.norm(bc)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.cross(n, bc)
    d2 = np.array([-bond * math.cos(angle), bond * math.sin(angle) * math.cos(torsion),
                   bond * math.sin(angle) * math.sin(torsion)])
    d = c + d2[0] * bc + d2[1] * m + d2[2] * n
    return float(d[0]), float(d[1]), float(d[2])
