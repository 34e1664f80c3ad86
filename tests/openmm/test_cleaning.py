"""flashschnet.openmm.cleaning: the one cleaning step both force fields read.

The structures are real (tests/data/structures); where a quirk is tested in isolation, the real trp-cage file is
edited in the one place that makes the quirk (an alternate location, a renamed residue, a deleted side chain), so
the expected result is known exactly. The corpus of unedited real entries is
tests/tools/benchmarks/test_pdb_corpus_engines.py. The checks of the input as OpenMM read it (residue names, disulfide
bonds): test_cleaning_checks.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flashschnet.cg import map_pdb, map_pdb_text
from flashschnet.cg.pdb import parse_pdb
from flashschnet.errors import InputError
from flashschnet.openmm.cleaning import CleanedStructure, clean_pdb
from tests.helpers.pdb_text import atoms_of, write_lines

STRUCTURES = Path(__file__).resolve().parents[1] / "data" / "structures"
TRPCAGE = STRUCTURES / "1L2Y_trpcage.pdb"


def _lines():
    return TRPCAGE.read_text().splitlines()


def _same_molecule(a, b):
    np.testing.assert_array_equal(a.positions, b.positions)
    np.testing.assert_array_equal(a.bead_types, b.bead_types)
    np.testing.assert_array_equal(a.bonds, b.bonds)
    np.testing.assert_array_equal(a.chain_of_residue, b.chain_of_residue)
    assert a.bead_names == b.bead_names and a.residues == b.residues and a.notes == b.notes


def _in_memory_is_the_text(cleaned, mapping="5bead"):
    """The residues the cleaning step hands to the mapping are exactly what its text reads back as (what a resumed
    run maps from OUT/cleaned.pdb), and the molecule of each is the same, notes included."""
    assert cleaned.residues == parse_pdb(cleaned.text, cleaned.source).residues
    mol = cleaned.molecule(mapping)
    _same_molecule(mol, map_pdb_text(cleaned.text, source=cleaned.source, mapping=mapping))
    assert mol.source == cleaned.source
    return mol


@pytest.mark.parametrize("name", ["1L2Y_trpcage", "1VII_villin", "1VII_villin_noH", "1HEL_lysozyme", "4PTI_bpti"])
def test_a_clean_file_maps_to_the_same_beads(name):
    """Complete structures: cleaning drops hydrogens and waters only, so the CG mapping is unchanged."""
    path = STRUCTURES / f"{name}.pdb"
    before = map_pdb(path)
    cleaned = clean_pdb(str(path))
    after = _in_memory_is_the_text(cleaned)
    assert after.n_beads == before.n_beads
    np.testing.assert_array_equal(after.bead_types, before.bead_types)
    np.testing.assert_array_equal(after.positions, before.positions)
    np.testing.assert_array_equal(after.bonds, before.bonds)
    assert " H" not in {line[76:78] for line in cleaned.text.splitlines() if line.startswith("ATOM")}
    assert all(not line.startswith("HETATM") for line in cleaned.text.splitlines())


def test_cleaning_is_deterministic_and_idempotent(tmp_path):
    a = clean_pdb(str(STRUCTURES / "1HEL_lysozyme.pdb"))
    b = clean_pdb(str(STRUCTURES / "1HEL_lysozyme.pdb"))
    assert a.text == b.text
    again = clean_pdb(a.write(str(tmp_path / "cleaned.pdb")))
    assert again.text.splitlines()[1:] == a.text.splitlines()[1:]       # line 1 names the input file
    assert again.notes == []
    assert any("removed 185 non-protein residues" in n and "HOH x185" in n for n in a.notes)
    resumed = CleanedStructure.from_file(str(tmp_path / "cleaned.pdb"))     # what a resumed run maps
    assert resumed.text == a.text and resumed.residues == a.residues and resumed.n_models == 0
    _same_molecule(resumed.molecule(), a.molecule())


def test_alternate_locations_keep_the_highest_occupancy_then_the_first(tmp_path):
    lines = _lines()
    out = []
    for line in lines:
        if line.startswith("ATOM") and int(line[22:26]) == 8 and line[12:16].strip() in ("CB", "CG"):
            x = float(line[30:38])
            first, second = (0.40, 0.60) if line[12:16].strip() == "CB" else (0.50, 0.50)
            out.append(f"{line[:16]}A{line[17:30]}{x + 1.0:8.3f}{line[38:54]}{first:6.2f}{line[60:]}")
            out.append(f"{line[:16]}B{line[17:30]}{x + 2.0:8.3f}{line[38:54]}{second:6.2f}{line[60:]}")
        else:
            out.append(line)
    path = write_lines(tmp_path, out)
    cleaned = clean_pdb(str(path))
    ref = atoms_of(TRPCAGE.read_text(), 8)
    got = atoms_of(cleaned.text, 8)
    assert got[("LYS", 8, "CB")][0] == pytest.approx(ref[("LYS", 8, "CB")][0] + 2.0, abs=1e-9)   # 0.60 wins
    assert got[("LYS", 8, "CG")][0] == pytest.approx(ref[("LYS", 8, "CG")][0] + 1.0, abs=1e-9)   # tie: first
    assert sum(1 for line in cleaned.text.splitlines()
               if line.startswith(("ATOM", "HETATM")) and line[16:17] != " ") == 0
    assert any("2 atoms have alternate locations" in n and "highest occupancy" in n for n in cleaned.notes)
    # the CG bead of LYS 8 sits on the chosen CB; the mapping does not repeat cleaning's note
    mol = _in_memory_is_the_text(cleaned)
    assert not [n for n in mol.notes if "alternate" in n]
    cb = [i for i, (r, n) in enumerate(zip(mol.bead_residue, mol.bead_names)) if r == 7 and n == "CB"]
    assert mol.positions[cb[0], 0] == pytest.approx(ref[("LYS", 8, "CB")][0] + 2.0)


def test_two_residue_types_at_one_position_keep_the_more_occupied(tmp_path):
    """Micro-heterogeneity: LYS 8 given as A (occupancy 0.3) and as ALA B (0.7), every atom duplicated, as the PDB
    writes a point mutation: ALA is kept (with its own coordinates), no LYS atom survives, and a note names both."""
    out = []
    for line in _lines():
        if line.startswith("ATOM") and int(line[22:26]) == 8:
            out.append(f"{line[:16]}A{line[17:54]}{0.30:6.2f}{line[60:]}")
        else:
            out.append(line)
    lys = [l for l in out if l.startswith("ATOM") and int(l[22:26]) == 8]
    ala = [f"{l[:16]}BALA{l[20:30]}{float(l[30:38]) + 0.5:8.3f}{l[38:54]}{0.70:6.2f}{l[60:]}"
           for l in lys if l[12:16].strip() in ("N", "CA", "C", "O", "CB")]
    i = out.index(lys[-1]) + 1
    path = write_lines(tmp_path, out[:i] + ala + out[i:])
    cleaned = clean_pdb(str(path))
    got = atoms_of(cleaned.text, 8)
    ref = atoms_of(TRPCAGE.read_text(), 8)
    assert set(got) == {("ALA", 8, a) for a in ("N", "CA", "C", "O", "CB")}
    assert got[("ALA", 8, "CA")][0] == pytest.approx(ref[("LYS", 8, "CA")][0] + 0.5, abs=1e-9)
    assert any("ALA 8 (chain A; also LYS)" in n for n in cleaned.notes), cleaned.notes
    # ties go to the first type in the file
    tie = [f"{l[:54]}{0.50:6.2f}{l[60:]}" if l.startswith("ATOM") and int(l[22:26]) == 8 else l
           for l in out[:i] + ala + out[i:]]
    assert {k[0] for k in atoms_of(clean_pdb(str(write_lines(tmp_path, tie))).text, 8)} == {"LYS"}


def test_several_models_use_the_first(tmp_path):
    atoms = [l for l in _lines() if l.startswith(("ATOM", "TER"))]
    moved = [f"{l[:30]}{float(l[30:38]) + 5.0:8.3f}{l[38:]}" if l.startswith("ATOM") else l for l in atoms]
    path = write_lines(tmp_path, ["MODEL        1", *atoms, "ENDMDL", "MODEL        2", *moved, "ENDMDL", "END"])
    cleaned = clean_pdb(str(path))
    assert atoms_of(cleaned.text)[("ASN", 1, "CA")] == atoms_of(TRPCAGE.read_text())[("ASN", 1, "CA")]
    assert "MODEL" not in cleaned.text
    assert any("2 models found; using the first" in n for n in cleaned.notes)
    assert not [n for n in _in_memory_is_the_text(cleaned).notes if "models" in n]     # said once, by cleaning


def test_missing_side_chain_atoms_are_rebuilt(tmp_path):
    """LYS 8 without CB..NZ: the 5-bead mapping could not map it; after cleaning it can, and MARTINI gets a
    complete side chain."""
    lines = [l for l in _lines() if not (l.startswith("ATOM") and int(l[22:26]) == 8
                                         and l[12:16].strip() in ("CB", "CG", "CD", "CE", "NZ"))]
    path = write_lines(tmp_path, lines)
    with pytest.raises(InputError, match="LYS 8"):
        map_pdb(path)
    cleaned = clean_pdb(str(path))
    got = atoms_of(cleaned.text, 8)
    assert {"CB", "CG", "CD", "CE", "NZ"} <= {k[2] for k in got}
    assert any("placed the missing CB of 1 residues by ideal geometry" in n and "LYS 8 (chain A)" in n
               for n in cleaned.notes)
    assert any("rebuilt missing heavy atoms" in n and "LYS 8 (chain A): CG CD CE NZ" in n for n in cleaned.notes)
    ref = atoms_of(TRPCAGE.read_text(), 8)
    # the CB (the CG model's CB bead) is the ideal one: within 0.25 A of the deposited CB, on the L side
    n, ca, c, cb = (np.array(got[("LYS", 8, a)]) for a in ("N", "CA", "C", "CB"))
    assert np.linalg.norm(cb - np.array(ref[("LYS", 8, "CB")])) < 0.25
    assert np.dot(np.cross(n - ca, c - ca), cb - ca) > 0
    # and the side chain pdbfixer built on it is bonded to it
    assert 1.4 < np.linalg.norm(np.array(got[("LYS", 8, "CG")]) - cb) < 1.65
    assert _in_memory_is_the_text(cleaned).n_beads == map_pdb(TRPCAGE).n_beads
    assert clean_pdb(str(path)).text == cleaned.text                      # seeded: the same atoms every time


@pytest.mark.parametrize("name", ["1HEL_lysozyme", "4PTI_bpti", "1UBQ_ubiquitin"])
def test_the_ideal_cb_matches_deposited_structures(name):
    """The CB placed for a residue that has none: within 0.6 A of the deposited CB of every residue of real
    crystal structures (measured: max 0.50/0.35/0.35 A), median below 0.15 A (measured ~0.12 A)."""
    from flashschnet.cg.geometry import ideal_cb

    text = (STRUCTURES / f"{name}.pdb").read_text()
    residues = {}
    for (resname, resseq, atom), xyz in atoms_of(text).items():
        residues.setdefault((resname, resseq), {})[atom] = np.array(xyz)
    d = [np.linalg.norm(ideal_cb(r["N"], r["CA"], r["C"]) - r["CB"]) for (name3, _), r in residues.items()
         if name3 != "GLY" and {"N", "CA", "C", "CB"} <= set(r)]
    assert len(d) > 40 and max(d) < 0.6 and np.median(d) < 0.15, (max(d), np.median(d))


def test_modified_residues_caps_and_heterogens(tmp_path):
    """MSE (a HETATM selenomethionine) -> MET with its SD rebuilt; ACE/NME caps, waters and ions removed."""
    lines = _lines()
    atoms = [l for l in lines if l.startswith("ATOM")]
    res1 = [l for l in atoms if int(l[22:26]) == 1]
    # residue 1 (ASN) written as a selenomethionine HETATM with MET's heavy atoms named as in MSE
    n, ca, c, o, cb = (next(l for l in res1 if l[12:16].strip() == a) for a in ("N", "CA", "C", "O", "CB"))
    def rec(line, name, resname="MSE", record="HETATM"):
        return f"{record:<6s}{line[6:12]}{name:^4s}{line[16:17]}{resname:>3s}{line[20:]}"
    mse = [rec(n, " N  "), rec(ca, " CA "), rec(c, " C  "), rec(o, " O  "), rec(cb, " CB ")]
    water = "HETATM  999  O   HOH A 101       0.000   0.000  10.000  1.00  0.00           O  "
    ion = "HETATM 1000 NA    NA A 102       5.000   0.000  10.000  1.00  0.00          NA  "
    path = write_lines(tmp_path, [*mse, *[l for l in atoms if int(l[22:26]) != 1], "TER", water, ion, "END"])
    cleaned = clean_pdb(str(path))
    got = atoms_of(cleaned.text, 1)
    assert {k[0] for k in got} == {"MET"} and {"CG", "SD", "CE"} <= {k[2] for k in got}
    assert any("modified residues replaced" in n and "MSE 1 (chain A) -> MET" in n for n in cleaned.notes)
    assert any("HOH x1" in n and "NA x1" in n for n in cleaned.notes)
    assert "HETATM" not in cleaned.text
    _in_memory_is_the_text(cleaned)


def test_keep_hydrogens(tmp_path):
    kept = clean_pdb(str(TRPCAGE), keep_hydrogens=True)
    hydrogens = sum(1 for l in kept.text.splitlines() if l.startswith("ATOM") and l[76:78].strip() == "H")
    assert hydrogens == sum(1 for l in _lines() if l.startswith("ATOM") and l[76:78].strip() == "H") > 0
    np.testing.assert_array_equal(map_pdb_text(kept.text).positions, map_pdb(TRPCAGE).positions)


def test_insertion_codes_and_chain_ids_are_kept(tmp_path):
    lines = [f"{l[:21]}B{l[22:26]}{'A' if int(l[22:26]) == 5 else ' '}{l[27:]}" if l.startswith("ATOM") else l
             for l in _lines()]
    # residues 5 and 5A: renumber residue 6 to 5 with insertion code A
    lines = [f"{l[:22]}{5:4d}A{l[27:]}" if l.startswith("ATOM") and int(l[22:26]) == 6 else
             (f"{l[:26]} {l[27:]}" if l.startswith("ATOM") else l) for l in lines]
    cleaned = clean_pdb(str(write_lines(tmp_path, lines)))
    keys = {(l[21], l[22:27]) for l in cleaned.text.splitlines() if l.startswith("ATOM")}
    assert ("B", "   5A") in keys and ("B", "   5 ") in keys
    mol = _in_memory_is_the_text(cleaned)
    assert [r.icode for r in mol.residues][4:6] == ["", "A"]


def test_the_residues_in_memory_follow_the_pdb_writer(tmp_path):
    """Where OpenMM's writer changes what it was given, the residues in memory change with it: residue numbers
    beyond 9999 (hybrid-36 in the input; the writer gives such a residue its place in the chain), x below -999.999 A
    (the writer keeps 8 characters), blank chain ids, two chains told apart by a TER record only."""
    def h36(n):
        if n < 10000:
            return f"{n:4d}"
        n, digits = n - 10000, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[n // 36 ** 3] + "".join(digits[n // 36 ** k % 36] for k in (2, 1, 0))

    atoms = []
    for line in _lines():
        if line.startswith("ENDMDL"):
            break
        if line.startswith("ATOM"):
            r = int(line[22:26])
            atoms.append(f"{line[:21]} {h36(9990 + r)}{line[26:30]}{float(line[30:38]) - 1200.0:8.2f}{line[38:]}")
    split = next(i for i, l in enumerate(atoms) if l[22:26] == h36(10001))
    cleaned = clean_pdb(str(write_lines(tmp_path, [*atoms[:split], "TER", *atoms[split:], "END"])))
    assert "-1208.90" in cleaned.text                                   # ASN 1's N: -1208.904 written as 8 characters
    mol = _in_memory_is_the_text(cleaned)
    assert [r.resseq for r in mol.residues] == [*range(9991, 10000), 10, *range(1, 11)]
    assert mol.chain_of_residue.tolist() == [0] * 10 + [1] * 10 and mol.positions[0, 0] == -1208.90
    _in_memory_is_the_text(cleaned, "ca")


@pytest.mark.parametrize("content,match", [
    (None, "does not exist"),
    (b"", "empty"),
    (b"\x00\x01\x02binary" * 10, "binary"),
    (b"REMARK nothing here\n", "no ATOM or HETATM"),
    (b"HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O  \nEND\n", "no protein residues"),
    (b"ATOM      1  N   ALA A   1       0.0x0   0.000   0.000  1.00  0.00           N  \n", "line 1"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, match):
    path = tmp_path / "input.pdb"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=match) as err:
        clean_pdb(str(path))
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg


@pytest.mark.parametrize("value, what", [("     nan", "non-finite"), ("     inf", "non-finite"),
                                         ("-inf    ", "non-finite"), ("1.0e+30 ", "beyond what a PDB record holds")])
def test_non_finite_or_absurd_coordinates_are_one_line_naming_line_atom_and_residue(tmp_path, value, what):
    """Before OpenMM's reader and writer see them (they raised from inside the cleaning step): NaN, inf and
    coordinates beyond a PDB field, in any atom of the first model."""
    lines = _lines()
    i = next(k for k, l in enumerate(lines) if l.startswith("ATOM") and l[12:16].strip() == "CA")
    lines[i] = lines[i][:38] + value + lines[i][46:]
    p = write_lines(tmp_path, lines)
    with pytest.raises(InputError) as err:
        clean_pdb(str(p))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{p}: line {i + 1}: atom CA of residue ") and what in msg, msg
