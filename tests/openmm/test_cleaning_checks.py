"""flashschnet.openmm.cleaning_checks: the cleaning step's checks of the input as OpenMM read it, through
:func:`~flashschnet.openmm.cleaning.clean_pdb`'s notes on real structures edited in the one place that makes the case:
force-field residue names standardised (HSD, CYX), and declared disulfide bonds (SSBOND records, CYX residues) whose
SG atoms are not at bonding distance named, nearest partners first; a bond to a symmetry mate not checked."""
from __future__ import annotations

from pathlib import Path

import pytest

from flashschnet.openmm.cleaning import clean_pdb
from tests.helpers.pdb_text import atoms_of, write_lines

STRUCTURES = Path(__file__).resolve().parents[1] / "data" / "structures"


def test_force_field_residue_names_are_standardised(tmp_path):
    """HSD (CHARMM) and CYX (Amber) become HIS and CYS for both force fields, with a note; nothing else changes."""
    path = STRUCTURES / "1HEL_lysozyme.pdb"
    rename = {15: "HSD", 6: "CYX", 127: "CYX"}
    lines = [f"{l[:17]}{rename[int(l[22:26])]:>3s}{l[20:]}" if l.startswith("ATOM") and int(l[22:26]) in rename
             else l for l in path.read_text().splitlines()]
    edited = write_lines(tmp_path, lines)
    cleaned = clean_pdb(str(edited))
    assert {k[0] for k in atoms_of(cleaned.text, 15)} == {"HIS"} and {k[0] for k in atoms_of(cleaned.text, 6)} == {"CYS"}
    assert any("residue names standardised" in n and "CYX->CYS x2" in n and "HSD->HIS x1" in n
               for n in cleaned.notes)
    assert cleaned.text.splitlines()[1:] == clean_pdb(str(path)).text.splitlines()[1:]


# --- declared disulfide bonds -----------------------------------------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"


def _disulfide_notes(cleaned):
    return [n for n in cleaned.notes if "disulfide" in n]


def test_cyx_pairs_not_at_bonding_distance_are_named():
    """The real thrombin file names 8 cysteines CYX, whose SG atoms are 3.6-6.0 A from the nearest other CYX SG: the
    note lists the 4 pairs (paired nearest first, listed in file order) with their distances."""
    path = CORPUS / "openmmforcefields__thrombin_Thrombin_protein.pdb"
    cleaned = clean_pdb(str(path))
    (note,) = _disulfide_notes(cleaned)
    assert note.startswith(f"{path}: 4 disulfide bonds the file declares")
    assert ("CYS 28 (chain -)-CYS 44 (chain -) 3.66 A, CYS 119 (chain -)-CYS 255 (chain -) 6.04 A, "
            "CYS 166 (chain -)-CYS 180 (chain -) 3.59 A, CYS 194 (chain -)-CYS 224 (chain -) 4.68 A") in note
    assert "fix the structure if they should be bonded" in note
    assert "CYX" not in {line[17:20] for line in cleaned.text.splitlines() if line.startswith("ATOM")}


@pytest.mark.parametrize("name", ["4PTI_bpti", "1HEL_lysozyme"])
def test_ssbond_records_at_bonding_distance_give_no_note(name):
    assert _disulfide_notes(clean_pdb(str(STRUCTURES / f"{name}.pdb"))) == []


def _edit_bpti(tmp_path, move_sg_of=None, cyx=(), ssbond=True, ssbond_symmetry=None):
    """BPTI (SSBOND 5-55, 14-38, 30-51, all ~2.05 A) with the SG of one cysteine moved 6 A along x, some cysteines
    renamed CYX, the SSBOND records removed, or the first one's second operator changed (6 A: at least
    3.9 A from its partner, beyond bonding distance whatever the direction)."""
    out = []
    for line in (STRUCTURES / "4PTI_bpti.pdb").read_text().splitlines():
        if line.startswith("SSBOND"):
            if not ssbond:
                continue
            if ssbond_symmetry and line[7:10].strip() == "1":
                line = line.ljust(72)[:66] + f"{ssbond_symmetry:>6}" + line.ljust(72)[72:]
        if line.startswith(("ATOM", "HETATM")) and line[17:20] == "CYS":
            resseq = int(line[22:26])
            if resseq == move_sg_of and line[12:16].strip() == "SG":
                line = f"{line[:30]}{float(line[30:38]) + 6.0:8.3f}{line[38:]}"
            if resseq in cyx:
                line = line[:17] + "CYX" + line[20:]
        out.append(line)
    return write_lines(tmp_path, out)


def test_an_ssbond_pair_moved_apart_is_named(tmp_path):
    (note,) = _disulfide_notes(clean_pdb(str(_edit_bpti(tmp_path, move_sg_of=14))))
    assert "1 disulfide bonds the file declares" in note and "CYS 14 (chain A)-CYS 38 (chain A) " in note


def test_an_ssbond_to_a_symmetry_mate_is_not_checked(tmp_path):
    """SSBOND 1 (5-55) given a symmetry operator: a bond to another copy, not between atoms of the file; moving the
    SG of 5 then names nothing."""
    path = _edit_bpti(tmp_path, move_sg_of=5, ssbond_symmetry="3655")
    assert _disulfide_notes(clean_pdb(str(path))) == []
    assert _disulfide_notes(clean_pdb(str(_edit_bpti(tmp_path, move_sg_of=5)))) != []


def test_cyx_names_pair_nearest_first_and_a_lone_cyx_is_named(tmp_path):
    """No SSBOND records; CYS 5, 55 and 14 named CYX: 5-55 pair at bonding distance (no note), 14 has no partner."""
    (note,) = _disulfide_notes(clean_pdb(str(_edit_bpti(tmp_path, ssbond=False, cyx=(5, 55, 14)))))
    assert "1 disulfide bonds the file declares" in note and "CYS 14 (chain A) (CYX, no partner)" in note
    assert "CYS 5 " not in note and "CYS 55 " not in note
    # all six renamed: the three bonded pairs are found by distance, nothing to say
    assert _disulfide_notes(clean_pdb(str(_edit_bpti(tmp_path, ssbond=False, cyx=(5, 14, 30, 38, 51, 55))))) == []
