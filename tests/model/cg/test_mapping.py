"""flashschnet.cg.mapping: the PDB -> CG mapping (map_pdb, map_pdb_text, map_residues) of real structures and
hand-made peptides, its one-line errors and its notes. The PDB reader's own rules (flashschnet.cg.pdb):
tests/model/cg/test_pdb.py; the CG OpenMM topology and PDB output of mapped structures
(flashschnet.openmm.topology): tests/openmm/test_topology.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import STRUCTURES, oracle_path
from flashschnet.cg import CGMolecule, map_pdb, map_pdb_text
from flashschnet.cg import residue_data
from flashschnet.errors import InputError
from tests.helpers.pdb_text import BB, atom_line, peptide, residue_lines, write_pdb

# file -> (number of residues, waters expected in the notes)
EXPECTED = {
    "1L2Y_trpcage.pdb": (20, 0),
    "1ICO_betasheet.pdb": (29, 0),
    "1VII_villin.pdb": (36, 0),
    "1VII_villin_noH.pdb": (36, 0),
    "5UOI_helix.pdb": (43, 0),
    "4PTI_bpti.pdb": (58, 60),
    "1UBQ_ubiquitin.pdb": (76, 58),
    "1HEL_lysozyme.pdb": (129, 185),
}


def _bond_lengths(mol: CGMolecule) -> np.ndarray:
    return np.linalg.norm(mol.positions[mol.bonds[:, 0]] - mol.positions[mol.bonds[:, 1]], axis=1)


def _check_one_line(err: pytest.ExceptionInfo, *parts: str) -> str:
    msg = str(err.value)
    assert isinstance(err.value, InputError)
    assert "\n" not in msg, msg
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


def _ideal_c_n() -> float:
    return float(np.linalg.norm(np.array(BB["N"]) + np.array([3.8, 0, 0]) - np.array(BB["C"])))


def test_builder_sane():
    assert 1.2 < _ideal_c_n() < 1.5
    mol = map_pdb_text("\n".join(peptide()), mapping="5bead")
    assert mol.n_beads == 14
    assert mol.sequence() == "AGS"
    assert mol.notes == []


# ---------------------------------------------------------------------------------------------------
# Real structures
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_structures_5bead(fname):
    path = STRUCTURES / fname
    nres, nwat = EXPECTED[fname]
    mol = map_pdb(path, mapping="5bead")
    assert len(mol.residues) == nres
    ngly = mol.sequence().count("G")
    assert mol.n_beads == 5 * nres - ngly
    if fname.startswith("4PTI"):
        assert mol.n_beads == 284
    assert mol.positions.shape == (mol.n_beads, 3) and mol.positions.dtype == np.float64
    assert mol.bead_types.dtype == np.int64 and mol.bonds.dtype == np.int64
    assert mol.bead_types.min() >= 1 and mol.bead_types.max() <= 24
    assert set(mol.masses.tolist()) <= {12.0, 14.0, 16.0}
    assert mol.bead_residue.shape == (mol.n_beads,)
    assert mol.chain_of_residue.shape == (nres,)
    assert np.all(mol.chain_of_residue == 0)          # all these are single unbroken chains
    # a connected tree per chain: N - 1 bonds
    assert len(mol.bonds) == mol.n_beads - 1
    assert np.all(mol.bonds[:, 0] < mol.bonds[:, 1])
    assert np.array_equal(mol.bonds, mol.bonds[np.lexsort((mol.bonds[:, 1], mol.bonds[:, 0]))])
    d = _bond_lengths(mol)
    if fname == "1VII_villin_noH.pdb":
        # this file has a 0.75 A C-N "bond" between GLU 72 and LYS 73: bonded, with a note
        short = [n for n in mol.notes if "suspiciously short" in n]
        assert len(short) == 1 and "GLU 72 (chain A)" in short[0] and "LYS 73 (chain A)" in short[0]
        bad = [k for k, (i, j) in enumerate(mol.bonds) if
               (mol.bead_label(i), mol.bead_label(j)) == ("C of GLU 72 (chain A)", "N of LYS 73 (chain A)")]
        assert len(bad) == 1 and 0.7 < d[bad[0]] < 0.8
        d = np.delete(d, bad)
    else:
        assert not [n for n in mol.notes if "suspiciously short" in n]
    assert d.min() > 1.0 and d.max() < 4.2, (d.min(), d.max())
    # beads in N, CA, CB, C, O order per residue
    for ri, res in enumerate(mol.residues):
        names = [mol.bead_names[i] for i in np.flatnonzero(mol.bead_residue == ri)]
        assert names == (["N", "CA", "C", "O"] if res.one_letter == "G" else ["N", "CA", "CB", "C", "O"])
    water_notes = [n for n in mol.notes if "HOH" in n]
    if nwat:
        assert len(water_notes) == 1 and f"HOH x{nwat}" in water_notes[0]
        assert str(path) in water_notes[0]
    else:
        assert not water_notes
    if fname.startswith("5UOI"):   # C-terminal LEU 43 written without its O
        assert any("LEU 43" in n and "no O atom" in n for n in mol.notes)
    for n in mol.notes:
        assert "\n" not in n


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_structures_ca(fname):
    nres, nwat = EXPECTED[fname]
    mol = map_pdb(STRUCTURES / fname, mapping="ca")
    assert mol.n_beads == nres and mol.bead_names == ["CA"] * nres
    assert np.array_equal(mol.bead_types, [residue_data.RESIDUE_TYPE[c] for c in mol.sequence()])
    assert mol.bead_types.min() >= 1 and mol.bead_types.max() <= 20
    assert np.all(mol.masses == 12.0)
    assert len(mol.bonds) == nres - 1
    assert np.array_equal(mol.bonds, np.stack([np.arange(nres - 1), np.arange(1, nres)], axis=1))
    d = _bond_lengths(mol)
    if fname == "1VII_villin_noH.pdb":   # the squeezed GLU 72 - LYS 73 junction (see above)
        d = np.delete(d, [k for k, (i, j) in enumerate(mol.bonds) if mol.residues[i].resseq == 72])
    assert d.min() > 3.6 and d.max() < 4.1, (d.min(), d.max())
    assert (len([n for n in mol.notes if "HOH" in n]) == 1) == bool(nwat)


def test_villin_with_and_without_h_agree():
    a = map_pdb(STRUCTURES / "1VII_villin.pdb")
    b = map_pdb(STRUCTURES / "1VII_villin_noH.pdb")
    assert a.sequence() == b.sequence()
    assert np.array_equal(a.bead_types, b.bead_types)
    assert np.array_equal(a.bonds, b.bonds)


def test_5bead_types_rule():
    mol = map_pdb_text("\n".join(peptide(("ALA", "GLY", "TYR", "HIE", "CYX"))))
    assert mol.sequence() == "AGYHC"
    assert mol.bead_types.tolist() == [21, 22, 1, 23, 24, 21, 6, 23, 24, 21, 22, 20, 23, 24,
                                       21, 22, 7, 23, 24, 21, 22, 2, 23, 24]
    assert mol.masses.tolist()[:5] == [14.0, 12.0, 12.0, 12.0, 16.0]
    ca = map_pdb_text("\n".join(peptide(("ALA", "GLY", "TYR", "HIE", "CYX"))), mapping="ca")
    assert ca.bead_types.tolist() == [1, 6, 20, 7, 2]


def test_chignolin_ca_types_match_mlcg_example():
    seq = ["TYR", "TYR", "ASP", "PRO", "GLU", "THR", "GLY", "THR", "TRP", "TYR"]
    mol = map_pdb_text("\n".join(peptide(seq)), mapping="ca")
    assert mol.bead_types.tolist() == [20, 20, 3, 13, 4, 17, 6, 17, 19, 20]


def test_residue_aliases():
    seq = ("HID", "HSE", "HISH", "CYM", "ASH", "GLH", "LYN", "NALA", "CGLY")
    mol = map_pdb_text("\n".join(peptide(seq)), mapping="ca")
    assert mol.sequence() == "HHHCDEKAG"
    assert [r.resname for r in mol.residues] == list(seq)


# ---------------------------------------------------------------------------------------------------
# mlcg chignolin fixture
# ---------------------------------------------------------------------------------------------------

def _mlcg_fixtures():
    a_path, p_path = oracle_path("mlcg_schnet_A.pt"), oracle_path("mlcg_prior_cln.pt")
    import torch
    return torch.load(a_path, weights_only=True), torch.load(p_path, weights_only=True)


def test_chignolin_matches_mlcg_fixture():
    fa, fp = _mlcg_fixtures()
    names = list(fa["bead_names"])
    pos = np.asarray(fa["positions_A"][0], dtype=np.float64)
    lines = []
    for k, (label, xyz) in enumerate(zip(names, pos), start=1):
        res, atom = label.split(":")
        resname, resseq = res[:3], int(res[3:])
        lines.append(atom_line(k, atom, resname, "A", resseq, xyz))
    mol = map_pdb_text("\n".join(lines), source="chignolin", mapping="5bead")
    assert mol.n_beads == 49
    assert [f"{mol.residues[r].resname}{mol.residues[r].resseq}:{n}"
            for r, n in zip(mol.bead_residue, mol.bead_names)] == names
    np.testing.assert_allclose(mol.positions, pos, atol=1e-3)
    assert mol.bead_types.tolist() == [int(t) for t in fa["bead_types"]]
    assert mol.bead_types.tolist() == [int(t) for t in fp["bead_types"]]
    np.testing.assert_allclose(mol.masses, np.asarray(fa["masses"], dtype=np.float64) * 418.4, atol=1e-9)

    terms = fp["terms"]
    ref_bonds = set()
    for key in ("n_term_bonds", "bulk_bonds", "c_term_bonds"):
        for i, j in np.asarray(terms[key]["atom_indices"]).reshape(-1, 2).tolist():
            ref_bonds.add((min(i, j), max(i, j)))
    ours = {tuple(b) for b in mol.bonds.tolist()}
    assert ours == ref_bonds

    ref_angles = set()
    for key in ("n_term_angles", "bulk_angles", "c_term_angles"):
        for i, j, k in np.asarray(terms[key]["atom_indices"]).reshape(-1, 3).tolist():
            ref_angles.add((min(i, k), j, max(i, k)))
    adj = {i: set() for i in range(mol.n_beads)}
    for i, j in mol.bonds.tolist():
        adj[i].add(j)
        adj[j].add(i)
    paths = {(min(i, k), j, max(i, k)) for j in adj for i in adj[j] for k in adj[j] if i != k}
    assert paths == ref_angles


# ---------------------------------------------------------------------------------------------------
# Bad input: one InputError each, one line, naming the file and the culprit
# ---------------------------------------------------------------------------------------------------

def test_unknown_mapping(tmp_path):
    p = write_pdb(tmp_path, peptide())
    with pytest.raises(InputError) as err:
        map_pdb(p, mapping="martini")
    _check_one_line(err, str(p), "martini", "'5bead'", "'ca'")


def test_missing_file(tmp_path):
    p = tmp_path / "nope.pdb"
    with pytest.raises(InputError) as err:
        map_pdb(p)
    msg = _check_one_line(err, str(p), "does not exist")
    assert msg.startswith(str(p))


@pytest.mark.parametrize("content", [b"", b"   \n\n", b"\x00\x01\x02\xff\xfe" * 50,
                                     b"HEADER    NOTHING HERE\nREMARK hello\nEND\n",
                                     b"just some text\nwith lines\n"])
def test_not_a_pdb(tmp_path, content):
    p = tmp_path / "junk.pdb"
    p.write_bytes(content)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    msg = _check_one_line(err, str(p), "not a PDB file")
    assert msg.startswith(str(p))


def test_bad_coordinates(tmp_path):
    lines = peptide()
    bad = lines[6]
    lines[6] = bad[:30] + "  1.2x.4" + bad[38:]
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "line 7", "x coordinate")


def test_non_finite_coordinates(tmp_path):
    lines = peptide()
    lines[1] = lines[1][:30] + "     nan" + lines[1][38:]
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "non-finite", "CA", "ALA 1 (chain A)")


def test_no_protein(tmp_path):
    lines = [atom_line(1, "O", "HOH", "W", 1, (0, 0, 0), record="HETATM"),
             atom_line(2, "O", "HOH", "W", 2, (3, 0, 0), record="HETATM"),
             atom_line(3, "NA", "NA", "I", 3, (6, 0, 0), record="HETATM", element="NA")]
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "no protein residues", "only HOH x2, NA x1")


@pytest.mark.parametrize("atom", ["N", "CA", "CB", "C", "O"])
def test_missing_backbone_atom_5bead(tmp_path, atom):
    lines = []
    for k, name in enumerate(("SER", "ALA", "SER"), start=1):
        atoms = [a for a in ("N", "CA", "CB", "C", "O") if not (k == 2 and a == atom)]
        lines += residue_lines(name, k, atoms=atoms, serial0=len(lines) + 1)
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p, mapping="5bead")
    msg = _check_one_line(err, str(p), "residue ALA 2 (chain A)", f"no {atom} atom", "pdbfixer",
                          "--mapping ca")
    assert msg.startswith(str(p))
    if atom != "CA":   # the CA mapping needs only CA
        assert map_pdb(p, mapping="ca").n_beads == 3
    else:
        with pytest.raises(InputError) as err:
            map_pdb(p, mapping="ca")
        _check_one_line(err, str(p), "residue ALA 2 (chain A)", "no CA atom")


def test_missing_several_atoms(tmp_path):
    lines = peptide(("ALA",))[:2]   # N, CA only
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "residue ALA 1 (chain A)", "no CB, C and O atoms")


def test_terminal_o_alias_and_ignored_oxt(tmp_path):
    lines = peptide(("ALA", "SER"))
    # C-terminal O written as GROMACS OC1/OC2
    lines = [ln.replace(" O   SER", " OC1 SER") for ln in lines]
    lines.append(atom_line(len(lines) + 1, "OC2", "SER", "A", 2, (9.0, -1.0, 0.0)))
    lines.append(atom_line(len(lines) + 1, "OXT", "SER", "A", 2, (9.0, -1.5, 0.0)))
    mol = map_pdb(write_pdb(tmp_path, lines))
    assert mol.n_beads == 10 and mol.notes == []


def test_unknown_atom_residue(tmp_path):
    lines = peptide(("ALA", "GLY")) + residue_lines("XYZ", 3, serial0=20)
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "unknown residue XYZ 3 (chain A)", "accepted", "HIE", "NALA")


def test_modified_hetatm_residue(tmp_path):
    lines = peptide(("ALA", "GLY")) + residue_lines("SEP", 3, record="HETATM", serial0=20)
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "SEP 3 (chain A)", "modified amino acid")


def test_duplicate_atom(tmp_path):
    lines = peptide()
    lines.insert(2, lines[1])   # CA of ALA 1 twice, no altLoc
    p = write_pdb(tmp_path, lines)
    with pytest.raises(InputError) as err:
        map_pdb(p)
    _check_one_line(err, str(p), "ALA 1 (chain A)", "atom CA twice", "lines 2 and 3")


# ---------------------------------------------------------------------------------------------------
# Notes
# ---------------------------------------------------------------------------------------------------

def test_note_models(tmp_path):
    m1 = peptide()
    m2 = [ln[:30] + "".join(f"{float(ln[30 + 8 * k:38 + 8 * k]) + 5:8.3f}" for k in range(3)) + ln[54:]
          for ln in m1]
    lines = ["MODEL        1"] + m1 + ["ENDMDL", "MODEL        2"] + m2 + ["ENDMDL"]
    p = write_pdb(tmp_path, lines)
    mol = map_pdb(p)
    ref = map_pdb_text("\n".join(m1))
    np.testing.assert_array_equal(mol.positions, ref.positions)
    notes = [n for n in mol.notes if "models" in n]
    assert len(notes) == 1 and "2 models" in notes[0] and "first" in notes[0] and str(p) in notes[0]


def test_note_altloc(tmp_path):
    lines = peptide()
    ca = lines[1]
    alt_a = ca[:16] + "A" + ca[17:54] + "  0.40" + ca[60:]
    xyz_b = (1.0, 2.0, 3.0)
    alt_b = atom_line(99, "CA", "ALA", "A", 1, xyz_b, altloc="B", occ=0.6)
    lines[1:2] = [alt_a, alt_b]
    # tie on the CB of SER 3: the first one wins
    cb = lines[-3]
    assert " CB  SER" in cb
    cb_a = cb[:16] + "A" + cb[17:54] + "  0.50" + cb[60:]
    cb_b = atom_line(98, "CB", "SER", "A", 3, (7.0, 7.0, 7.0), altloc="B", occ=0.5)
    lines[-3:-2] = [cb_a, cb_b]
    p = write_pdb(tmp_path, lines)
    mol = map_pdb(p)
    assert mol.n_beads == 14
    np.testing.assert_allclose(mol.positions[1], xyz_b)
    np.testing.assert_allclose(mol.positions[11], float(cb[30:38]) if False else
                               [float(cb[30:38]), float(cb[38:46]), float(cb[46:54])])
    notes = [n for n in mol.notes if "alternate" in n]
    assert len(notes) == 1 and notes[0].startswith(f"{p}: 2 protein atoms")


def test_note_waters_ions_ligands(tmp_path):
    lines = peptide() + ["TER"]
    lines += [atom_line(30 + k, "O", "HOH", "A", 100 + k, (20.0 + 3 * k, 0, 0), record="HETATM")
              for k in range(3)]
    lines += [atom_line(40, "C1", "GOL", "A", 200, (0, 20, 0), record="HETATM"),
              atom_line(41, "O1", "GOL", "A", 200, (0, 21.4, 0), record="HETATM"),
              atom_line(42, "ZN", "ZN", "A", 201, (0, 0, 20), record="HETATM", element="ZN")]
    p = write_pdb(tmp_path, lines)
    mol = map_pdb(p)
    assert mol.n_beads == 14
    notes = [n for n in mol.notes if "ignored" in n]
    assert len(notes) == 1
    assert "HOH x3" in notes[0] and "GOL x1" in notes[0] and "ZN x1" in notes[0] and str(p) in notes[0]


def test_hydrogens_ignored_silently(tmp_path):
    lines = peptide()
    lines.insert(1, atom_line(50, "H", "ALA", "A", 1, (-0.5, 0.8, 0)))
    lines.insert(2, atom_line(51, "HA", "ALA", "A", 1, (1.5, -0.5, 0.9), element=""))
    lines.insert(3, atom_line(52, "H", "ALA", "A", 1, (-0.5, 0.8, 0.1)))   # even a duplicate H
    mol = map_pdb(write_pdb(tmp_path, lines))
    assert mol.n_beads == 14 and mol.notes == []


def test_note_chain_break_distance(tmp_path):
    lines = residue_lines("ALA", 1) + residue_lines("GLY", 2, serial0=10)
    lines += residue_lines("SER", 3, shift=(30.0, 0, 0), serial0=20)
    lines += residue_lines("LYS", 4, shift=(33.8, 0, 0), serial0=30)
    p = write_pdb(tmp_path, lines)
    mol = map_pdb(p)
    assert mol.chain_of_residue.tolist() == [0, 0, 1, 1]
    notes = [n for n in mol.notes if "chain break" in n]
    assert len(notes) == 1 and "GLY 2 (chain A)" in notes[0] and "SER 3 (chain A)" in notes[0]
    # no bond across: C(GLY2) = bead 7, N(SER3) = bead 9
    assert (mol.bead_label(7), mol.bead_label(9)) == ("C of GLY 2 (chain A)", "N of SER 3 (chain A)")
    bonds = {tuple(b) for b in mol.bonds.tolist()}
    assert (7, 9) not in bonds and (3, 5) in bonds
    assert len(mol.bonds) == mol.n_beads - 2
    ca = map_pdb(p, mapping="ca")
    assert ca.bonds.tolist() == [[0, 1], [2, 3]] and ca.chain_of_residue.tolist() == [0, 0, 1, 1]


def test_chain_break_ter_and_chain_id(tmp_path):
    lines = residue_lines("ALA", 1) + ["TER"] + residue_lines("GLY", 2, serial0=10)
    lines += residue_lines("SER", 3, chain="B", serial0=20)
    mol = map_pdb(write_pdb(tmp_path, lines))
    assert mol.chain_of_residue.tolist() == [0, 1, 2]
    assert len(mol.bonds) == 4 + 3 + 4
    assert not [n for n in mol.notes if "chain break" in n]   # only the distance case is noted


def test_note_mse(tmp_path):
    lines = peptide(("ALA",)) + residue_lines("MSE", 2, record="HETATM", serial0=10)
    p = write_pdb(tmp_path, lines)
    mol = map_pdb(p)
    assert mol.sequence() == "AM" and mol.bead_types[7] == 11
    notes = [n for n in mol.notes if "MSE" in n]
    assert len(notes) == 1 and "MET" in notes[0] and "MSE 2 (chain A)" in notes[0]


def test_ter_cap_and_ion_atom_records(tmp_path):
    # MD programs write caps, ions and waters as ATOM records
    lines = [atom_line(1, "CH3", "ACE", "A", 0, (-3, 0, 0))] + peptide()
    lines += [atom_line(60, "NA", "NA", "A", 10, (20, 0, 0), element="NA"),
              atom_line(61, "OW", "SOL", "A", 11, (25, 0, 0))]
    mol = map_pdb(write_pdb(tmp_path, lines))
    assert mol.n_beads == 14
    assert any("ACE x1" in n and "NA x1" in n and "SOL x1" in n for n in mol.notes)


# ---------------------------------------------------------------------------------------------------
# One ingestion path: residues in memory (the alternate-location and coordinate rules: tests/model/cg/test_pdb.py)
# ---------------------------------------------------------------------------------------------------

def test_map_residues_maps_in_memory_what_map_pdb_text_maps(monkeypatch):
    """The residues of a read file, mapped in memory, give the molecule of the file's text (notes included), and
    the mapping of residues reads no text."""
    from flashschnet.cg import mapping, map_residues
    from flashschnet.cg.pdb import parse_pdb

    lines = ["MODEL        1", *peptide(), "ENDMDL", "MODEL        2", *peptide(), "ENDMDL"]
    text = "\n".join(lines)
    ref = map_pdb_text(text, source="two.pdb")
    parsed = parse_pdb(text, "two.pdb")

    def no_text(*args, **kwargs):
        raise AssertionError("map_residues parsed PDB text")

    monkeypatch.setattr(mapping, "parse_pdb", no_text)
    mol = map_residues(parsed.residues, "two.pdb", n_models=parsed.n_models)
    np.testing.assert_array_equal(mol.positions, ref.positions)
    np.testing.assert_array_equal(mol.bonds, ref.bonds)
    assert mol.bead_names == ref.bead_names and mol.notes == ref.notes
    assert any("2 models found" in n for n in mol.notes)
    with pytest.raises(InputError, match="no residues"):
        map_residues([], "empty")
    with pytest.raises(InputError, match="unknown mapping 'martini'"):
        map_residues(parsed.residues, "two.pdb", mapping="martini")
