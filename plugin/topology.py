"""OpenMM topology and PDB output for coarse-grained molecules."""
from __future__ import annotations

import os
from typing import Optional, Union

import numpy as np
import openmm.app as app
import openmm.unit as unit

from flashschnet.cg import tables
from flashschnet.cg.molecule import CGMolecule
from flashschnet.errors import InputError

__all__ = ["cg_topology", "write_cg_pdb"]


def cg_topology(mol: CGMolecule, replicas: int = 1) -> app.Topology:
    """OpenMM topology of a CG molecule, optionally repeated for several independent replicas.

    Parameters
    ----------
    mol : CGMolecule
        The CG molecule (N beads, B bonds).
    replicas : int
        Number of copies. Replica r holds atoms ``r*N .. (r+1)*N - 1``; its chains come after those of
        replica r - 1.

    Returns
    -------
    openmm.app.Topology
        ``replicas * N`` atoms named like the beads (N, CA, CB, C, O) with elements N/C/O,
        one residue per CG residue (PDB name, id ``str(resseq) + icode``), one chain per connected
        chain per replica (id = PDB chain id) and ``replicas * B`` bonds.
    """
    replicas = int(replicas)
    if replicas < 1:
        raise InputError(f"cg_topology: replicas must be >= 1, got {replicas}")
    top = app.Topology()
    elements = {name: app.Element.getBySymbol(sym) for name, sym in tables.BEAD_ELEMENT.items()}
    n = mol.n_beads
    bead_residue = np.asarray(mol.bead_residue, dtype=np.int64)
    chain_of_residue = np.asarray(mol.chain_of_residue, dtype=np.int64)
    for _ in range(replicas):
        atoms = []
        chains = {}
        residues = {}
        for i in range(n):
            ri = int(bead_residue[i])
            if ri not in residues:
                ci = int(chain_of_residue[ri])
                res_info = mol.residues[ri]
                if ci not in chains:
                    chains[ci] = top.addChain(id=(res_info.chain.strip() or "A"))
                residues[ri] = top.addResidue(res_info.resname, chains[ci],
                                              id=f"{res_info.resseq}{res_info.icode}",
                                              insertionCode=res_info.icode or "")
            name = mol.bead_names[i]
            atoms.append(top.addAtom(name, elements.get(name), residues[ri]))
        for i, j in np.asarray(mol.bonds, dtype=np.int64).reshape(-1, 2):
            top.addBond(atoms[int(i)], atoms[int(j)])
    return top


def write_cg_pdb(mol: CGMolecule, path: Union[str, os.PathLike],
                 positions_angstrom: Optional[np.ndarray] = None) -> None:
    """Write the CG structure as a PDB file (with CONECT records for the CG bonds).

    Parameters
    ----------
    mol : CGMolecule
        The CG molecule (N beads).
    path : str or path-like
        Output file.
    positions_angstrom : numpy.ndarray, shape [N, 3] or [R*N, 3], optional
        Bead positions in Angstrom; defaults to ``mol.positions``. With R*N rows, R replicas are written.
    """
    pos = np.asarray(mol.positions if positions_angstrom is None else positions_angstrom, dtype=np.float64)
    n = mol.n_beads
    if pos.ndim != 2 or pos.shape[1] != 3 or n == 0 or pos.shape[0] % n != 0:
        raise InputError(f"write_cg_pdb: positions must have shape [{n}, 3] (or a multiple of {n} rows), "
                         f"got {list(pos.shape)}")
    top = cg_topology(mol, replicas=pos.shape[0] // n)
    # PDBFile writes the insertion code after the id itself: keep only the number in the id here.
    for res in top.residues():
        if res.insertionCode and res.id.endswith(res.insertionCode):
            res.id = res.id[: -len(res.insertionCode)]
    keep_ids = all(len(r.id) <= 4 for r in top.residues()) and all(len(c.id) == 1 for c in top.chains())
    with open(path, "w") as fh:
        app.PDBFile.writeFile(top, unit.Quantity(pos, unit.angstrom), fh, keepIds=keep_ids)
