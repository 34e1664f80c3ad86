"""PDB -> coarse-grained molecule: the 5-bead (N, CA, CB, C, O) and CA-only mappings of mlcg.

:func:`map_residues` maps residues in memory (:class:`~flashschnet.cg.pdb.RawResidue`: the cleaning step's
``CleanedStructure.residues``, or an OpenMM Topology's) onto a :class:`~flashschnet.cg.molecule.CGMolecule`: beads
on the mapped atoms (positions in Angstrom, masses in amu, mlcg bead types), connected chains (TER records, chain
changes and over-long peptide bonds break them), CG bonds within chains, and a C-terminal O bead placed by ideal
geometry (:mod:`flashschnet.cg.geometry`) when the input lacks it. :func:`map_pdb` (a file) and
:func:`map_pdb_text` (its text) read a raw PDB file with :mod:`flashschnet.cg.pdb` and map its residues.

Every problem with the input is an :class:`~flashschnet.errors.InputError` with a one-line message naming
the file, the residue or atom at fault and what to do; things that are ignored or chosen on the user's behalf
are one-line notes in :attr:`CGMolecule.notes` (worded in :mod:`flashschnet.cg.notes`).
"""
from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import InputError
from . import notes as note
from . import residue_data
from .geometry import dihedral, place_atom
from .molecule import CGMolecule, CGResidue
from .notes import format_counts
from .pdb import Atom, RawResidue, check_coordinates, decode_pdb, parse_pdb, read_pdb_file, select_atoms

__all__ = ["map_pdb", "map_pdb_text", "map_residues", "available_mappings", "one_letter_code"]


def available_mappings() -> Tuple[str, ...]:
    """Names of the mappings :func:`map_pdb` accepts."""
    return tuple(residue_data.MAPPINGS)


def one_letter_code(resname: str) -> Optional[str]:
    """One-letter code of a residue name (standard, variant or Amber terminal name), or None."""
    name = resname.strip().upper()
    if name in residue_data.STANDARD_RESIDUES:
        return residue_data.STANDARD_RESIDUES[name]
    if name in residue_data.RESIDUE_ALIASES:
        return residue_data.RESIDUE_ALIASES[name]
    if len(name) == 4 and name[0] in residue_data.TERMINAL_PREFIXES:
        rest = name[1:]
        if rest in residue_data.STANDARD_RESIDUES:
            return residue_data.STANDARD_RESIDUES[rest]
        if rest in residue_data.RESIDUE_ALIASES:
            return residue_data.RESIDUE_ALIASES[rest]
    return None


def _accepted_names_text() -> str:
    return ("the 20 standard amino acids, " + ", ".join(sorted(residue_data.RESIDUE_ALIASES))
            + " and Amber terminal names such as NALA/CALA")


def _mapping_key(mapping: str, src: str) -> str:
    """The mapping's name as :data:`~flashschnet.cg.residue_data.MAPPINGS` spells it; InputError naming the valid ones."""
    key = str(mapping).strip().lower() if isinstance(mapping, str) else mapping
    if key not in residue_data.MAPPINGS:
        raise InputError(f"{src}: unknown mapping {mapping!r}; valid mappings are "
                         + ", ".join(repr(m) for m in residue_data.MAPPINGS))
    return key


def _missing_atoms_error(res: RawResidue, missing: List[str], mapping: str, src: str) -> InputError:
    needed = residue_data.MAPPINGS[mapping]
    if len(missing) == 1:
        what = f"no {missing[0]} atom"
    else:
        what = "no " + ", ".join(missing[:-1]) + f" and {missing[-1]} atoms"
    if mapping == "5bead":
        rule = "the 5-bead mapping needs N, CA, CB, C and O (no CB for glycine)"
        fix = "complete the structure (e.g. with pdbfixer) or use --mapping ca"
    else:
        rule = "the CA mapping needs " + ", ".join(needed)
        fix = "complete the structure (e.g. with pdbfixer)"
    return InputError(f"{src}: residue {res.label} has {what}; {rule}: {fix}")


def map_pdb_text(text: str, source: str = "<string>", mapping: str = "5bead") -> CGMolecule:
    """Map the text of a PDB file onto a coarse-grained molecule.

    Parameters
    ----------
    text : str
        Contents of a PDB file (fixed-column ATOM/HETATM records). Only the first MODEL is used.
    source : str
        Name used for the file in messages and stored as :attr:`CGMolecule.source`.
    mapping : str
        ``"5bead"`` (N, CA, CB, C, O per residue; glycine has no CB) or ``"ca"`` (one CA bead).

    Returns
    -------
    CGMolecule
        Bead positions in Angstrom (float64, shape [N, 3]), masses in amu, mlcg bead types, bonds [B, 2].

    Raises
    ------
    InputError
        For an unknown mapping or a structure that cannot be mapped (one-line message).
    """
    src = str(source)
    key = _mapping_key(mapping, src)
    if isinstance(text, bytes):
        text = decode_pdb(text, src)
    parsed = parse_pdb(text, src)
    return map_residues(parsed.residues, src, key, n_models=parsed.n_models)


def map_pdb(path: Union[str, os.PathLike], mapping: str = "5bead") -> CGMolecule:
    """Map a PDB file onto a coarse-grained molecule.

    Parameters
    ----------
    path : str or path-like
        PDB file (fixed-column format). Only the first MODEL is used; waters, ions, ligands, hydrogens
        and OXT are ignored; alternate locations are resolved by highest occupancy.
    mapping : str
        ``"5bead"`` (beads N, CA, CB, C, O per residue, glycine without CB) or ``"ca"`` (one CA bead
        per residue).

    Returns
    -------
    CGMolecule
        ``positions`` in Angstrom, float64, shape [N, 3]; ``masses`` in amu, shape [N]; ``bead_types``
        int64, shape [N]; ``bonds`` int64, shape [B, 2] (i < j, sorted); ``notes`` one line each.

    Raises
    ------
    InputError
        When the file is missing or not a PDB file, or the protein cannot be mapped (one-line message
        starting with the path).
    """
    p = Path(path)
    key = _mapping_key(mapping, str(p))
    text = read_pdb_file(p)
    return map_pdb_text(text, source=str(p), mapping=key)


def map_residues(residues: Sequence[RawResidue], source: str, mapping: str = "5bead", geometry: bool = True,
                 n_models: int = 0) -> CGMolecule:
    """Map residues in memory onto a CG molecule, with the rules of :func:`map_pdb`.

    Parameters
    ----------
    residues : sequence of RawResidue
        In order, each with its atoms (positions in Angstrom); ``after_ter`` starts a new chain (a TER record), as
        does a change of ``chain``: the cleaning step's ``CleanedStructure.residues``, a read file's
        (:func:`~flashschnet.cg.pdb.parse_pdb`), or an OpenMM Topology's
        (:func:`flashschnet.openmm.topology.cg_molecule_from_topology`).
    source : str
        What to call the input in messages (a file's path); stored as :attr:`CGMolecule.source`.
    mapping : str
        ``"5bead"`` or ``"ca"``.
    geometry : bool
        False when the coordinates are not known (all zero): chains then break only where ``after_ter`` or the
        chain says (no distance-based chain breaks), and a missing C-terminal O is an error rather than placed.
    n_models : int
        MODEL records of the file the residues come from (they are the first model's); more than one is a note.

    Returns
    -------
    CGMolecule
    """
    src = str(source)
    key = _mapping_key(mapping, src)
    if not residues:
        raise InputError(f"{src}: no residues; give a protein")
    return _build(residues, src, key, geometry, n_models)


def _build(residues: Sequence[RawResidue], src: str, mapping: str, geometry: bool, n_models: int) -> CGMolecule:
    notes: List[str] = []
    if n_models > 1:
        notes.append(note.several_models(src, n_models))

    ignored = Counter()
    noted_alias: Dict[str, List[str]] = {}
    protein: List[Tuple[RawResidue, str, Dict[str, Atom]]] = []
    n_alt_atoms = 0
    found = Counter()
    for res in residues:
        found[res.resname] += 1
        code = one_letter_code(res.resname)
        names = {a.name for a in res.atoms}
        if code is None:
            if (res.resname in residue_data.WATER_NAMES or res.resname in residue_data.ION_NAMES
                    or res.resname in residue_data.CAP_NAMES):
                ignored[res.resname] += 1
                continue
            if res.record == "HETATM":
                if {"N", "CA", "C"} <= names:
                    raise InputError(
                        f"{src}: HETATM residue {res.label} looks like a modified amino acid (it has N, CA "
                        f"and C atoms) that this mapping does not know; replace it by its standard parent "
                        f"residue (e.g. with pdbfixer) or remove it")
                ignored[res.resname] += 1
                continue
            raise InputError(
                f"{src}: unknown residue {res.label} in an ATOM record (line {res.atoms[0].lineno}); "
                f"accepted are {_accepted_names_text()}; rename or remove it")
        atoms, n_alt = select_atoms(res, src)
        n_alt_atoms += n_alt
        for a in atoms.values():
            check_coordinates(a, res, src)
        if res.resname in residue_data.NOTED_ALIASES:
            noted_alias.setdefault(res.resname, []).append(res.label)
        protein.append((res, code, atoms))

    if not protein:
        what = format_counts(found) if found else "nothing"
        raise InputError(f"{src}: no protein residues found (only {what}); give a PDB file of a protein "
                         f"with standard amino-acid residues")

    bead_atoms = residue_data.MAPPINGS[mapping]
    masses_table = residue_data.MASSES[mapping]

    # Required atoms. A missing O is only forgiven on the last residue of a connected chain (placed below).
    wanted_per_res: List[List[str]] = []
    no_o: List[int] = []
    for ri, (res, code, atoms) in enumerate(protein):
        wanted = [n for n in bead_atoms if not (n == "CB" and code == "G")]
        missing = [n for n in wanted if n not in atoms]
        if missing == ["O"] and geometry:
            no_o.append(ri)
        elif missing:
            raise _missing_atoms_error(res, missing, mapping, src)
        wanted_per_res.append(wanted)

    # Connected chains.
    chain_of_residue = np.zeros(len(protein), dtype=np.int64)
    chain_idx = 0
    for ri in range(1, len(protein)):
        prev, _, patoms = protein[ri - 1]
        res, _, atoms = protein[ri]
        new_chain = res.after_ter or res.chain != prev.chain
        if not new_chain and geometry:
            if "C" in patoms and "N" in atoms:
                d = float(np.linalg.norm(np.subtract(patoms["C"].xyz, atoms["N"].xyz)))
                limit, what = residue_data.MAX_PEPTIDE_BOND, "C-N"
            else:
                d = float(np.linalg.norm(np.subtract(patoms["CA"].xyz, atoms["CA"].xyz)))
                limit, what = residue_data.MAX_CA_CA_BOND, "CA-CA"
            if what == "C-N" and d < residue_data.MIN_PEPTIDE_BOND:
                notes.append(note.short_peptide_bond(src, prev.label, res.label, d, residue_data.MIN_PEPTIDE_BOND))
            if d > limit:
                new_chain = True
                notes.append(note.chain_break(src, prev.label, res.label, what, d, limit))
        if new_chain:
            chain_idx += 1
        chain_of_residue[ri] = chain_idx

    # C-terminal residue without its carbonyl O (e.g. an amidated C-terminus written without the O):
    # place the O bead by ideal geometry, with the N-CA-C-O dihedral of the previous residue.
    for ri in no_o:
        res, code, atoms = protein[ri]
        last_in_chain = ri == len(protein) - 1 or chain_of_residue[ri + 1] != chain_of_residue[ri]
        if not last_in_chain:
            raise _missing_atoms_error(res, ["O"], mapping, src)
        torsion = math.radians(residue_data.TERMINAL_O_DEFAULT_DIHEDRAL)
        if ri > 0 and chain_of_residue[ri - 1] == chain_of_residue[ri]:
            pat = protein[ri - 1][2]
            if all(n in pat for n in ("N", "CA", "C", "O")):
                torsion = dihedral(pat["N"].xyz, pat["CA"].xyz, pat["C"].xyz, pat["O"].xyz)
        xyz = place_atom(atoms["N"].xyz, atoms["CA"].xyz, atoms["C"].xyz, residue_data.CO_BOND_LENGTH,
                         math.radians(residue_data.CA_C_O_ANGLE), torsion)
        atoms["O"] = Atom(name="O", altloc="", occupancy=0.0, xyz=xyz, element="O", lineno=0)
        notes.append(note.terminal_o_placed(src, res.label, residue_data.CO_BOND_LENGTH, residue_data.CA_C_O_ANGLE, torsion))

    # Beads, per residue.
    residues: List[CGResidue] = []
    bead_names: List[str] = []
    bead_types: List[int] = []
    masses: List[float] = []
    positions: List[Tuple[float, float, float]] = []
    bead_residue: List[int] = []
    first_bead: Dict[Tuple[int, str], int] = {}
    for ri, (res, code, atoms) in enumerate(protein):
        residues.append(CGResidue(chain=res.chain, resseq=res.resseq, icode=res.icode,
                                  resname=res.resname, one_letter=code))
        for n in wanted_per_res[ri]:
            if mapping == "ca":
                t = residue_data.RESIDUE_TYPE[code]
            elif n == "CB":
                t = residue_data.RESIDUE_TYPE[code]
            elif n == "CA" and code == "G":
                t = residue_data.GLYCINE_CA_TYPE_5BEAD
            else:
                t = residue_data.BACKBONE_TYPE_5BEAD[n]
            first_bead[(ri, n)] = len(bead_names)
            bead_names.append(n)
            bead_types.append(t)
            masses.append(masses_table[n])
            positions.append(atoms[n].xyz)
            bead_residue.append(ri)

    # Bonds.
    bonds: List[Tuple[int, int]] = []
    for ri in range(len(protein)):
        code = protein[ri][1]
        b = lambda n, r=ri: first_bead[(r, n)]  # noqa: E731
        if mapping == "5bead":
            bonds.append((b("N"), b("CA")))
            if code != "G":
                bonds.append((b("CA"), b("CB")))
            bonds.append((b("CA"), b("C")))
            bonds.append((b("C"), b("O")))
            if ri > 0 and chain_of_residue[ri] == chain_of_residue[ri - 1]:
                bonds.append((first_bead[(ri - 1, "C")], b("N")))
        else:
            if ri > 0 and chain_of_residue[ri] == chain_of_residue[ri - 1]:
                bonds.append((first_bead[(ri - 1, "CA")], b("CA")))
    bond_arr = np.array([(min(i, j), max(i, j)) for i, j in bonds], dtype=np.int64).reshape(-1, 2)
    if len(bond_arr):
        bond_arr = bond_arr[np.lexsort((bond_arr[:, 1], bond_arr[:, 0]))]

    if n_alt_atoms:
        notes.append(note.alternate_locations(src, n_alt_atoms, "protein atoms"))
    if ignored:
        notes.append(note.ignored_non_protein(src, ignored))
    for name, labels in noted_alias.items():
        notes.append(note.noted_alias(src, name, residue_data.NOTED_ALIASES[name], labels))

    return CGMolecule(
        mapping=mapping,
        bead_names=bead_names,
        bead_types=np.asarray(bead_types, dtype=np.int64),
        masses=np.asarray(masses, dtype=np.float64),
        positions=np.asarray(positions, dtype=np.float64).reshape(-1, 3),
        bead_residue=np.asarray(bead_residue, dtype=np.int64),
        residues=residues,
        chain_of_residue=chain_of_residue,
        bonds=bond_arr,
        source=src,
        notes=notes,
    )
