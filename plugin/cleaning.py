"""One cleaning step for every engine: a user's PDB file -> the protein both the CG mapping and martinize2 read.

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
   hydrogens removed unless ``keep_hydrogens`` (both engines use heavy atoms only).
5. **Missing heavy atoms** of standard residues (side chains, and the carbonyl O) rebuilt by pdbfixer
   (``addMissingAtoms``, seeded: the same file gives the same atoms), a missing CB first by ideal geometry. A
   residue lacking N, CA or C is left as it is (a CA-only trace stays one, for the CA mapping; the 5-bead mapping
   and MARTINI refuse it by name). Missing *residues* are not modelled: a gap
   stays a chain break, which each engine reports. Terminal OXT atoms are not added.
6. **Declared disulfide bonds** (SSBOND records; residues named CYX, paired nearest first) whose SG atoms are not
   at bonding distance in the coordinates are listed in a note: martinize2 bonds cysteines from the coordinates
   (and CONECT records, which OpenMM writes for SG atoms within 0.3 nm), and the CG model has no disulfide term,
   so neither engine bonds them.

The output is written with OpenMM's ``PDBFile.writeFile`` keeping chain ids, residue numbers and insertion codes.
Cleaning a cleaned file changes nothing. Unreadable input is an :class:`~flashschnet.errors.InputError` with a
one-line message naming the file (and the line, for a malformed record) and what to do.
"""
from __future__ import annotations

import io
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from ..cg.mapping import format_counts, format_list
from ..cg.pdb import check_coordinates, parse_pdb, read_pdb_file
from ..cg.tables import RESIDUE_ALIASES, STANDARD_RESIDUES
from ..errors import InputError

__all__ = ["CleanedStructure", "clean_pdb", "CLEANED_NAME"]

#: the file name of the cleaned structure in a run directory (``OUT/`` for the CG path, ``OUT/system/`` for MARTINI)
CLEANED_NAME = "cleaned.pdb"

#: pdbfixer's seed for placing rebuilt atoms (fixed: the cleaned structure depends on the input file only)
REBUILD_SEED = 1

#: the atoms a residue's backbone is built from: a residue missing one of them is not rebuilt
BACKBONE = frozenset({"N", "CA", "C"})

#: SG-SG distance (Angstrom) up to which two cysteines count as bonded: OpenMM's rule (``Topology.
#: createDisulfideBonds``), which makes the CONECT records martinize2 reads; a real disulfide is about 2.05 A
DISULFIDE_MAX_A = 3.0

#: header records kept for pdbfixer (MODRES names the parent of a modified residue)
_HEADER_RECORDS = ("MODRES", "SEQRES", "CRYST1")


@dataclass
class CleanedStructure:
    """What :func:`clean_pdb` made: the cleaned PDB text (Angstrom, one model), what the input was, its size, and one
    note per change made (each starting with the input's path)."""

    text: str
    source: str
    n_residues: int = 0
    n_chains: int = 0
    n_atoms: int = 0
    notes: List[str] = field(default_factory=list)
    incomplete_backbone: List[str] = field(default_factory=list)    # residues without N, CA or C (labels)

    @classmethod
    def from_file(cls, path: str) -> "CleanedStructure":
        """A structure as it is in the PDB file ``path`` (a run's own ``cleaned.pdb``), not cleaned again."""
        return cls(text=read_pdb_file(Path(path)), source=str(path))

    def write(self, path: str) -> str:
        """Write the cleaned structure to ``path`` (its folder must exist; atomic, a failed write raises
        :class:`~flashschnet.errors.OutputError`); return ``path``."""
        from ..atomic import atomic_write

        with atomic_write(path, "w", what="writing the cleaned structure") as f:
            f.write(self.text)
        return path


def _label(res) -> str:
    """``"LYS 12 (chain A)"`` for an OpenMM Topology residue."""
    chain = (res.chain.id or "").strip() or "-"
    return f"{res.name} {res.id}{(res.insertionCode or '').strip()} (chain {chain})"


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
                    best_name = max(order, key=lambda n: (occupancy.get(n, 0.0), -order.index(n)))
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
                    atom.default_location_id = max(
                        keys, key=lambda k: (float(atom.locations[k].occupancy), -keys.index(k)))
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
        notes.append(f"{src}: {parsed.n_models} models found; using the first (MODEL 1) only")
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
        notes.append(f"{src}: {n_alt} atoms have alternate locations; kept, per atom, the one with the highest "
                     "occupancy (first in the file on ties)")
    if renamed:
        notes.append(f"{src}: residues with alternative residue names; kept the name of highest occupancy: "
                     + format_list(renamed))
    # force-field names OpenMM's tables leave (HSE, HISD, CYM, ...): the same table the CG mapping accepts
    parent = {one: three for three, one in STANDARD_RESIDUES.items()}
    for res in first.topology.residues():
        if res.name in RESIDUE_ALIASES and res.name != "MSE":        # MSE: pdbfixer's, below (adds SD)
            res.name = parent[RESIDUE_ALIASES[res.name]]
    std_names = _standardised_names(parsed, first.topology)
    if std_names:
        notes.append(f"{src}: residue names standardised (OpenMM's and the CG mapping's tables): {format_counts(Counter(std_names))}")
    unbonded = _unbonded_disulfides(text, parsed, first.topology, first.positions)
    if unbonded:
        notes.append(f"{src}: {len(unbonded)} disulfide bonds the file declares (SSBOND records, CYX names) are not in "
                     f"its coordinates (SG-SG beyond {DISULFIDE_MAX_A:g} A): {format_list(unbonded, 4)}; neither engine "
                     "bonds them (martinize2 bonds cysteines from their coordinates, the CG model has no disulfide "
                     "term): fix the structure if they should be bonded")

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
            # pdbfixer keeps nucleic acids; neither engine models them (MARTINI's protein path, the CG protein model)
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
            fixer.topology, fixer.positions, ideal_cb = _add_ideal_cb(fixer.topology, fixer.positions)
            fixer.missingResidues = {}               # gaps stay gaps (chain breaks), not modelled loops
            fixer.findMissingAtoms()
            fixer.missingTerminals = {}              # no OXT: neither engine uses it
            # a residue without N, CA or C has no backbone to build on: pdbfixer would invent one (a CA trace
            # becomes a full chain of guesses); leave it as it is and let each engine say what it needs
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
        notes.append(f"{src}: modified residues replaced by their standard parents (pdbfixer): {format_list(replaced)}")
    if removed:
        notes.append(f"{src}: removed {len(removed)} non-protein residues (waters, ions, ligands, capping groups, "
                     "nucleic acids): "
                     f"{format_counts(Counter(removed))}")
    if ideal_cb:
        notes.append(f"{src}: placed the missing CB of {len(ideal_cb)} residues by ideal geometry from N, CA, C "
                     f"(pdbfixer then rebuilt the rest of the side chain): {format_list(ideal_cb)}")
    if incomplete:
        notes.append(f"{src}: {len(incomplete)} residues lack backbone atoms (N, CA or C); not rebuilt (a backbone "
                     f"cannot be guessed): {format_list([_label(r) for r in incomplete])}")
    if rebuilt:
        notes.append(f"{src}: rebuilt missing heavy atoms (pdbfixer) of {len(rebuilt)} residues: {format_list(rebuilt, 3)}")
    residues = list(fixer.topology.residues())
    if not residues:
        raise InputError(f"{src}: no protein residues left after removing waters, ions, ligands and nucleic acids; give a PDB "
                         "file of a protein")
    out = io.StringIO()
    # PDBFile.writeFile's header carries today's date; ours does not, so the same input gives the same bytes
    out.write(f"REMARK   1 CLEANED BY FLASHSCHNET (OPENMM PDBFILE, PDBFIXER) FROM {os.path.basename(src)[:40]}\n")
    app.PDBFile.writeModel(fixer.topology, fixer.positions, out, keepIds=True)
    app.PDBFile.writeFooter(fixer.topology, out)
    return CleanedStructure(text=out.getvalue(), source=src, n_residues=len(residues),
                            n_chains=fixer.topology.getNumChains(), n_atoms=fixer.topology.getNumAtoms(), notes=notes,
                            incomplete_backbone=[_label(r) for r in incomplete])


#: the ideal CB from N, CA, C in Angstrom: CB = CA + A*(b x c) + B*b + C*c, b = CA - N, c = C - CA (the cross
#: product makes it Angstrom-only). The constants of the tetrahedral CB of protein-design codes (e.g. ProteinMPNN).
IDEAL_CB = (-0.58273431, 0.56802827, -0.54067466)


def ideal_cb(n, ca, c):
    """Position (Angstrom) of an L-amino acid's CB from its N, CA and C positions (Angstrom; float arrays)."""
    import numpy as np

    n, ca, c = (np.asarray(v, dtype=float) for v in (n, ca, c))
    b, cc = ca - n, c - ca
    return IDEAL_CB[0] * np.cross(b, cc) + IDEAL_CB[1] * b + IDEAL_CB[2] * cc + ca


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


def _key(res) -> tuple:
    """(chain id, residue number, insertion code) of an OpenMM Topology residue: :func:`_raw_key`'s key."""
    return ((res.chain.id or "").strip(), str(res.id).strip(), (res.insertionCode or "").strip())


def _raw_key(raw) -> tuple:
    """(chain id, residue number, insertion code) of a residue of :func:`~flashschnet.cg.pdb.parse_pdb`."""
    return (raw.chain.strip(), str(raw.resseq), raw.icode.strip())


def _unbonded_disulfides(text: str, parsed, topology, positions) -> List[str]:
    """The disulfide bonds a PDB file declares whose SG atoms are more than :data:`DISULFIDE_MAX_A` apart (or
    missing), as ``"CYS 28 (chain -)-CYS 44 (chain -) 3.66 A"``; a CYX residue left without a CYX partner as
    ``"CYS 5 (chain A) (CYX, no partner)"``.

    Declared are the pairs of the SSBOND records (fixed columns: the PDB format's, read here because neither
    OpenMM's reader nor mdtraj keeps them) and the residues named CYX (AMBER's name for a bonded cysteine), paired
    nearest first among those no SSBOND record names. ``topology``/``positions`` are OpenMM's (nm), first model."""
    import numpy as np
    import openmm.unit as unit

    residues = {_key(r): r for r in topology.residues()}
    xyz = np.asarray(positions.value_in_unit(unit.angstrom))
    sg = {k: xyz[a.index] for k, r in residues.items() for a in r.atoms() if a.name == "SG"}

    def dist(a, b):
        return float(np.linalg.norm(sg[a] - sg[b])) if a in sg and b in sg else float("inf")

    pairs = []
    for line in text.splitlines():
        if not line.startswith("SSBOND"):
            continue
        line = line.ljust(72)
        # a bond to a symmetry mate (an operator other than 1555) is not between atoms of this file
        if {line[59:65].strip(), line[66:72].strip()} <= {"", "1555"}:
            pairs.append(((line[15].strip(), line[17:21].strip(), line[21].strip()),
                          (line[29].strip(), line[31:35].strip(), line[35].strip())))
    named = {k for p in pairs for k in p}
    cyx_keys = {_raw_key(raw) for raw in parsed.residues if raw.resname == "CYX"} - named
    cyx = [k for k in residues if k in cyx_keys]                         # file order
    candidates = sorted((dist(a, b), i, j) for i, a in enumerate(cyx) for j, b in enumerate(cyx) if i < j)
    paired, cyx_pairs = set(), []
    for d, i, j in candidates:                                           # nearest first
        if i not in paired and j not in paired and d < float("inf"):
            cyx_pairs.append((i, j))
            paired |= {i, j}
    pairs += [(cyx[i], cyx[j]) for i, j in sorted(cyx_pairs)]            # listed in file order

    def label(k):
        return _label(residues[k]) if k in residues else f"{k[1]}{k[2]} (chain {k[0] or '-'}; not in the file)"

    out = [f"{label(a)}-{label(b)} " + (f"{dist(a, b):.2f} A" if dist(a, b) < float("inf") else "(no SG atom)")
           for a, b in pairs if not dist(a, b) <= DISULFIDE_MAX_A]
    out += [f"{label(cyx[i])} (CYX, no partner)" for i in range(len(cyx)) if i not in paired]
    return out


def _standardised_names(parsed, topology) -> List[str]:
    """``"HSD->HIS"`` for every residue whose name OpenMM's reader changed (matched by chain, number, insertion
    code)."""
    read = {}
    for raw in parsed.residues:
        read.setdefault(_raw_key(raw), raw.resname)
    out = []
    for res in topology.residues():
        name = read.get(_key(res))
        if name and name != res.name:
            out.append(f"{name}->{res.name}")
    return out
