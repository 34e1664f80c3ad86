"""The skeleton a backmapping starts from: the reference's residues (names, chains, numbers) with N, CA, C, O and,
but for glycine, CB. In the 5-bead mapping each of them takes its position from its bead; in the CA mapping only CA
does, and the others are rebuilt from the CA trace (:mod:`.pulchra`).

The CG structure (a run's ``topology.pdb``, or :func:`flashschnet.openmm.cg_topology` of a mapped molecule) says
which bead is which atom; the reference (the run's ``cleaned.pdb``, the all-atom structure the run was mapped from)
says which residue it is. :func:`build_skeleton` checks that the two hold the same residues in the same order
(an :class:`~flashschnet.errors.InputError`, one line, at the first that differs) and records the disulfide bonds
of the reference (SG-SG bonds, which OpenMM's PDB reader makes for SG atoms within 0.3 nm), so every frame is
rebuilt with them.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from ...cg.mapping import one_letter_code
from ...errors import InputError

#: the atoms of a residue the 5-bead mapping keeps (glycine has no CB), in the skeleton's order
SKELETON_ATOMS = ("N", "CA", "C", "O", "CB")
BACKBONE_ATOMS = ("N", "CA", "C", "O")


@dataclass
class Skeleton:
    """What every frame of one backmapping shares.

    Attributes
    ----------
    text : str
        PDB text of the skeleton (positions meaningless): the reference's chains and residues (names, ids,
        insertion codes), each with the atoms of :data:`SKELETON_ATOMS` it has; :meth:`topology` reads it (text,
        not a Topology, so that a Skeleton pickles into worker processes).
    bead_index : numpy.ndarray, int, shape [n_atoms]
        For each skeleton atom, the CG bead whose position it takes; -1: none (the CA mapping's N, C, O, CB).
    disulfides : list of (int, int)
        Residue indices of the reference's cysteine pairs bonded SG-SG.
    labels : list of str
        ``"TRP 6 (chain A)"`` per residue, for messages.
    n_beads : int
        Beads per frame of the CG structure.
    """

    text: str
    bead_index: np.ndarray
    disulfides: List[Tuple[int, int]]
    labels: List[str]
    n_beads: int
    mapping: str = "5bead"

    @property
    def mapped(self) -> np.ndarray:
        """Indices of the skeleton atoms that sit on a bead (restrained there by the minimisation)."""
        return np.flatnonzero(self.bead_index >= 0)

    def topology(self):
        """The skeleton as an ``openmm.app.Topology`` (standard bonds, as OpenMM's PDB reader makes them)."""
        import io

        import openmm.app as app

        return app.PDBFile(io.StringIO(self.text)).topology


def read_openmm_pdb(path: str, what: str, absent: str, give: str, give_readable: str):
    """``path`` as an ``openmm.app.PDBFile``; a one-line InputError starting with ``what`` (e.g. ``"--reference
    PATH"``) when it is not a file (``absent``: the word for a path that does not exist) or OpenMM cannot read it,
    ending with what to ``give`` (``give_readable`` for an unreadable file)."""
    if not os.path.isfile(path):
        raise InputError(f"{what}: {'not a file' if os.path.exists(path) else absent}; {give}")
    import openmm.app as app

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return app.PDBFile(path)
    except Exception as exc:                      # OpenMM's reader raises whatever it hits
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{what}: not a readable PDB file ({first}); {give_readable}") from None


def read_reference(path: str):
    """The reference PDB as an ``openmm.app.PDBFile`` (first model); InputError when it cannot be read."""
    pdb = read_openmm_pdb(path, f"--reference {path}", "no such file", "give the all-atom PDB the CG structure was "
                          "mapped from (a run directory's cleaned.pdb)", "give the cleaned.pdb of the run")
    if pdb.topology.getNumAtoms() == 0:
        raise InputError(f"--reference {path}: no atoms; give the cleaned.pdb of the run")
    return pdb


def _label(res) -> str:
    return f"{res.name} {res.id}{' (chain ' + res.chain.id + ')' if res.chain.id.strip() else ''}"


def build_skeleton(cg_topology, reference_path: str, source: str) -> Skeleton:
    """The :class:`Skeleton` of a 5-bead or CA CG topology and its all-atom reference.

    Parameters
    ----------
    cg_topology : openmm.app.Topology
        One copy of the CG molecule: beads N, CA, CB, C, O per residue (glycine without CB), or one CA bead per
        residue, e.g. a run's ``topology.pdb``.
    reference_path : str
        The all-atom PDB the CG structure was mapped from (a run's ``cleaned.pdb``).
    source : str
        What to call the CG structure in messages (its path).

    Raises
    ------
    InputError
        The CG topology is neither a 5-bead nor a CA one, or its residues differ from the reference's (count or
        names).
    """
    import openmm.app as app

    from ..topology import cg_molecule_from_topology

    names = {a.name for a in cg_topology.atoms()}
    mapping = "ca" if names == {"CA"} else "5bead"
    mol = cg_molecule_from_topology(cg_topology, mapping=mapping, source=source)
    ref = read_reference(reference_path)
    ref_res = list(ref.topology.residues())
    if len(ref_res) != len(mol.residues):
        raise InputError(f"{source}: {len(mol.residues)} residues, but the reference {reference_path} has "
                         f"{len(ref_res)}; give the reference the CG structure was mapped from (its run's "
                         "cleaned.pdb)")
    for i, (cg, rr) in enumerate(zip(mol.residues, ref_res)):
        code = one_letter_code(rr.name)
        if code is None or code != cg.one_letter:
            raise InputError(f"{source}: residue {i + 1} is {cg.resname} {cg.resseq}{cg.icode}, but the reference "
                             f"{reference_path} has {rr.name} {rr.id} there; give the reference the CG structure "
                             "was mapped from (its run's cleaned.pdb)")
    bead_of = {}
    for b, (ri, name) in enumerate(zip(mol.bead_residue.tolist(), mol.bead_names)):
        bead_of[(int(ri), name)] = b
    top, index = app.Topology(), []
    elements = {"N": app.element.nitrogen, "O": app.element.oxygen}
    chains = {}
    for i, rr in enumerate(ref_res):
        if rr.chain not in chains:
            chains[rr.chain] = top.addChain(rr.chain.id)
        res = top.addResidue(rr.name, chains[rr.chain], rr.id, rr.insertionCode)
        for name in SKELETON_ATOMS:
            if (i, name) in bead_of or (mapping == "ca" and (name != "CB" or one_letter_code(rr.name) != "G")):
                top.addAtom(name, elements.get(name, app.element.carbon), res)
                index.append(bead_of.get((i, name), -1))
    cys = {}
    for a, b in ref.topology.bonds():
        if a.name == "SG" and b.name == "SG" and a.residue is not b.residue:
            cys[tuple(sorted((a.residue.index, b.residue.index)))] = True
    import io

    import openmm
    import openmm.unit as unit

    text = io.StringIO()
    placeholder = [openmm.Vec3(0.0, 0.0, 0.1 * i) for i in range(top.getNumAtoms())] * unit.nanometer
    app.PDBFile.writeFile(top, placeholder, text, keepIds=True)
    return Skeleton(text=text.getvalue(), bead_index=np.asarray(index, dtype=np.int64), disulfides=sorted(cys),
                    labels=[_label(r) for r in ref_res], n_beads=mol.n_beads, mapping=mapping)
