"""The PDB quirk corpus (tests/data/corpus/): its manifest is complete and honest.

Every file listed exists with the recorded sha256, every file in the folder is listed, the quirks the corpus must
cover are each covered by at least one file, and every quirk a file claims is re-checked here from the file itself
by a small, independent plain-text parse of the fixed-column PDB format (no OpenMM, no pdbfixer), so that a wrong
tag in manifest.json cannot go unnoticed.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "data" / "corpus"
MANIFEST = CORPUS / "manifest.json"
NOT_DATA = {"manifest.json", "README.md"}

VOCABULARY = {
    "altloc", "altloc-residue", "insertion-code", "multi-chain", "chain-break", "modified-residue",
    "his-cys-variant", "capped-termini", "nmr-ensemble", "missing-side-chain", "hydrogens", "no-hydrogens",
    "heterogens", "water", "non-protein", "ca-only", "tiny",
}
REQUIRED = {
    "altloc", "insertion-code", "multi-chain", "chain-break", "modified-residue", "his-cys-variant",
    "capped-termini", "nmr-ensemble", "missing-side-chain", "hydrogens", "no-hydrogens",
}
FIELDS = {"file", "package", "version", "path_in_package", "license", "sha256", "pdb_id", "n_residues_protein",
          "n_chains", "quirks", "details"}

STANDARD = {"ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE",
            "PRO", "SER", "THR", "TRP", "TYR", "VAL"}
VARIANTS = {"HSD", "HSE", "HSP", "HID", "HIE", "HIP", "CYX", "CYM"}
PROTONATION = {"ASH", "GLH", "LYN", "LSN"}
MODIFIED = {"MSE", "CAS", "CSO", "CSD", "CME", "OCS", "SEP", "TPO", "PTR", "SME", "MLY", "M3L", "HYP", "PCA",
            "AIB", "KCX", "NLE", "FME"}
CAPS = {"ACE", "NME", "NMA", "NH2"}
WATER = {"HOH", "WAT", "TIP", "TIP3", "SOL", "DOD", "H2O"}
NUCLEIC = {"DA", "DC", "DG", "DT", "DU", "DI", "A", "C", "G", "U", "I", "ADE", "CYT", "GUA", "THY", "URA"}
AMINO = STANDARD | VARIANTS | PROTONATION | MODIFIED

# Heavy side-chain atoms of the standard amino acids (PDB names).
SIDE_CHAIN = {
    "ALA": {"CB"}, "ARG": {"CB", "CG", "CD", "NE", "CZ", "NH1", "NH2"}, "ASN": {"CB", "CG", "OD1", "ND2"},
    "ASP": {"CB", "CG", "OD1", "OD2"}, "CYS": {"CB", "SG"}, "GLN": {"CB", "CG", "CD", "OE1", "NE2"},
    "GLU": {"CB", "CG", "CD", "OE1", "OE2"}, "GLY": set(), "HIS": {"CB", "CG", "ND1", "CD2", "CE1", "NE2"},
    "ILE": {"CB", "CG1", "CG2", "CD1"}, "LEU": {"CB", "CG", "CD1", "CD2"}, "LYS": {"CB", "CG", "CD", "CE", "NZ"},
    "MET": {"CB", "CG", "SD", "CE"}, "PHE": {"CB", "CG", "CD1", "CD2", "CE1", "CE2", "CZ"},
    "PRO": {"CB", "CG", "CD"}, "SER": {"CB", "OG"}, "THR": {"CB", "OG1", "CG2"},
    "TRP": {"CB", "CG", "CD1", "CD2", "NE1", "CE2", "CE3", "CZ2", "CZ3", "CH2"},
    "TYR": {"CB", "CG", "CD1", "CD2", "CE1", "CE2", "CZ", "OH"}, "VAL": {"CB", "CG1", "CG2"},
}


def _manifest() -> list:
    return json.loads(MANIFEST.read_text())


ENTRIES = _manifest()


class Atom:
    """One ATOM/HETATM record, read by the fixed columns of the PDB format."""

    def __init__(self, line: str):
        line = line.ljust(80)
        self.record = line[0:6].strip()
        self.name = line[12:16].strip()
        self.altloc = line[16]
        self.resname = line[17:20].strip()
        self.chain = line[21]
        self.resseq = line[22:26]
        self.icode = line[26]
        self.xyz = (float(line[30:38]), float(line[38:46]), float(line[46:54]))
        self.element = line[76:78].strip()

    @property
    def residue(self) -> tuple:
        return (self.chain, self.resseq, self.icode)

    @property
    def is_hydrogen(self) -> bool:
        if self.element:
            return self.element.upper() in ("H", "D")
        return self.name.lstrip("0123456789").upper().startswith(("H", "D"))


class Parsed:
    """All ATOM/HETATM records of a file, those of its first model, and its MODEL count."""

    def __init__(self, path: Path):
        lines = path.read_text().splitlines()
        self.n_models = sum(1 for line in lines if line.startswith("MODEL "))
        self.atoms = [Atom(line) for line in lines if line.startswith(("ATOM  ", "HETATM"))]
        self.first = []
        for line in lines:
            if line.startswith("ENDMDL"):
                break
            if line.startswith(("ATOM  ", "HETATM")):
                self.first.append(Atom(line))

    def residues(self) -> dict:
        """First model: residue key -> list of its atoms, in file order."""
        out: dict = {}
        for atom in self.first:
            out.setdefault(atom.residue, []).append(atom)
        return out


_CACHE: dict = {}


def parsed(name: str) -> Parsed:
    if name not in _CACHE:
        _CACHE[name] = Parsed(CORPUS / name)
    return _CACHE[name]


def _resnames(p: Parsed) -> set:
    return {a.resname for a in p.atoms}


def _amino_residues(p: Parsed) -> dict:
    return {k: v for k, v in p.residues().items() if v[0].resname in AMINO}


def _first_position(atoms: list, name: str):
    for atom in atoms:
        if atom.name == name and atom.altloc in (" ", "A"):
            return atom.xyz
    return None


# --- one independent check per quirk: returns (ok, what was found) -------------------------------------------------

def check_altloc(p):
    n = sum(1 for a in p.atoms if a.altloc != " ")
    return n > 0, f"{n} records with an altloc"


def check_altloc_residue(p):
    names = defaultdict(set)
    for a in p.atoms:
        if a.altloc != " ":
            names[a.residue].add(a.resname)
    micro = {k: v for k, v in names.items() if len(v) > 1}
    return bool(micro), f"positions with two residue names: {micro}"


def check_insertion_code(p):
    icodes = {a.residue for a in p.atoms if a.record == "ATOM" and a.icode != " "}
    return bool(icodes), f"{len(icodes)} residues with an insertion code"


def check_multi_chain(p):
    chains = {a.chain for a in p.first if a.record == "ATOM"}
    return len(chains) > 1, f"chain ids among ATOM records: {sorted(chains)}"


def check_chain_break(p):
    gaps = []
    prev = None  # (chain, position of C)
    for key, atoms in p.residues().items():
        n, c = _first_position(atoms, "N"), _first_position(atoms, "C")
        has_ca = _first_position(atoms, "CA") is not None
        if n is None or c is None or not has_ca:
            prev = None
            continue
        if prev is not None and prev[0] == key[0] and math.dist(prev[1], n) > 2.0:
            gaps.append(key)
        prev = (key[0], c)
    return bool(gaps), f"{len(gaps)} peptide C-N distances > 2 A"


def check_modified_residue(p):
    found = {a.resname for a in p.atoms if a.record == "HETATM" and a.resname in MODIFIED}
    return bool(found), f"HETATM modified amino acids: {sorted(found)}"


def check_his_cys_variant(p):
    found = _resnames(p) & VARIANTS
    return bool(found), f"variant names: {sorted(found)}"


def check_capped_termini(p):
    found = _resnames(p) & CAPS
    return bool(found), f"caps: {sorted(found)}"


def check_nmr_ensemble(p):
    return p.n_models > 1, f"{p.n_models} MODEL records"


def check_missing_side_chain(p):
    missing = []
    for key, atoms in _amino_residues(p).items():
        resname = atoms[0].resname
        names = {a.name for a in atoms}
        if resname in SIDE_CHAIN and "CA" in names and SIDE_CHAIN[resname] - names:
            missing.append((key, sorted(SIDE_CHAIN[resname] - names)))
    return bool(missing), f"residues missing side-chain heavy atoms: {missing[:5]}"


def check_hydrogens(p):
    n = sum(1 for a in p.atoms if a.is_hydrogen)
    return n > 0, f"{n} hydrogen records"


def check_no_hydrogens(p):
    n = sum(1 for a in p.atoms if a.is_hydrogen)
    return n == 0, f"{n} hydrogen records"


def check_heterogens(p):
    other = _resnames(p) - AMINO - CAPS - WATER - NUCLEIC
    return bool(other), f"ligands/ions: {sorted(other)}"


def check_water(p):
    found = _resnames(p) & WATER
    return bool(found), f"water names: {sorted(found)}"


def check_non_protein(p):
    amino = [k for k, atoms in p.residues().items()
             if atoms[0].resname in AMINO or {"N", "CA", "C"} <= {a.name for a in atoms}]
    return not amino, f"{len(amino)} amino-acid residues"


def check_ca_only(p):
    atoms = [a for a in p.atoms if a.record == "ATOM" and a.resname in AMINO]
    return bool(atoms) and all(a.name == "CA" for a in atoms), f"{len(atoms)} amino-acid atoms"


def check_tiny(p):
    residues = {k: v for k, v in p.residues().items() if v[0].resname not in WATER}
    n_amino = sum(1 for v in residues.values() if v[0].resname in AMINO)
    return 1 <= n_amino and len(residues) <= 3, f"{len(residues)} residues, {n_amino} amino acids"


CHECKS = {
    "altloc": check_altloc, "altloc-residue": check_altloc_residue, "insertion-code": check_insertion_code,
    "multi-chain": check_multi_chain, "chain-break": check_chain_break, "modified-residue": check_modified_residue,
    "his-cys-variant": check_his_cys_variant, "capped-termini": check_capped_termini,
    "nmr-ensemble": check_nmr_ensemble, "missing-side-chain": check_missing_side_chain,
    "hydrogens": check_hydrogens, "no-hydrogens": check_no_hydrogens, "heterogens": check_heterogens,
    "water": check_water, "non-protein": check_non_protein, "ca-only": check_ca_only, "tiny": check_tiny,
}


# --- the manifest itself ---------------------------------------------------------------------------------------------

def test_every_vocabulary_tag_has_a_check():
    assert set(CHECKS) == VOCABULARY


def test_manifest_entries_are_well_formed():
    assert isinstance(ENTRIES, list) and ENTRIES
    names = [e["file"] for e in ENTRIES]
    assert len(names) == len(set(names)), "a file is listed twice"
    for e in ENTRIES:
        assert FIELDS <= set(e), f"{e.get('file')}: missing fields {sorted(FIELDS - set(e))}"
        assert e["quirks"] and set(e["quirks"]) <= VOCABULARY, f"{e['file']}: {e['quirks']}"
        assert len(e["quirks"]) == len(set(e["quirks"])), f"{e['file']}: duplicate quirk"
        assert not {"hydrogens", "no-hydrogens"} <= set(e["quirks"]), e["file"]
        assert e["file"].startswith(e["package"].lower() + "__"), f"{e['file']}: not named <package>__<name>"
        assert e["file"].endswith((".pdb", ".ent")), e["file"]
        assert isinstance(e["details"], str) and e["details"].strip() and "\n" not in e["details"], e["file"]
        assert isinstance(e["n_residues_protein"], int) and isinstance(e["n_chains"], int), e["file"]


def test_every_listed_file_exists_with_its_sha256():
    for e in ENTRIES:
        path = CORPUS / e["file"]
        assert path.is_file(), f"listed but missing: {e['file']}"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == e["sha256"], f"sha256 differs: {e['file']}"


def test_every_file_in_the_folder_is_listed():
    present = {p.name for p in CORPUS.iterdir() if p.is_file() and p.name not in NOT_DATA}
    listed = {e["file"] for e in ENTRIES}
    assert present - listed == set(), f"not in manifest.json: {sorted(present - listed)}"


def test_required_quirks_are_covered():
    covered = {q for e in ENTRIES for q in e["quirks"]}
    assert REQUIRED - covered == set(), f"no file covers: {sorted(REQUIRED - covered)}"


def test_corpus_stays_small():
    sizes = {e["file"]: (CORPUS / e["file"]).stat().st_size for e in ENTRIES}
    assert max(sizes.values()) < 1_000_000, sizes
    assert sum(sizes.values()) < 5_000_000


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_protein_residue_count_matches_the_file(entry):
    n = len(_amino_residues(parsed(entry["file"])))
    assert n == entry["n_residues_protein"], f"{entry['file']}: {n} amino-acid residues in the first model"


@pytest.mark.parametrize(
    "name,quirk",
    [(e["file"], q) for e in ENTRIES for q in e["quirks"]],
    ids=[f"{e['file']}:{q}" for e in ENTRIES for q in e["quirks"]],
)
def test_claimed_quirk_is_in_the_file(name, quirk):
    ok, found = CHECKS[quirk](parsed(name))
    assert ok, f"{name} claims {quirk!r} but the file shows: {found}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_no_quirk_the_file_shows_is_left_out(entry):
    """The converse: what the text checks find is claimed too (a CA-only file lacks every side chain by
    definition, so it is not also tagged missing-side-chain)."""
    p = parsed(entry["file"])
    found = {q for q, check in CHECKS.items() if check(p)[0]}
    if "ca-only" in found:
        found.discard("missing-side-chain")
    unclaimed = found - set(entry["quirks"])
    assert not unclaimed, f"{entry['file']}: file shows {sorted(unclaimed)} but manifest.json does not list it"
