"""Reading PDB text: a small fixed-column PDB reader for the CG mapping (:mod:`flashschnet.cg.mapping`).

Reads ATOM/HETATM/MODEL/ENDMDL/TER/END records (only the first MODEL; a TER record starts a new chain),
decodes the file's bytes (UTF-8, else Latin-1 unless it is binary junk), and resolves a residue's heavy atoms
(hydrogens and :data:`~flashschnet.cg.residue_data.IGNORED_ATOMS` dropped, alternate locations resolved by
:func:`highest_occupancy`). Coordinates are kept as read, in Angstrom (float).

Two rules here are the only copies of their kind, used by every way in (a raw file, the cleaning step of both
engines, the OpenMM-ML path's positions): :func:`highest_occupancy` (which alternate location is kept) and
:func:`position_fault` (which input coordinates are refused: non-finite, or beyond what a PDB record holds).

Every problem with the input (missing, empty or binary file, no ATOM/HETATM records, unreadable coordinate
or residue number, an atom twice without distinct altLoc labels) is an :class:`~flashschnet.errors.InputError`
with a one-line message naming the file and the line or residue at fault and what to do.
"""
from __future__ import annotations

import math

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import InputError
from . import residue_data
from .notes import residue_label

__all__ = ["Atom", "RawResidue", "ParsedPDB", "MAX_COORDINATE", "position_fault", "check_coordinates",
           "highest_occupancy", "read_pdb_file", "decode_pdb", "parse_pdb", "residue_number", "select_atoms"]


@dataclass
class Atom:
    """One ATOM/HETATM record: atom name, altLoc ("" when none), occupancy (1.0 when blank or unreadable),
    coordinates (x, y, z) in Angstrom, element symbol ("" when blank) and 1-based line number (0: not from
    a file)."""

    name: str
    altloc: str
    occupancy: float
    xyz: Tuple[float, float, float]
    element: str
    lineno: int


@dataclass
class RawResidue:
    """The records of one residue, in file order, as read (before any mapping)."""

    record: str          # "ATOM" or "HETATM" (of its first atom)
    chain: str
    resseq: int
    icode: str
    resname: str
    after_ter: bool      # a TER record came between the previous residue and this one
    atoms: List[Atom] = field(default_factory=list)

    @property
    def label(self) -> str:
        return residue_label(self.resname, f"{self.resseq}{self.icode}", self.chain)


def read_pdb_file(path: Path) -> str:
    """Text of the file ``path`` (see :func:`decode_pdb`); InputError when it is missing or a directory."""
    src = str(path)
    if not path.exists():
        raise InputError(f"{src}: file does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{src}: is a directory, not a PDB file; give the path of a .pdb file")
    data = path.read_bytes()
    return decode_pdb(data, src)


def decode_pdb(data: bytes, src: str) -> str:
    """Text of the bytes of a PDB file (UTF-8, else Latin-1); InputError (naming ``src``) when empty or binary."""
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


def position_fault(xyz) -> str:
    """What is wrong with an input position (x, y, z in Angstrom): ``"non-finite"``, ``"beyond"`` (some |x| >
    :data:`MAX_COORDINATE`, more than a PDB record holds), or ``""`` for a usable one."""
    if not all(math.isfinite(v) for v in xyz):
        return "non-finite"
    if any(abs(v) > MAX_COORDINATE for v in xyz):
        return "beyond"
    return ""


def check_coordinates(atom: Atom, res: "RawResidue", src: str) -> None:
    """One-line :class:`InputError` (line, atom, residue) when ``atom``'s position has a :func:`position_fault`,
    before anything downstream sees it."""
    fault = position_fault(atom.xyz)
    if fault == "non-finite":
        raise InputError(f"{src}: line {atom.lineno}: atom {atom.name} of residue {res.label} has a "
                         f"non-finite coordinate {atom.xyz}; fix or regenerate the structure")
    if fault:
        raise InputError(f"{src}: line {atom.lineno}: atom {atom.name} of residue {res.label} has a coordinate "
                         f"beyond what a PDB record holds ({atom.xyz}, |x| > {MAX_COORDINATE:g} A); fix or "
                         "regenerate the structure")


def _is_hydrogen(name: str, element: str) -> bool:
    if element:
        return element.upper() in residue_data.HYDROGEN_ELEMENTS
    stripped = name.lstrip("0123456789")
    return stripped.upper().startswith("H")


@dataclass
class ParsedPDB:
    """A read PDB file: the residues of its first model, and how many MODEL records it has (0: none)."""

    residues: List[RawResidue]
    n_models: int


def parse_pdb(text: str, src: str) -> ParsedPDB:
    """Read the residues of the first model of PDB ``text`` (``src`` names it in messages).

    A new residue starts at a change of chain, residue number, insertion code, or residue name (the latter
    only on an atom without altLoc); records after the first END (once atoms were read) are ignored.
    InputError when there is no ATOM/HETATM record or a coordinate or residue number cannot be read.
    """
    residues: List[RawResidue] = []
    n_models = 0
    in_first_model = True     # before any MODEL record, or inside the first one
    done = False
    saw_atom = False
    pending_ter = False
    current: Optional[RawResidue] = None
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
            resseq = residue_number(resseq_text)
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
        atom = Atom(name=name, altloc=altloc, occupancy=occupancy, xyz=(x, y, z),
                     element=element, lineno=lineno)
        if (current is None or current.chain != chain or current.resseq != resseq
                or current.icode != icode or (current.resname != resname and not altloc)):
            current = RawResidue(record=rec, chain=chain, resseq=resseq, icode=icode, resname=resname,
                                  after_ter=pending_ter)
            pending_ter = False
            residues.append(current)
        current.atoms.append(atom)
    if not saw_atom:
        raise InputError(f"{src}: not a PDB file (no ATOM or HETATM records); give a PDB file of a protein")
    return ParsedPDB(residues=residues, n_models=n_models)


def residue_number(text: str) -> int:
    """The residue number of a PDB record's columns 23-26 (stripped): decimal, else hexadecimal (the numbering of
    huge systems), 0 when blank; ValueError when it is neither."""
    try:
        return int(text)
    except ValueError:
        return int(text, 16) if text else 0


def highest_occupancy(occupancies: Sequence[float]) -> int:
    """Which of an atom's alternate locations (or a position's alternative residue types) to keep: the index of the
    highest occupancy, the first on ties (a NaN occupancy never wins over an earlier one). The one rule of the
    raw-file reader (:func:`select_atoms`) and of the cleaning step."""
    best = 0
    for i in range(1, len(occupancies)):
        if occupancies[i] > occupancies[best]:
            best = i
    return best


def select_atoms(res: RawResidue, src: str) -> Tuple[Dict[str, Atom], int]:
    """Heavy atoms of a protein residue by name, alternate locations resolved.

    Returns (atoms by name, number of atoms that had alternate locations)."""
    by_name: Dict[str, List[Atom]] = {}
    for atom in res.atoms:
        if atom.name in residue_data.IGNORED_ATOMS or _is_hydrogen(atom.name, atom.element):
            continue
        by_name.setdefault(atom.name, []).append(atom)
    chosen: Dict[str, Atom] = {}
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
        chosen[name] = cands[highest_occupancy([a.occupancy for a in cands])]
    if "O" not in chosen:
        for alias in residue_data.TERMINAL_O_ALIASES:
            if alias in chosen:
                chosen["O"] = chosen[alias]
                break
    return chosen, n_alt

