"""OpenMM topology and PDB output for coarse-grained molecules."""
from __future__ import annotations

import os
from typing import Optional, Union

import numpy as np
import openmm.app as app
import openmm.unit as unit

from flashschnet.cg import residue_data
from flashschnet.cg.mapping import map_residues
from flashschnet.cg.pdb import MAX_COORDINATE, Atom, RawResidue, position_fault
from flashschnet.cg.molecule import CGMolecule
from flashschnet.errors import InputError

__all__ = ["cg_molecule_from_topology", "cg_topology", "write_cg_pdb"]


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
    elements = {name: app.Element.getBySymbol(sym) for name, sym in residue_data.BEAD_ELEMENT.items()}
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


def _residue_number(res) -> tuple:
    """(resseq, icode) of an OpenMM residue: its id's number and the insertion code."""
    icode = (getattr(res, "insertionCode", "") or "").strip()
    text = str(res.id).strip()
    if icode and text.endswith(icode):
        text = text[: -len(icode)]
    try:
        return int(text), icode
    except ValueError:
        return res.index + 1, icode


def cg_molecule_from_topology(topology: app.Topology, positions=None, replicas: int = 1, mapping: str = "5bead",
                              source: str = "the topology") -> CGMolecule:
    """The CG molecule of one replica of a CG topology: the inverse of :func:`cg_topology`.

    Parameters
    ----------
    topology : openmm.app.Topology
        ``replicas * N`` atoms, one per CG bead, replica-major, each replica's residues in order with their
        beads named as the mapping names them (5-bead: N, CA, CB, C, O; glycine without CB), e.g. the
        ``topology.pdb`` that flashschnet-simulate writes, or :func:`cg_topology`. Its bonds are not read:
        CG bonds follow from the mapping; chains break between topology chains (and, with ``positions``,
        where a peptide bond is too long, as :func:`flashschnet.cg.map_pdb` does).
    positions : Quantity or array [replicas * N, 3] in nm, optional
        Bead positions; they become the molecule's positions (replica 0). Without them the positions are zero.
    replicas : int
        Number of packed copies in the topology.
    mapping : str
        ``"5bead"`` or ``"ca"``.
    source : str
        What to call the topology in messages.

    Returns
    -------
    CGMolecule
        ``N`` beads; masses, bead types and bonds of the mapping.

    Raises
    ------
    InputError
        When the topology is not a CG topology of ``replicas`` identical copies in the mapping's bead order.
    """
    replicas = int(replicas)
    atoms = list(topology.atoms())
    if replicas < 1 or not atoms or len(atoms) % replicas:
        raise InputError(f"{source}: {len(atoms)} atoms cannot hold {replicas} equal replicas; pass the number of "
                         "packed copies the topology holds as replicas=")
    n = len(atoms) // replicas
    pos = None
    if positions is not None:
        if unit.is_quantity(positions):
            positions = positions.value_in_unit(unit.angstrom)
        else:
            positions = np.asarray(positions, dtype=np.float64) * 10.0
        pos = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
        if pos.shape[0] != len(atoms):
            raise InputError(f"{source}: {pos.shape[0]} positions for {len(atoms)} atoms")
        faults = [position_fault(p) for p in pos.tolist()]      # the rule of every input coordinate
        bad = np.flatnonzero(faults)
        if bad.size:
            a = atoms[int(bad[0])]
            what = "non-finite" if faults[bad[0]] == "non-finite" else f"beyond {MAX_COORDINATE / 10:.4f} nm"
            more = f" ({bad.size} such positions in all)" if bad.size > 1 else ""
            raise InputError(f"{source}: the position of atom {a.name} (index {a.index}) of residue {a.residue.name} "
                             f"{a.residue.id} is {what}: {tuple(float(v) for v in pos[bad[0]] / 10.0)} nm{more}; "
                             "give finite positions in nm")
    records, prev_chain = [], None
    for res in topology.residues():
        ratoms = list(res.atoms())
        inside = [a for a in ratoms if a.index < n]
        if not inside:
            break
        if len(inside) != len(ratoms):
            raise InputError(f"{source}: residue {res.name} {res.id} straddles replicas 0 and 1 (atom {n} starts "
                             f"replica 1 of {replicas}); check replicas=")
        resseq, icode = _residue_number(res)
        new_chain = res.chain is not prev_chain
        prev_chain = res.chain
        records.append(RawResidue(record="ATOM", chain=str(res.chain.id or " "), resseq=resseq, icode=icode,
                                  resname=str(res.name).strip().upper(), after_ter=new_chain, atoms=[
                                      Atom(name=str(a.name).strip(), altloc="", occupancy=1.0, lineno=0,
                                           xyz=tuple(float(v) for v in pos[a.index]) if pos is not None
                                           else (0.0, 0.0, 0.0),
                                           element=a.element.symbol if a.element is not None else "")
                                      for a in ratoms]))
    mol = map_residues(records, source, mapping=mapping, geometry=pos is not None)
    expect = "one atom per bead: " + ("N, CA, CB, C, O per residue, no CB for glycine" if mol.mapping == "5bead"
                                      else "CA per residue")
    fix = ("build it with flashschnet.openmm.cg_topology(flashschnet.cg.map_pdb(PDB)) or load the topology.pdb "
           "that flashschnet-simulate writes")
    if mol.n_beads != n:
        raise InputError(f"{source}: {n} atoms per replica, but its {mol.mapping} CG mapping has {mol.n_beads} beads; "
                         f"a CG topology is needed ({expect}): {fix}")
    for i in range(n):
        a = atoms[i]
        if a.name.strip() != mol.bead_names[i]:
            res = mol.residues[int(mol.bead_residue[i])]
            raise InputError(f"{source}: atom {i} ({a.name} of {res.label}) is where the {mol.mapping} mapping puts "
                             f"bead {mol.bead_names[i]}; the beads must come in the mapping's order ({expect}): {fix}")
    for r in range(1, replicas):
        for i in range(n):
            a, b = atoms[i], atoms[r * n + i]
            if a.name != b.name or a.residue.name != b.residue.name:
                raise InputError(f"{source}: replica {r} differs from replica 0 at its atom {i} ({b.name} of "
                                 f"{b.residue.name} {b.residue.id} vs {a.name} of {a.residue.name} {a.residue.id}); "
                                 "packed replicas must be copies of one molecule")
    return mol


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
    from ..atomic import atomic_write

    with atomic_write(path, "w", what="writing the topology") as fh:     # OutputError when it cannot be written
        app.PDBFile.writeFile(top, unit.Quantity(pos, unit.angstrom), fh, keepIds=keep_ids)
