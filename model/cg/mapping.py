"""PDB -> coarse-grained molecule: the 5-bead (N, CA, CB, C, O) and CA-only mappings of mlcg.

:func:`map_pdb` (a file), :func:`map_pdb_text` (its text) and :func:`map_residues` (residues in memory, e.g.
from an OpenMM Topology) build a :class:`~flashschnet.cg.molecule.CGMolecule`: beads on the mapped atoms
(positions in Angstrom, masses in amu, mlcg bead types), connected chains (TER records, chain changes and
over-long peptide bonds break them), CG bonds within chains, and a C-terminal O bead placed by ideal geometry
when the file lacks it. The PDB text is read by :mod:`flashschnet.cg.pdb`.

Every problem with the input is an :class:`~flashschnet.errors.InputError` with a one-line message naming
the file, the residue or atom at fault and what to do; things that are ignored or chosen on the user's behalf
are one-line notes in :attr:`CGMolecule.notes`.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import InputError
from . import tables
from .molecule import CGMolecule, CGResidue
from .pdb import (Atom, ParsedPDB, RawResidue, check_coordinates, decode_pdb, parse_pdb, read_pdb_file,
                  select_atoms)

__all__ = ["map_pdb", "map_pdb_text", "map_residues", "available_mappings", "one_letter_code"]


def available_mappings() -> Tuple[str, ...]:
    """Names of the mappings :func:`map_pdb` accepts."""
    return tuple(tables.MAPPINGS)


def one_letter_code(resname: str) -> Optional[str]:
    """One-letter code of a residue name (standard, variant or Amber terminal name), or None."""
    name = resname.strip().upper()
    if name in tables.STANDARD_RESIDUES:
        return tables.STANDARD_RESIDUES[name]
    if name in tables.RESIDUE_ALIASES:
        return tables.RESIDUE_ALIASES[name]
    if len(name) == 4 and name[0] in tables.TERMINAL_PREFIXES:
        rest = name[1:]
        if rest in tables.STANDARD_RESIDUES:
            return tables.STANDARD_RESIDUES[rest]
        if rest in tables.RESIDUE_ALIASES:
            return tables.RESIDUE_ALIASES[rest]
    return None


def _accepted_names_text() -> str:
    return ("the 20 standard amino acids, " + ", ".join(sorted(tables.RESIDUE_ALIASES))
            + " and Amber terminal names such as NALA/CALA")

def format_counts(counter: Counter) -> str:
    """``"HOH x53, NA x2"``: most frequent first, then by name (for one-line notes)."""
    return ", ".join(f"{name} x{n}" for name, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def format_list(labels: List[str], limit: int = 5) -> str:
    """``"a, b, c and 4 more"``: the first ``limit`` labels (for one-line notes and errors)."""
    return ", ".join(labels[:limit]) + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def _missing_atoms_error(res: RawResidue, missing: List[str], mapping: str, src: str) -> InputError:
    needed = tables.MAPPINGS[mapping]
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


def _dihedral(p0, p1, p2, p3) -> float:
    """Dihedral angle p0-p1-p2-p3 in radians (IUPAC sign convention)."""
    p0, p1, p2, p3 = (np.asarray(p, dtype=np.float64) for p in (p0, p1, p2, p3))
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    b1n = b1 / np.linalg.norm(b1)
    v = b0 - np.dot(b0, b1n) * b1n
    w = b2 - np.dot(b2, b1n) * b1n
    return float(math.atan2(np.dot(np.cross(b1n, v), w), np.dot(v, w)))


def _place_atom(a, b, c, bond: float, angle: float, dihedral: float) -> Tuple[float, float, float]:
    """Position d with |cd| = bond (Angstrom), angle b-c-d and dihedral a-b-c-d (radians)."""
    a, b, c = (np.asarray(p, dtype=np.float64) for p in (a, b, c))
    bc = c - b
    bc /= np.linalg.norm(bc)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.cross(n, bc)
    d2 = np.array([-bond * math.cos(angle), bond * math.sin(angle) * math.cos(dihedral),
                   bond * math.sin(angle) * math.sin(dihedral)])
    d = c + d2[0] * bc + d2[1] * m + d2[2] * n
    return float(d[0]), float(d[1]), float(d[2])


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
    key = str(mapping).strip().lower() if isinstance(mapping, str) else mapping
    if key not in tables.MAPPINGS:
        raise InputError(f"{src}: unknown mapping {mapping!r}; valid mappings are "
                         + ", ".join(repr(m) for m in tables.MAPPINGS))
    if isinstance(text, bytes):
        text = decode_pdb(text, src)
    parsed = parse_pdb(text, src)
    return _build(parsed, src, key)


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
    key = str(mapping).strip().lower() if isinstance(mapping, str) else mapping
    if key not in tables.MAPPINGS:
        raise InputError(f"{p}: unknown mapping {mapping!r}; valid mappings are "
                         + ", ".join(repr(m) for m in tables.MAPPINGS))
    text = read_pdb_file(p)
    return map_pdb_text(text, source=str(p), mapping=key)


def map_residues(residues: Sequence[Tuple[str, int, str, str, bool, Sequence[Tuple[str, str, Tuple[float, float, float]]]]],
                 source: str, mapping: str = "5bead", geometry: bool = True) -> CGMolecule:
    """Map residues given in memory (e.g. from an OpenMM Topology) onto a CG molecule, with the rules of
    :func:`map_pdb`.

    Parameters
    ----------
    residues : sequence of (chain, resseq, icode, resname, new_chain, atoms)
        In order. ``new_chain`` starts a new chain (like a TER record); ``atoms`` is a sequence of
        ``(name, element symbol or "", (x, y, z) in Angstrom)``.
    source : str
        What to call the input in messages.
    mapping : str
        ``"5bead"`` or ``"ca"``.
    geometry : bool
        False when the coordinates are not known (all zero): chains then break only where ``new_chain`` says
        (no distance-based chain breaks), and a missing C-terminal O is an error rather than placed.

    Returns
    -------
    CGMolecule
    """
    key = str(mapping).strip().lower() if isinstance(mapping, str) else mapping
    if key not in tables.MAPPINGS:
        raise InputError(f"{source}: unknown mapping {mapping!r}; valid mappings are "
                         + ", ".join(repr(m) for m in tables.MAPPINGS))
    raw: List[RawResidue] = []
    for chain, resseq, icode, resname, new_chain, atoms in residues:
        res = RawResidue(record="ATOM", chain=chain or " ", resseq=int(resseq), icode=icode or "",
                          resname=str(resname).strip().upper(), after_ter=bool(new_chain))
        for k, (name, element, xyz) in enumerate(atoms):
            res.atoms.append(Atom(name=str(name).strip(), altloc="", occupancy=1.0,
                                   xyz=tuple(float(v) for v in xyz), element=element or "", lineno=0))
        raw.append(res)
    if not raw:
        raise InputError(f"{source}: no residues; give a protein")
    return _build(ParsedPDB(residues=raw, n_models=1), str(source), key, geometry=geometry)


def _build(parsed: ParsedPDB, src: str, mapping: str, geometry: bool = True) -> CGMolecule:
    notes: List[str] = []
    if parsed.n_models > 1:
        notes.append(f"{src}: {parsed.n_models} models found; using the first (MODEL 1) only")

    ignored = Counter()
    noted_alias: Dict[str, List[str]] = {}
    protein: List[Tuple[RawResidue, str, Dict[str, Atom]]] = []
    n_alt_atoms = 0
    found = Counter()
    for res in parsed.residues:
        found[res.resname] += 1
        code = one_letter_code(res.resname)
        names = {a.name for a in res.atoms}
        if code is None:
            if (res.resname in tables.WATER_NAMES or res.resname in tables.ION_NAMES
                    or res.resname in tables.CAP_NAMES):
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
        if res.resname in tables.NOTED_ALIASES:
            noted_alias.setdefault(res.resname, []).append(res.label)
        protein.append((res, code, atoms))

    if not protein:
        what = format_counts(found) if found else "nothing"
        raise InputError(f"{src}: no protein residues found (only {what}); give a PDB file of a protein "
                         f"with standard amino-acid residues")

    bead_atoms = tables.MAPPINGS[mapping]
    masses_table = tables.MASSES[mapping]

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
                limit, what = tables.MAX_PEPTIDE_BOND, "C-N"
            else:
                d = float(np.linalg.norm(np.subtract(patoms["CA"].xyz, atoms["CA"].xyz)))
                limit, what = tables.MAX_CA_CA_BOND, "CA-CA"
            if what == "C-N" and d < tables.MIN_PEPTIDE_BOND:
                notes.append(f"{src}: suspiciously short peptide bond between {prev.label} and {res.label} "
                             f"(C-N distance {d:.2f} A < {tables.MIN_PEPTIDE_BOND:.1f} A); bonded anyway, "
                             f"check the structure (minimise it or rebuild that junction)")
            if d > limit:
                new_chain = True
                notes.append(f"{src}: chain break between {prev.label} and {res.label} ({what} distance "
                             f"{d:.2f} A > {limit:.1f} A); no CG bond across, they start separate chains")
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
        dihedral = math.radians(tables.TERMINAL_O_DEFAULT_DIHEDRAL)
        if ri > 0 and chain_of_residue[ri - 1] == chain_of_residue[ri]:
            pat = protein[ri - 1][2]
            if all(n in pat for n in ("N", "CA", "C", "O")):
                dihedral = _dihedral(pat["N"].xyz, pat["CA"].xyz, pat["C"].xyz, pat["O"].xyz)
        xyz = _place_atom(atoms["N"].xyz, atoms["CA"].xyz, atoms["C"].xyz, tables.CO_BOND_LENGTH,
                          math.radians(tables.CA_C_O_ANGLE), dihedral)
        atoms["O"] = Atom(name="O", altloc="", occupancy=0.0, xyz=xyz, element="O", lineno=0)
        notes.append(f"{src}: C-terminal residue {res.label} has no O atom; placed its O bead by ideal "
                     f"geometry (C=O {tables.CO_BOND_LENGTH} A, CA-C-O {tables.CA_C_O_ANGLE} deg, "
                     f"N-CA-C-O {math.degrees(dihedral):.0f} deg)")

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
                t = tables.RESIDUE_TYPE[code]
            elif n == "CB":
                t = tables.RESIDUE_TYPE[code]
            elif n == "CA" and code == "G":
                t = tables.GLYCINE_CA_TYPE_5BEAD
            else:
                t = tables.BACKBONE_TYPE_5BEAD[n]
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
        notes.append(f"{src}: {n_alt_atoms} protein atoms have alternate locations; kept, per atom, the one "
                     f"with the highest occupancy (first in the file on ties)")
    if ignored:
        notes.append(f"{src}: ignored {sum(ignored.values())} non-protein residues (waters, ions, caps, "
                     f"ligands): {format_counts(ignored)}")
    for name, labels in noted_alias.items():
        shown = format_list(labels)
        notes.append(f"{src}: {name} read as {tables.NOTED_ALIASES[name]}: {shown}")

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
