"""The coarse-grained molecule: what the CG mapping produces and everything downstream consumes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np


@dataclass
class CGResidue:
    """One residue of the CG molecule."""

    chain: str          # chain identifier as in the PDB (may be " ")
    resseq: int         # residue number as in the PDB
    icode: str          # insertion code ("" when none)
    resname: str        # three-letter name as in the PDB (e.g. "HIE")
    one_letter: str     # canonical one-letter code (e.g. "H")

    @property
    def label(self) -> str:
        """Human-readable label used in error messages, e.g. ``"ALA 12 (chain A)"``."""
        chain = self.chain.strip() or "-"
        return f"{self.resname} {self.resseq}{self.icode} (chain {chain})"


@dataclass
class CGMolecule:
    """A coarse-grained protein.

    Attributes
    ----------
    mapping : str
        Name of the mapping that produced it: ``"5bead"`` (N, CA, CB, C, O) or ``"ca"``.
    bead_names : list of str, length N
        Atom name each bead sits on (``"N"``, ``"CA"``, ``"CB"``, ``"C"``, ``"O"``).
    bead_types : numpy.ndarray, int64, shape [N]
        mlcg bead types (OPEPS for the 5-bead mapping).
    masses : numpy.ndarray, float64, shape [N]
        Bead masses in amu (dalton).
    positions : numpy.ndarray, float64, shape [N, 3]
        Bead positions in Angstrom.
    bead_residue : numpy.ndarray, int64, shape [N]
        Index into ``residues`` of each bead's residue.
    residues : list of CGResidue
        Residues in file order.
    chain_of_residue : numpy.ndarray, int64, shape [n_residues]
        Index of the (connected) chain each residue belongs to; a chain break starts a new chain.
    bonds : numpy.ndarray, int64, shape [B, 2]
        CG bonds (i < j), within chains only.
    source : str
        Where it came from (file path) for messages.
    notes : list of str
        One-line notes about what the mapping ignored or chose (first model, alternate locations, ...).
    """

    mapping: str
    bead_names: List[str]
    bead_types: np.ndarray
    masses: np.ndarray
    positions: np.ndarray
    bead_residue: np.ndarray
    residues: List[CGResidue]
    chain_of_residue: np.ndarray
    bonds: np.ndarray
    source: str = ""
    notes: List[str] = field(default_factory=list)

    @property
    def n_beads(self) -> int:
        return len(self.bead_names)

    def bead_label(self, i: int) -> str:
        """``"CA of ALA 12 (chain A)"``."""
        return f"{self.bead_names[i]} of {self.residues[int(self.bead_residue[i])].label}"

    def sequence(self) -> str:
        return "".join(r.one_letter for r in self.residues)

    def bond_graph_distances(self, max_distance: int = 8) -> np.ndarray:
        """Shortest bonded-path lengths between beads, shape [N, N], int64; pairs farther apart than
        ``max_distance`` bonds (or in different chains) get ``max_distance + 1``."""
        n = self.n_beads
        far = max_distance + 1
        dist = np.full((n, n), far, dtype=np.int64)
        np.fill_diagonal(dist, 0)
        adj = [[] for _ in range(n)]
        for i, j in self.bonds:
            adj[int(i)].append(int(j))
            adj[int(j)].append(int(i))
        for s in range(n):
            frontier = [s]
            d = 0
            while frontier and d < max_distance:
                d += 1
                nxt = []
                for u in frontier:
                    for v in adj[u]:
                        if dist[s, v] == far:
                            dist[s, v] = d
                            nxt.append(v)
                frontier = nxt
        return dist

    def fingerprint(self) -> Tuple[str, Tuple[int, ...]]:
        """What a topology-specific parameter set (e.g. priors fitted to one protein) must match:
        the mapping name and the bead types in order."""
        return self.mapping, tuple(int(t) for t in self.bead_types)
