"""One cleaning step for both force fields: a user's PDB file -> the protein both the CG mapping and martinize2 read.

``flashschnet-simulate`` writes the result to ``OUT/cleaned.pdb`` and maps it; ``flashschnet-martini`` writes it
to ``OUT/system/cleaned.pdb`` and gives it to martinize2; so ``flashschnet-compare`` compares the same structure.
What is done, in order, each with a one-line note when it changes anything:

1. **Read** with OpenMM's PDB reader (``PdbStructure``/``PDBFile``): the first MODEL only; residue and atom names
   standardised by OpenMM's tables (HSD/HIE/HIP -> HIS, CYX -> CYS, ...).
2. **Alternate locations**: per atom the location with the highest occupancy, the first in the file on ties; a
   residue written with alternative residue names (micro-heterogeneity) keeps the name whose atoms have the
   highest occupancy, likewise.
3. **Modified residues** (MSE, HETATM records with a MODRES record or in pdbfixer's table) -> their standard
   parent (pdbfixer), atoms the parent lacks removed. An amino acid known to neither (no MODRES record) is an
   error naming it: removing it would cut the chain silently.
4. **Waters, ions, ligands and capping groups** (ACE, NME, ...) removed (pdbfixer's ``removeHeterogens``);
   hydrogens removed unless ``keep_hydrogens`` (both force fields use heavy atoms only).
5. **Missing heavy atoms** of standard residues (side chains, and the carbonyl O) rebuilt by pdbfixer
   (``addMissingAtoms``, seeded: the same file gives the same atoms), a missing CB first by ideal geometry. A
   residue lacking N, CA or C is left as it is (a CA-only trace stays one, for the CA mapping; the 5-bead mapping
   and MARTINI refuse it by name). Missing *residues* are not modelled: a gap
   stays a chain break, which each force field reports. Terminal OXT atoms are not added.
6. **Declared disulfide bonds** (SSBOND records; residues named CYX, paired nearest first) whose SG atoms are not
   at bonding distance in the coordinates are listed in a note: martinize2 bonds cysteines from the coordinates
   (and CONECT records, which OpenMM writes for SG atoms within 0.3 nm), and the CG model has no disulfide term,
   so neither force field bonds them.

The output is written with OpenMM's ``PDBFile.writeFile`` keeping chain ids, residue numbers and insertion codes,
and handed to the CG mapping in memory as the residues that text holds (:attr:`CleanedStructure.residues`, the
model-level :class:`~flashschnet.cg.pdb.RawResidue`: what :func:`~flashschnet.cg.pdb.parse_pdb` of the text gives,
without reading it again). Cleaning a cleaned file changes nothing. Unreadable input, and a coordinate that is
non-finite or beyond a PDB field (:func:`~flashschnet.cg.pdb.position_fault`, checked here for both force fields before
OpenMM reads the file), is an :class:`~flashschnet.errors.InputError` with a one-line message naming the file (and
the line, for a malformed record) and what to do. The notes are worded in :mod:`flashschnet.cg.notes`; alternate
locations follow :func:`~flashschnet.cg.pdb.highest_occupancy`, the raw-file reader's rule.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from ..cg import notes as note
from ..cg.geometry import ideal_cb
from ..cg.mapping import map_residues
from ..cg.molecule import CGMolecule
from ..cg.notes import format_list
from ..cg.pdb import Atom, RawResidue, check_coordinates, highest_occupancy, parse_pdb, read_pdb_file, residue_number
from ..cg.residue_data import RESIDUE_ALIASES, STANDARD_RESIDUES
from ..errors import InputError
from .cleaning_checks import DISULFIDE_MAX_A, label as _label, standardised_names, unbonded_disulfides

__all__ = ["CleanedStructure", "clean_pdb", "CLEANED_NAME"]

#: the file name of the cleaned structure in a run directory (``OUT/`` for the CG path, ``OUT/system/`` for MARTINI)
CLEANED_NAME = "cleaned.pdb"

#: pdbfixer's seed for placing rebuilt atoms (fixed: the cleaned structure depends on the input file only)
REBUILD_SEED = 1

#: the atoms a residue's backbone is built from: a residue missing one of them is not rebuilt
BACKBONE = frozenset({"N", "CA", "C"})

#: header records kept for pdbfixer (MODRES names the parent of a modified residue)
_HEADER_RECORDS = ("MODRES", "SEQRES", "CRYST1")


@dataclass
class CleanedStructure:
    """What :func:`clean_pdb` made: the cleaned PDB text (Angstrom, one model), the residues it holds in the CG
    mapping's form, what the input was, its size, and one note per change made (each starting with the input's
    path). :meth:`molecule` maps the residues."""

    text: str
    source: str
    residues: List[RawResidue] = field(default_factory=list)     # == parse_pdb(text).residues
    n_models: int = 0                                           # MODEL records of ``text`` (0 for a cleaned one)
    n_residues: int = 0
    n_chains: int = 0
    n_atoms: int = 0
    notes: List[str] = field(default_factory=list)
    incomplete_backbone: List[str] = field(default_factory=list)    # residues without N, CA or C (labels)

    @classmethod
    def from_file(cls, path: str) -> "CleanedStructure":
        """A structure as it is in the PDB file ``path`` (a run's own ``cleaned.pdb``), read once, not cleaned
        again."""
        text = read_pdb_file(Path(path))
        parsed = parse_pdb(text, str(path))
        return cls(text=text, source=str(path), residues=parsed.residues, n_models=parsed.n_models)

    def molecule(self, mapping: str = "5bead") -> CGMolecule:
        """The CG molecule of the residues (:func:`~flashschnet.cg.mapping.map_residues`; messages name
        :attr:`source`)."""
        return map_residues(self.residues, self.source, mapping, n_models=self.n_models)

    def write(self, path: str) -> str:
        """Write the cleaned structure to ``path`` (its folder must exist; atomic, a failed write raises
        :class:`~flashschnet.errors.OutputError`); return ``path``."""
        from ..atomic import atomic_write

        with atomic_write(path, "w", what="writing the cleaned structure") as f:
            f.write(self.text)
        return path


def _resolve_alternates(structure) -> tuple:
    """Set every atom's (and residue's) location in an OpenMM ``PdbStructure`` to the highest occupancy, first on
    ties. Returns (atoms that had alternates, residues with alternative residue names as labels).

    ``residue.atoms`` is walked, not ``residue.iter_atoms()``: the latter yields only atoms that have the residue's
    first location, so an atom given only as A and B in a residue whose other atoms have no altloc would be missed.
    OpenMM's ``PDBFile`` keeps an atom when its ``residue_name`` is the residue's name and places it at its
    ``default_location_id``; both are set here."""
    n_atoms, renamed = 0, []
    for model in structure.iter_models():
        for chain in model.iter_chains():
            for residue in chain.iter_residues():
                names = {k: loc.residue_name_with_spaces.strip() for k, loc in residue.locations.items()}
                best_name = None
                if len(set(names.values())) > 1:
                    # micro-heterogeneity (two residue types at one position): the type whose atoms have the highest
                    # occupancy, the first in the file on ties
                    occupancy: Dict[str, float] = {}
                    for atom in residue.atoms:
                        for loc in atom.locations.values():
                            name = loc.residue_name.strip()
                            occupancy[name] = max(occupancy.get(name, 0.0), float(loc.occupancy))
                    order = list(dict.fromkeys(names.values()))
                    for loc in residue.locations.values():    # OpenMM names only the first location's residue
                        loc.name = loc.residue_name_with_spaces.strip()
                    best_name = order[highest_occupancy([occupancy.get(n, 0.0) for n in order])]
                    residue.primary_location_id = next(k for k, n in names.items() if n == best_name)
                    renamed.append(f"{best_name} {residue.number}{residue.insertion_code.strip()} "
                                   f"(chain {chain.chain_id.strip() or '-'}; also "
                                   + "/".join(n for n in order if n != best_name) + ")")
                for atom in residue.atoms:
                    keys = list(atom.locations)
                    if best_name is not None:
                        mine = [k for k in keys if atom.locations[k].residue_name.strip() == best_name]
                        # an atom only the other residue type has is dropped by PDBFile (its residue_name differs)
                        atom.residue_name = best_name if mine else "?" + atom.residue_name
                        keys = mine or keys
                    if len(atom.locations) > 1:
                        n_atoms += 1
                    atom.default_location_id = keys[highest_occupancy([float(atom.locations[k].occupancy)
                                                                        for k in keys])]
        break                     # the first model only (the reader loaded no other)
    return n_atoms, renamed


def clean_pdb(pdb: str, keep_hydrogens: bool = False) -> CleanedStructure:
    """Clean the protein of the PDB file ``pdb`` (see the module docstring); nothing is written.

    Parameters
    ----------
    pdb : str
        The user's PDB file (any PDB entry: crystal or NMR structure, with or without hydrogens).
    keep_hydrogens : bool
        Keep the hydrogens the file has (none are added). Default: remove them.

    Returns
    -------
    CleanedStructure
        ``text`` is the cleaned PDB file (write it with :meth:`CleanedStructure.write`); ``notes`` says what was
        changed, one line each, starting with the input's path.

    Raises
    ------
    InputError
        When the file is missing, empty, binary or not a PDB file, has no protein residues, or OpenMM's reader
        cannot read it (one line, naming the file).
    """
    src = str(pdb)
    text = read_pdb_file(Path(src))              # missing / empty / binary files: our one-line errors
    parsed = parse_pdb(text, src)                    # malformed records: the line number and what to do
    for res in parsed.residues:                      # NaN / inf / beyond a PDB field: one line, before OpenMM
        for atom in res.atoms:
            check_coordinates(atom, res, src)
    import warnings

    import openmm.app as app
    from openmm.app.internal.pdbstructure import PdbStructure
    from pdbfixer.pdbfixer import PDBFixer, proteinResidues

    notes: List[str] = []
    if parsed.n_models > 1:
        notes.append(note.several_models(src, parsed.n_models))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            structure = PdbStructure(io.StringIO(text), load_all_models=False)
            n_alt, renamed = _resolve_alternates(structure)
            first = app.PDBFile(structure)
    except Exception as exc:                         # OpenMM's reader raises whatever it hits
        raise InputError(f"{src}: OpenMM's PDB reader cannot read it ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); fix the file (e.g. re-save it "
                         "from a viewer or download it again)") from None
    if n_alt:
        notes.append(note.alternate_locations(src, n_alt))
    if renamed:
        notes.append(note.alternative_residue_names(src, renamed))
    # force-field names OpenMM's tables leave (HSE, HISD, CYM, ...): the same table the CG mapping accepts
    parent = {one: three for three, one in STANDARD_RESIDUES.items()}
    for res in first.topology.residues():
        if res.name in RESIDUE_ALIASES and res.name != "MSE":        # MSE: pdbfixer's, below (adds SD)
            res.name = parent[RESIDUE_ALIASES[res.name]]
    std_names = standardised_names(parsed, first.topology)
    if std_names:
        notes.append(note.standardised_names(src, std_names))
    unbonded = unbonded_disulfides(text, parsed, first.topology, first.positions)
    if unbonded:
        notes.append(note.unbonded_disulfides(src, unbonded, DISULFIDE_MAX_A))

    buf = io.StringIO()
    for line in text.splitlines():
        if line[:6].strip().upper() in _HEADER_RECORDS:
            buf.write(line.rstrip("\r\n") + "\n")
    app.PDBFile.writeFile(first.topology, first.positions, buf, keepIds=True)
    buf.seek(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fixer = PDBFixer(pdbfile=buf)
            fixer.findNonstandardResidues()
            replaced = [f"{_label(r)} -> {new}" for r, new in fixer.nonstandardResidues]
            fixer.replaceNonstandardResidues()
            unknown = [_label(r) for r in fixer.topology.residues() if r.name not in proteinResidues
                       and {"N", "CA", "C"} <= {a.name for a in r.atoms()}]
            if unknown:     # an amino acid nobody can name: removing it would cut the chain silently
                raise InputError(f"{src}: residue {format_list(unknown, 3)} is an amino acid that neither the standard "
                                 "residues nor pdbfixer's table of modified residues knows; rename it to its standard "
                                 "parent (or add a MODRES record naming the parent), or delete it")
            removed = [r.name for r in fixer.removeHeterogens(keepWater=False)]
            # pdbfixer keeps nucleic acids; neither force field models them (MARTINI's protein path, the CG protein model)
            nucleic = [r for r in fixer.topology.residues() if r.name not in proteinResidues]
            if nucleic:
                modeller = app.Modeller(fixer.topology, fixer.positions)
                modeller.delete(nucleic)
                fixer.topology, fixer.positions = modeller.topology, modeller.positions
                removed += [r.name for r in nucleic]
            if not keep_hydrogens:
                h = [a for a in fixer.topology.atoms() if a.element is not None and a.element.symbol in ("H", "D")]
                if h:
                    modeller = app.Modeller(fixer.topology, fixer.positions)
                    modeller.delete(h)
                    fixer.topology, fixer.positions = modeller.topology, modeller.positions
            fixer.topology, fixer.positions, placed_cb = _add_ideal_cb(fixer.topology, fixer.positions)
            fixer.missingResidues = {}               # gaps stay gaps (chain breaks), not modelled loops
            fixer.findMissingAtoms()
            fixer.missingTerminals = {}              # no OXT: neither force field uses it
            # a residue without N, CA or C has no backbone to build on: pdbfixer would invent one (a CA trace
            # becomes a full chain of guesses); leave it as it is and let each force field say what it needs
            incomplete = [r for r, atoms in fixer.missingAtoms.items() if BACKBONE & {a.name for a in atoms}]
            for r in incomplete:
                del fixer.missingAtoms[r]
            rebuilt = [f"{_label(r)}: {' '.join(a.name for a in atoms)}" for r, atoms in fixer.missingAtoms.items()]
            if fixer.missingAtoms:
                fixer.addMissingAtoms(seed=REBUILD_SEED)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{src}: pdbfixer cannot clean it ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); fix the structure or clean it "
                         "yourself (pdbfixer, or a viewer)") from None
    if replaced:
        notes.append(note.modified_residues(src, replaced))
    if removed:
        notes.append(note.removed_non_protein(src, removed))
    if placed_cb:
        notes.append(note.ideal_cb_placed(src, placed_cb))
    if incomplete:
        notes.append(note.incomplete_backbone(src, [_label(r) for r in incomplete]))
    if rebuilt:
        notes.append(note.rebuilt_atoms(src, rebuilt))
    residues = list(fixer.topology.residues())
    if not residues:
        raise InputError(f"{src}: no protein residues left after removing waters, ions, ligands and nucleic acids; give a PDB "
                         "file of a protein")
    out = io.StringIO()
    # PDBFile.writeFile's header carries today's date; ours does not, so the same input gives the same bytes
    header = f"REMARK   1 CLEANED BY FLASHSCHNET (OPENMM PDBFILE, PDBFIXER) FROM {os.path.basename(src)[:40]}\n"
    out.write(header)
    app.PDBFile.writeModel(fixer.topology, fixer.positions, out, keepIds=True)
    app.PDBFile.writeFooter(fixer.topology, out)
    mapped = _written_residues(fixer.topology, fixer.positions, len(header.splitlines()), src)
    return CleanedStructure(text=out.getvalue(), source=src, residues=mapped, n_residues=len(residues),
                            n_chains=fixer.topology.getNumChains(), n_atoms=fixer.topology.getNumAtoms(), notes=notes,
                            incomplete_backbone=[_label(r) for r in incomplete])


def _written_residues(topology, positions, header_lines: int, src: str) -> List[RawResidue]:
    """The residues that ``PDBFile.writeModel(topology, positions, keepIds=True)`` writes after ``header_lines``,
    as :func:`~flashschnet.cg.pdb.parse_pdb` reads them back, without writing and reading text: the same rounding
    of the coordinates (OpenMM's ``_format_83`` of the Angstrom values), the same truncated names and ids, the same
    line numbers; a TER record ends each chain, and consecutive residues of a chain with the same number, insertion
    code and name are one residue, as the reader joins them. So a new run maps exactly what a resumed run reads from
    its ``cleaned.pdb`` (tests/openmm/test_cleaning.py compares the two for every structure it cleans)."""
    import numpy as np
    import openmm.app as app
    import openmm.unit as unit
    from openmm.app.pdbfile import _format_83, _formatIndex

    xyz = np.asarray(positions.value_in_unit(unit.angstrom))      # as writeModel converts them
    standard = set(app.PDBFile._standardResidues) - {"HOH"}         # writeModel's ATOM (not HETATM) records
    out: List[RawResidue] = []
    lineno, k = header_lines, 0
    for ci, chain in enumerate(topology.chains()):
        chain_id = chain.id if len(chain.id) == 1 else chr(ord("A") + ci % 26)
        current = None                                            # a TER record (or the start) came before
        for ri, res in enumerate(list(chain.residues())):
            resname = res.name[:3].strip().upper()
            number = (res.id if len(res.id) < 5 else _formatIndex(ri + 1, 4)).strip()
            try:
                resseq = residue_number(number)
            except ValueError:
                raise InputError(f"{src}: cannot read the residue number {number!r} the cleaned structure gives "
                                 f"{_label(res)}; renumber the residues") from None
            icode = (res.insertionCode if len(res.insertionCode) == 1 else "").strip()
            if current is None or (current.resseq, current.icode, current.resname) != (resseq, icode, resname):
                current = RawResidue(record="ATOM" if res.name in standard else "HETATM", chain=chain_id,
                                     resseq=resseq, icode=icode, resname=resname, after_ter=ci > 0 and current is None)
                out.append(current)
            for atom in res.atoms():
                lineno += 1
                element = atom.element.symbol if atom.element is not None else "EP"
                current.atoms.append(Atom(name=atom.name[:4].strip(), altloc="", occupancy=1.0,
                                          xyz=tuple(float(_format_83(v)) for v in xyz[k]), element=element.strip(),
                                          lineno=lineno))
                k += 1
        lineno += 1                                               # the chain's TER record
    return out


def _add_ideal_cb(topology, positions):
    """A copy of an OpenMM topology (and positions, nm) in which every standard amino acid but glycine that has
    N, CA and C but no CB gets a CB at :func:`ideal_cb`; returns (topology, positions, labels of those residues).

    Why not leave it to pdbfixer: its rebuilt side chains start from a template overlaid on the backbone and are
    relaxed with a soft force field that has no chirality term; on real structures (lysozyme, trp-cage with side
    chains deleted) half its CBs land 1.3-2.2 A from the ideal position, often on the D side. A CB that exists
    stays put (pdbfixer moves new atoms only), so the CG CB bead and MARTINI's side chain start from a correct
    CB."""
    import numpy as np
    import openmm.app as app
    import openmm.unit as unit
    from pdbfixer.pdbfixer import proteinResidues

    xyz = [p.value_in_unit(unit.nanometer) for p in positions]
    missing = {}
    for res in topology.residues():
        names = {a.name: a for a in res.atoms()}
        if res.name in proteinResidues and res.name != "GLY" and "CB" not in names and {"N", "CA", "C"} <= set(names):
            missing[res] = ideal_cb(*(10.0 * np.asarray(xyz[names[a].index]) for a in ("N", "CA", "C"))) / 10.0
    if not missing:
        return topology, positions, []
    import openmm as mm

    new, new_xyz, old_to_new = app.Topology(), [], {}
    new.setPeriodicBoxVectors(topology.getPeriodicBoxVectors())
    for chain in topology.chains():
        nc = new.addChain(chain.id)
        for res in chain.residues():
            nr = new.addResidue(res.name, nc, res.id, res.insertionCode)
            for atom in res.atoms():
                old_to_new[atom] = new.addAtom(atom.name, atom.element, nr, atom.id)
                new_xyz.append(mm.Vec3(*xyz[atom.index]))
                if atom.name == "CA" and res in missing:
                    new.addAtom("CB", app.element.carbon, nr)
                    new_xyz.append(mm.Vec3(*missing[res]))
    for a, b in topology.bonds():
        new.addBond(old_to_new[a], old_to_new[b])
    return new, new_xyz * unit.nanometer, [_label(r) for r in missing]
