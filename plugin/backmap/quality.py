"""How close a backmapped structure is to the all-atom structure it was mapped from: heavy atoms matched by residue
and atom name, RMSD of the backbone (N, CA, C, O), of all heavy atoms, and of the side chains per residue type
(no superposition: the mapped atoms sit where their beads are, in the original's frame).

Also :func:`beads_of`, the 5-bead positions of an all-atom frame (the mapping, for frames held in memory, e.g.
all-atom MD). What ``tools/benchmarks/backmap_quality.py`` and the tests measure with.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from .skeleton import BACKBONE_ATOMS


def heavy_table(topology) -> Dict[Tuple[int, str], int]:
    """``{(residue index, atom name): atom index}`` of the heavy atoms."""
    return {(a.residue.index, a.name): a.index for a in topology.atoms()
            if a.element is None or a.element.symbol not in ("H", "D")}


def compare(ref_topology, ref_nm: np.ndarray, topology, xyz_nm: np.ndarray) -> dict:
    """RMSDs (nm) of ``xyz_nm`` (``topology``) from ``ref_nm`` (``ref_topology``) over the heavy atoms both hold.

    Returns
    -------
    dict
        ``backbone_rmsd_nm``, ``heavy_rmsd_nm``, ``n_heavy`` (atoms compared), ``missing`` (heavy atoms of the
        reference the structure lacks), and ``side_chain`` ``{residue name: {"rmsd_nm", "atoms"}}`` over the atoms
        past CB.
    """
    a, b = heavy_table(ref_topology), heavy_table(topology)
    common = sorted(set(a) & set(b))
    ref_res = {r.index: r.name for r in ref_topology.residues()}
    ref_xyz, xyz = np.asarray(ref_nm, dtype=np.float64), np.asarray(xyz_nm, dtype=np.float64)
    sq = {k: float(np.sum((ref_xyz[a[k]] - xyz[b[k]]) ** 2)) for k in common}
    bb = [sq[k] for k in common if k[1] in BACKBONE_ATOMS]
    side: Dict[str, list] = {}
    for k in common:
        if k[1] not in BACKBONE_ATOMS + ("CB", "OXT"):
            side.setdefault(ref_res[k[0]], []).append(sq[k])
    return {"backbone_rmsd_nm": float(np.sqrt(np.mean(bb))) if bb else float("nan"),
            "heavy_rmsd_nm": float(np.sqrt(np.mean(list(sq.values())))) if sq else float("nan"),
            "n_heavy": len(common), "missing": len(set(a) - set(b)),
            "side_chain": {name: {"rmsd_nm": float(np.sqrt(np.mean(v))), "atoms": len(v)}
                           for name, v in sorted(side.items())}}


def beads_of(cg_topology, topology, xyz_nm: np.ndarray) -> np.ndarray:
    """Bead positions [n_beads, 3] (nm) of an all-atom frame: each bead of ``cg_topology`` (the i-th residue's
    N, CA, CB, C, O) at the atom of the same name in the i-th residue of ``topology``."""
    table = {(a.residue.index, a.name): a.index for a in topology.atoms()}
    idx = [table[(a.residue.index, a.name)] for a in cg_topology.atoms()]
    return np.asarray(xyz_nm, dtype=np.float64)[idx]
