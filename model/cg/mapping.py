"""PDB -> coarse-grained molecule.

A small fixed-column PDB reader (ATOM/HETATM/MODEL/ENDMDL/TER/END records) and the 5-bead (N, CA, CB, C, O)
and CA-only mappings of mlcg. Every problem with the input is an :class:`~flashschnet.errors.InputError`
with a one-line message naming the file, the residue or atom at fault and what to do; things that are
ignored or chosen on the user's behalf are one-line notes in :attr:`CGMolecule.notes`.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import InputError
from . import tables
from .molecule import CGMolecule, CGResidue

__all__ = ["map_pdb", "map_pdb_text", "available_mappings", "one_letter_code"]


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


# ----------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------

@dataclass
class _Atom:
    name: str
    altloc: str
    occupancy: float
    xyz: Tuple[float, float, float]
    element: str
    lineno: int


@dataclass
class _RawResidue:
    record: str          # "ATOM" or "HETATM" (of its first atom)
    chain: str
    resseq: int
    icode: str
    resname: str
    after_ter: bool      # a TER record came between the previous residue and this one
    atoms: List[_Atom] = field(default_factory=list)

    @property
    def label(self) -> str:
        chain = self.chain.strip() or "-"
        return f"{self.resname} {self.resseq}{self.icode} (chain {chain})"


def _read_text(path: Path) -> str:
    src = str(path)
    if not path.exists():
        raise InputError(f"{src}: file does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{src}: is a directory, not a PDB file; give the path of a .pdb file")
    data = path.read_bytes()
    return _decode(data, src)


def _decode(data: bytes, src: str) -> str:
    if not data.strip():
        raise InputError(f"{src}: file is empty, not a PDB file; give a PDB file with ATOM records")
    if b"\x00" in data:
        raise InputError(f"{src}: is a binary file, not a PDB file; give a text PDB file with ATOM records")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
        # Mostly non-printable bytes: junk, not a PDB file with a stray accent in a REMARK.
        bad = sum(1 for ch in text if ord(ch) < 32 and ch not in "\r\n\t" or 127 <= ord(ch) < 160)
        if bad > 0.01 * len(text):
            raise InputError(f"{src}: is a binary file, not a PDB file; give a text PDB file with ATOM records")
        return text


#: the largest |coordinate| (Angstrom) a PDB record's %8.3f field can hold
MAX_COORDINATE = 9999.999


def _parse_float(line: str, a: int, b: int, what: str, lineno: int, src: str) -> float:
    field_text = line[a:b].strip()
    try:
        return float(field_text)
    except ValueError:
        raise InputError(f"{src}: line {lineno}: cannot read the {what} coordinate {field_text!r} "
                         f"(columns {a + 1}-{b}); fix the fixed-column ATOM/HETATM record") from None


def _is_hydrogen(name: str, element: str) -> bool:
    if element:
        return element.upper() in tables.HYDROGEN_ELEMENTS
    stripped = name.lstrip("0123456789")
    return stripped.upper().startswith("H")


@dataclass
class _Parsed:
    residues: List[_RawResidue]
    n_models: int


def _parse(text: str, src: str) -> _Parsed:
    residues: List[_RawResidue] = []
    n_models = 0
    in_first_model = True     # before any MODEL record, or inside the first one
    done = False
    saw_atom = False
    pending_ter = False
    current: Optional[_RawResidue] = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        rec = raw[:6].strip().upper()
        if rec == "MODEL":
            n_models += 1
            in_first_model = n_models == 1
            continue
        if rec == "ENDMDL":
            if n_models >= 1:
                in_first_model = False
            continue
        if rec not in ("ATOM", "HETATM", "TER", "END"):
            continue
        if rec == "END":
            if saw_atom:
                done = True
            continue
        if done or not in_first_model:
            continue
        if rec == "TER":
            pending_ter = True
            current = None
            continue
        saw_atom = True
        line = raw.rstrip("\r\n")
        name = line[12:16].strip()
        altloc = line[16:17].strip()
        resname = line[17:21].strip().upper()
        chain = line[21:22] if len(line) > 21 else " "
        resseq_text = line[22:26].strip()
        icode = line[26:27].strip()
        try:
            resseq = int(resseq_text)
        except ValueError:
            try:  # hybrid-36 / hexadecimal numbering of huge systems
                resseq = int(resseq_text, 16) if resseq_text else 0
            except ValueError:
                raise InputError(f"{src}: line {lineno}: cannot read the residue number {resseq_text!r} "
                                 f"(columns 23-26) of atom {name} {resname}; fix the record") from None
        x = _parse_float(line, 30, 38, "x", lineno, src)
        y = _parse_float(line, 38, 46, "y", lineno, src)
        z = _parse_float(line, 46, 54, "z", lineno, src)
        occ_text = line[54:60].strip()
        try:
            occupancy = float(occ_text) if occ_text else 1.0
        except ValueError:
            occupancy = 1.0
        element = line[76:78].strip() if len(line) > 76 else ""
        atom = _Atom(name=name, altloc=altloc, occupancy=occupancy, xyz=(x, y, z),
                     element=element, lineno=lineno)
        if (current is None or current.chain != chain or current.resseq != resseq
                or current.icode != icode or (current.resname != resname and not altloc)):
            current = _RawResidue(record=rec, chain=chain, resseq=resseq, icode=icode, resname=resname,
                                  after_ter=pending_ter)
            pending_ter = False
            residues.append(current)
        current.atoms.append(atom)
    if not saw_atom:
        raise InputError(f"{src}: not a PDB file (no ATOM or HETATM records); give a PDB file of a protein")
    return _Parsed(residues=residues, n_models=n_models)


# ----------------------------------------------------------------------------------------------------
# Mapping
# ----------------------------------------------------------------------------------------------------

def _select_atoms(res: _RawResidue, src: str) -> Tuple[Dict[str, _Atom], int]:
    """Heavy atoms of a protein residue by name, alternate locations resolved.

    Returns (atoms by name, number of atoms that had alternate locations)."""
    by_name: Dict[str, List[_Atom]] = {}
    for atom in res.atoms:
        if atom.name in tables.IGNORED_ATOMS or _is_hydrogen(atom.name, atom.element):
            continue
        by_name.setdefault(atom.name, []).append(atom)
    chosen: Dict[str, _Atom] = {}
    n_alt = 0
    for name, cands in by_name.items():
        if len(cands) > 1:
            locs = [a.altloc for a in cands]
            if len(set(locs)) != len(locs) or not any(locs):
                dup = Counter(locs).most_common(1)[0][0]
                where = f"altLoc {dup!r}" if dup else "no alternate location"
                raise InputError(
                    f"{src}: residue {res.label} has atom {name} twice ({where}, lines "
                    f"{cands[0].lineno} and {cands[1].lineno}); remove the duplicate or give the "
                    f"copies distinct altLoc labels")
        if any(a.altloc for a in cands):
            n_alt += 1
        best = cands[0]
        for a in cands[1:]:
            if a.occupancy > best.occupancy:
                best = a
        chosen[name] = best
    if "O" not in chosen:
        for alias in tables.TERMINAL_O_ALIASES:
            if alias in chosen:
                chosen["O"] = chosen[alias]
                break
    return chosen, n_alt


def _format_counts(counter: Counter) -> str:
    return ", ".join(f"{name} x{n}" for name, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def _missing_atoms_error(res: _RawResidue, missing: List[str], mapping: str, src: str) -> InputError:
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
        text = _decode(text, src)
    parsed = _parse(text, src)
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
    text = _read_text(p)
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
    raw: List[_RawResidue] = []
    for chain, resseq, icode, resname, new_chain, atoms in residues:
        res = _RawResidue(record="ATOM", chain=chain or " ", resseq=int(resseq), icode=icode or "",
                          resname=str(resname).strip().upper(), after_ter=bool(new_chain))
        for k, (name, element, xyz) in enumerate(atoms):
            res.atoms.append(_Atom(name=str(name).strip(), altloc="", occupancy=1.0,
                                   xyz=tuple(float(v) for v in xyz), element=element or "", lineno=0))
        raw.append(res)
    if not raw:
        raise InputError(f"{source}: no residues; give a protein")
    return _build(_Parsed(residues=raw, n_models=1), str(source), key, geometry=geometry)


def _build(parsed: _Parsed, src: str, mapping: str, geometry: bool = True) -> CGMolecule:
    notes: List[str] = []
    if parsed.n_models > 1:
        notes.append(f"{src}: {parsed.n_models} models found; using the first (MODEL 1) only")

    ignored = Counter()
    noted_alias: Dict[str, List[str]] = {}
    protein: List[Tuple[_RawResidue, str, Dict[str, _Atom]]] = []
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
        atoms, n_alt = _select_atoms(res, src)
        n_alt_atoms += n_alt
        for a in atoms.values():
            if not all(math.isfinite(v) for v in a.xyz):
                raise InputError(f"{src}: line {a.lineno}: atom {a.name} of residue {res.label} has a "
                                 f"non-finite coordinate {a.xyz}; fix or regenerate the structure")
            if any(abs(v) > MAX_COORDINATE for v in a.xyz):
                raise InputError(f"{src}: line {a.lineno}: atom {a.name} of residue {res.label} has a coordinate "
                                 f"beyond what a PDB record holds ({a.xyz}, |x| > {MAX_COORDINATE:g} A); fix or "
                                 "regenerate the structure")
        if res.resname in tables.NOTED_ALIASES:
            noted_alias.setdefault(res.resname, []).append(res.label)
        protein.append((res, code, atoms))

    if not protein:
        what = _format_counts(found) if found else "nothing"
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
        atoms["O"] = _Atom(name="O", altloc="", occupancy=0.0, xyz=xyz, element="O", lineno=0)
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
                     f"ligands): {_format_counts(ignored)}")
    for name, labels in noted_alias.items():
        shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
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
