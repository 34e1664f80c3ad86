"""A reader for the GROMACS topologies that martinize2 and insane write (MARTINI 3), into plain data.

OpenMM's ``GromacsTopFile`` cannot read these files (``virtual_sitesn``, angle type 10, ...), so this module
reads exactly what the MARTINI tool chain produces: the C-preprocessor subset (``#include``, ``#define``,
``#ifdef``/``#ifndef``/``#else``/``#endif``, whole-token macro substitution), ``;`` comments and ``\\``
continuations, and the sections

``defaults, atomtypes, nonbond_params, moleculetype, atoms, bonds, constraints, angles, dihedrals,
exclusions, virtual_sitesn, virtual_sites2, virtual_sites3, position_restraints, system, molecules``.

That covers MartiniGo too (``martinize2 -go``): the Go virtual sites are ``[ virtual_sitesn ]`` of one backbone
bead each, their atom types come from ``go_atomtypes.itp`` (an ``[ atomtypes ]`` section after the force
field's ``[ nonbond_params ]``) and their LJ contacts from ``go_nbparams.itp`` (more ``[ nonbond_params ]``).

Numbers stay in GROMACS units (nm, kJ/mol, degrees, amu, e); interactions keep their GROMACS function type
and raw parameters; atom indices become 0-based. What the parameters mean is the System builder's business.
Anything else (an unknown section, a malformed line, an index out of range, a missing include) is a
:class:`TopologyError` naming the file and line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ...errors import InputError


class TopologyError(InputError):
    """A GROMACS topology this reader cannot use; the message names the file and line."""


#: atoms per interaction of each section (exclusions and virtual sites have their own layouts)
_ARITY = {"bonds": 2, "constraints": 2, "angles": 3, "dihedrals": 4, "position_restraints": 1}

_SECTIONS = {"defaults", "atomtypes", "nonbond_params", "moleculetype", "atoms", "bonds", "constraints", "angles",
             "dihedrals", "exclusions", "virtual_sitesn", "virtual_sites2", "virtual_sites3",
             "position_restraints", "system", "molecules"}


@dataclass
class AtomType:
    name: str
    mass: float          # amu
    charge: float        # e
    ptype: str           # "A" (atom) or "V"/"D" (virtual)
    sigma: float         # nm (comb. rule 2/3) or C6 (rule 1)
    epsilon: float       # kJ/mol (comb. rule 2/3) or C12 (rule 1)


@dataclass
class Atom:
    type: str
    resnr: int
    resname: str
    name: str
    cgnr: int
    charge: float        # e
    mass: float          # amu (from the atom type when the line has none)


@dataclass
class Interaction:
    atoms: Tuple[int, ...]      # 0-based indices within the molecule
    func: int                   # GROMACS function type
    params: Tuple[float, ...]   # raw parameters, GROMACS units
    where: str = ""             # "file:line", for error messages


@dataclass
class VirtualSite:
    site: int                   # 0-based
    func: int                   # virtual_sitesn: 1 COG, 2 COM, 3 COW; virtual_sites2/3: GROMACS types
    atoms: Tuple[int, ...]      # constructing atoms, 0-based
    params: Tuple[float, ...]   # weights (virtual_sitesn func 3) or the construction parameters
    kind: str = "n"             # "n", "2" or "3"
    where: str = ""


@dataclass
class MoleculeType:
    name: str
    nrexcl: int
    atoms: List[Atom] = field(default_factory=list)
    interactions: Dict[str, List[Interaction]] = field(default_factory=dict)
    exclusions: List[Tuple[int, ...]] = field(default_factory=list)   # each: first atom, then the excluded ones
    virtual_sites: List[VirtualSite] = field(default_factory=list)

    def of(self, section: str) -> List[Interaction]:
        return self.interactions.get(section, [])


@dataclass
class Topology:
    """A whole system: force-field tables, molecule types and the ``[ molecules ]`` list."""

    nbfunc: int = 1
    comb_rule: int = 2
    gen_pairs: str = "no"
    fudge_lj: float = 1.0
    fudge_qq: float = 1.0
    atomtypes: Dict[str, AtomType] = field(default_factory=dict)
    nonbond_params: Dict[Tuple[str, str], Tuple[int, float, float]] = field(default_factory=dict)
    moleculetypes: Dict[str, MoleculeType] = field(default_factory=dict)
    system_name: str = ""
    molecules: List[Tuple[str, int]] = field(default_factory=list)
    files: List[str] = field(default_factory=list)

    def pair_parameters(self, a: str, b: str) -> Tuple[float, float]:
        """``(sigma nm, epsilon kJ/mol)`` of the LJ interaction of atom types ``a`` and ``b``: the explicit
        ``[ nonbond_params ]`` entry (either order) or the combination rule."""
        if self.comb_rule not in (2, 3):
            raise TopologyError(f"combination rule {self.comb_rule} (C6/C12 form) is not supported; MARTINI uses 2")
        hit = self.nonbond_params.get((a, b)) or self.nonbond_params.get((b, a))
        if hit is not None:
            return hit[1], hit[2]
        ta, tb = self.atomtypes[a], self.atomtypes[b]
        if self.comb_rule == 2:
            return 0.5 * (ta.sigma + tb.sigma), (ta.epsilon * tb.epsilon) ** 0.5
        return (ta.sigma * tb.sigma) ** 0.5, (ta.epsilon * tb.epsilon) ** 0.5

    def n_particles(self) -> int:
        return sum(len(self.moleculetypes[name].atoms) * count for name, count in self.molecules)


# ------------------------------------------------------------------------------------------ preprocessor


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _logical_lines(path: str, include_dirs: Sequence[str], defines: Dict[str, str], seen: List[str],
                   depth: int = 0) -> Iterator[Tuple[str, str]]:
    """``(where, text)`` of every line that survives the preprocessor, comments stripped, includes expanded."""
    if depth > 32:
        raise TopologyError(f"{path}: #include nested more than 32 deep (a cycle?)")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            raw = fh.read().splitlines()
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read ({exc.strerror})") from None
    seen.append(os.path.abspath(path))
    active: List[bool] = []            # one entry per open #if block: is its current branch taken
    buf, start = "", 0
    for n, line in enumerate(raw, 1):
        if not buf:
            start = n
        line = line.split(";", 1)[0].rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        text, buf = (buf + line).strip(), ""
        where = f"{path}:{start}"
        if text.startswith("#"):
            words = text[1:].split()
            if not words:
                continue
            cmd, args = words[0], words[1:]
            if cmd in ("ifdef", "ifndef"):
                if not args:
                    raise TopologyError(f"{where}: #{cmd} without a name")
                taken = (args[0] in defines) == (cmd == "ifdef")
                active.append(taken)
            elif cmd == "else":
                if not active:
                    raise TopologyError(f"{where}: #else without #ifdef")
                active[-1] = not active[-1]
            elif cmd == "endif":
                if not active:
                    raise TopologyError(f"{where}: #endif without #ifdef")
                active.pop()
            elif not all(active):
                continue
            elif cmd == "define":
                if not args:
                    raise TopologyError(f"{where}: #define without a name")
                defines[args[0]] = " ".join(args[1:])
            elif cmd == "undef":
                defines.pop(args[0] if args else "", None)
            elif cmd == "include":
                name = text[len("#include"):].strip().strip('"<>')
                yield from _logical_lines(_find_include(name, path, include_dirs, where), include_dirs, defines,
                                          seen, depth + 1)
            else:
                raise TopologyError(f"{where}: unsupported preprocessor directive #{cmd}")
            continue
        if not text or not all(active):
            continue
        if defines:
            text = _TOKEN.sub(lambda m: defines.get(m.group(0), m.group(0)) or m.group(0), text)
        yield where, text
    if active:
        raise TopologyError(f"{path}: {len(active)} #ifdef/#ifndef block(s) not closed by #endif")


def _find_include(name: str, including: str, include_dirs: Sequence[str], where: str) -> str:
    for d in [os.path.dirname(os.path.abspath(including)), *include_dirs]:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    dirs = ", ".join([os.path.dirname(os.path.abspath(including)), *include_dirs])
    raise TopologyError(f"{where}: #include \"{name}\" not found (looked in {dirs}); pass the force-field "
                        "folder (--forcefield-dir) that holds it")


# ------------------------------------------------------------------------------------------------ reader


def _num(tok: str, where: str, what: str) -> float:
    try:
        return float(tok)
    except ValueError:
        raise TopologyError(f"{where}: {what} {tok!r} is not a number") from None


def _int(tok: str, where: str, what: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise TopologyError(f"{where}: {what} {tok!r} is not an integer") from None


def read_topology(path, include_dirs: Sequence[str] = (), defines: Optional[Dict[str, str]] = None) -> Topology:
    """Read a GROMACS ``.top`` (and everything it includes).

    Parameters
    ----------
    path : str or PathLike
        The top-level topology (martinize2's ``-o``, or insane's).
    include_dirs : sequence of str
        Where ``#include`` files are looked for after the including file's folder (the force-field folder).
    defines : dict, optional
        Preprocessor names defined before reading (like ``gmx grompp -DNAME``), e.g. ``{"FLEXIBLE": ""}``.

    Returns
    -------
    Topology
    """
    path = os.fspath(path)
    top = Topology()
    defs = dict(defines or {})
    section: Optional[str] = None
    mol: Optional[MoleculeType] = None
    for where, text in _logical_lines(path, [os.fspath(d) for d in include_dirs], defs, top.files):
        if text.startswith("["):
            if not text.endswith("]"):
                raise TopologyError(f"{where}: malformed section header {text!r}")
            section = text[1:-1].strip().lower()
            if section not in _SECTIONS:
                raise TopologyError(f"{where}: section [ {section} ] is not supported by this reader")
            if section in ("atoms", "bonds", "constraints", "angles", "dihedrals", "exclusions", "virtual_sitesn",
                           "virtual_sites2", "virtual_sites3", "position_restraints") and mol is None:
                raise TopologyError(f"{where}: [ {section} ] before any [ moleculetype ]")
            continue
        if section is None:
            raise TopologyError(f"{where}: data before the first [ section ]: {text!r}")
        tok = text.split()
        if section == "defaults":
            top.nbfunc = _int(tok[0], where, "nbfunc")
            top.comb_rule = _int(tok[1], where, "comb-rule") if len(tok) > 1 else 1
            top.gen_pairs = tok[2] if len(tok) > 2 else "no"
            top.fudge_lj = _num(tok[3], where, "fudgeLJ") if len(tok) > 3 else 1.0
            top.fudge_qq = _num(tok[4], where, "fudgeQQ") if len(tok) > 4 else 1.0
        elif section == "atomtypes":
            _atomtype(top, tok, where)
        elif section == "nonbond_params":
            _nonbond_param(top, tok, where)
        elif section == "moleculetype":
            if len(tok) < 2:
                raise TopologyError(f"{where}: [ moleculetype ] needs 'name nrexcl'")
            if tok[0] in top.moleculetypes:
                raise TopologyError(f"{where}: molecule type {tok[0]!r} defined twice")
            mol = MoleculeType(tok[0], _int(tok[1], where, "nrexcl"))
            top.moleculetypes[mol.name] = mol
        elif section == "atoms":
            _atom(top, mol, tok, where)
        elif section in _ARITY:
            k = _ARITY[section]
            if len(tok) < k + 1:
                raise TopologyError(f"{where}: [ {section} ] needs {k} atom indices and a function type")
            atoms = tuple(_index(mol, t, where) for t in tok[:k])
            mol.interactions.setdefault(section, []).append(Interaction(
                atoms, _int(tok[k], where, "function type"), tuple(_num(t, where, "parameter") for t in tok[k + 1:]),
                where))
        elif section == "exclusions":
            mol.exclusions.append(tuple(_index(mol, t, where) for t in tok))
        elif section.startswith("virtual_sites"):
            _virtual_site(mol, section[-1], tok, where)
        elif section == "system":
            top.system_name = (top.system_name + " " + text).strip()
        elif section == "molecules":
            if len(tok) != 2:
                raise TopologyError(f"{where}: [ molecules ] needs 'name count'")
            if tok[0] not in top.moleculetypes:
                raise TopologyError(f"{where}: molecule {tok[0]!r} is not defined by any [ moleculetype ]")
            top.molecules.append((tok[0], _int(tok[1], where, "count")))
    return top


def _atomtype(top: Topology, tok: List[str], where: str) -> None:
    # name [bond_type] [at.num] mass charge ptype sigma epsilon: the ptype column is the 3rd from the end
    if len(tok) < 6:
        raise TopologyError(f"{where}: [ atomtypes ] needs at least 'name mass charge ptype sigma epsilon'")
    ptype = tok[-3]
    if ptype not in ("A", "V", "D", "S"):
        raise TopologyError(f"{where}: atom type {tok[0]!r}: particle type {ptype!r} (expected A, V, D or S)")
    top.atomtypes[tok[0]] = AtomType(tok[0], _num(tok[-5], where, "mass"), _num(tok[-4], where, "charge"), ptype,
                                     _num(tok[-2], where, "sigma"), _num(tok[-1], where, "epsilon"))


def _nonbond_param(top: Topology, tok: List[str], where: str) -> None:
    if len(tok) < 5:
        raise TopologyError(f"{where}: [ nonbond_params ] needs 'type type func sigma epsilon'")
    for t in tok[:2]:
        if t not in top.atomtypes:
            raise TopologyError(f"{where}: [ nonbond_params ] names atom type {t!r}, which no [ atomtypes ] before it "
                                "defines (for MartiniGo: go_atomtypes.itp must be included before go_nbparams.itp)")
    func = _int(tok[2], where, "function type")
    if func != 1:
        raise TopologyError(f"{where}: [ nonbond_params ] function type {func} is not supported (1: Lennard-Jones)")
    top.nonbond_params[(tok[0], tok[1])] = (func, _num(tok[3], where, "sigma"), _num(tok[4], where, "epsilon"))


def _atom(top: Topology, mol: MoleculeType, tok: List[str], where: str) -> None:
    if len(tok) < 6:
        raise TopologyError(f"{where}: [ atoms ] needs at least 'nr type resnr residue atom cgnr'")
    nr = _int(tok[0], where, "atom number")
    if nr != len(mol.atoms) + 1:
        raise TopologyError(f"{where}: atom number {nr} in {mol.name!r}; expected {len(mol.atoms) + 1} (atoms must "
                            "be numbered 1, 2, 3, ... in order)")
    atype = top.atomtypes.get(tok[1])
    if atype is None:
        raise TopologyError(f"{where}: atom {tok[4]!r} of {mol.name!r} has type {tok[1]!r}, which no [ atomtypes ] "
                            "defines (is the force-field .itp included first?)")
    charge = _num(tok[6], where, "charge") if len(tok) > 6 else atype.charge
    mass = _num(tok[7], where, "mass") if len(tok) > 7 else atype.mass
    mol.atoms.append(Atom(tok[1], _int(tok[2], where, "residue number"), tok[3], tok[4],
                          _int(tok[5], where, "charge group"), charge, mass))


def _index(mol: MoleculeType, tok: str, where: str) -> int:
    i = _int(tok, where, "atom index")
    if not 1 <= i <= len(mol.atoms):
        raise TopologyError(f"{where}: atom index {i} is outside molecule {mol.name!r} (1..{len(mol.atoms)}; "
                            "[ atoms ] must come before the interactions)")
    return i - 1


def _virtual_site(mol: MoleculeType, kind: str, tok: List[str], where: str) -> None:
    if kind == "n":
        if len(tok) < 3:
            raise TopologyError(f"{where}: [ virtual_sitesn ] needs 'site func atom...'")
        site, func = _index(mol, tok[0], where), _int(tok[1], where, "function type")
        rest = tok[2:]
        if func == 3:              # COW: pairs (atom, weight)
            if len(rest) % 2:
                raise TopologyError(f"{where}: [ virtual_sitesn ] type 3 needs (atom weight) pairs")
            atoms = tuple(_index(mol, t, where) for t in rest[0::2])
            params = tuple(_num(t, where, "weight") for t in rest[1::2])
        elif func in (1, 2):
            atoms, params = tuple(_index(mol, t, where) for t in rest), ()
        else:
            raise TopologyError(f"{where}: [ virtual_sitesn ] function type {func} (known: 1 COG, 2 COM, 3 COW)")
        mol.virtual_sites.append(VirtualSite(site, func, atoms, params, "n", where))
        return
    k = int(kind)
    if len(tok) < k + 2:
        raise TopologyError(f"{where}: [ virtual_sites{k} ] needs 'site {' '.join(['atom'] * k)} func params'")
    site = _index(mol, tok[0], where)
    atoms = tuple(_index(mol, t, where) for t in tok[1:k + 1])
    mol.virtual_sites.append(VirtualSite(site, _int(tok[k + 1], where, "function type"), atoms,
                                         tuple(_num(t, where, "parameter") for t in tok[k + 2:]), kind, where))
