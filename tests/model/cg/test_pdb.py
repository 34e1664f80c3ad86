"""flashschnet.cg.pdb: the PDB reader -- the first model's residues (chains split by TER), decoded bytes, residue
numbers (hexadecimal in huge systems), a residue's heavy atoms with alternate locations resolved, and the two rules
every way in shares: which alternate location is kept, which coordinates are refused. The reader's one-line errors
seen through the mapping (map_pdb): tests/model/cg/test_mapping.py."""
from __future__ import annotations

import pytest

from flashschnet.cg.pdb import decode_pdb, parse_pdb, residue_number, select_atoms
from flashschnet.errors import InputError
from tests.helpers.pdb_text import atom_line


def test_the_first_model_its_chains_and_atoms():
    text = "\n".join(["REMARK   a remark", "MODEL        1",
                      atom_line(1, "N", "ALA", "A", 1, (0.0, 0.0, 0.0)),
                      atom_line(2, "H", "ALA", "A", 1, (-0.5, 0.8, 0.0)),
                      atom_line(3, "CA", "ALA", "A", 1, (1.458, 0.0, 0.0), altloc="A", occ=0.4),
                      atom_line(4, "CA", "ALA", "A", 1, (1.5, 0.1, 0.0), altloc="B", occ=0.6),
                      atom_line(5, "OC1", "ALA", "A", 1, (2.0, -1.0, 0.0)),
                      atom_line(6, "OXT", "ALA", "A", 1, (2.0, -1.5, 0.0)),
                      "TER", atom_line(7, "CA", "GLY", "B", 2, (5.0, 0.0, 0.0)),
                      "ENDMDL", "MODEL        2", atom_line(8, "CA", "SER", "C", 9, (9.0, 9.0, 9.0)), "ENDMDL"])
    parsed = parse_pdb(text, "m.pdb")
    assert parsed.n_models == 2
    assert [(r.resname, r.chain, r.resseq, r.after_ter, len(r.atoms)) for r in parsed.residues] == \
        [("ALA", "A", 1, False, 6), ("GLY", "B", 2, True, 1)]
    assert parsed.residues[0].label == "ALA 1 (chain A)"
    atoms, n_alt = select_atoms(parsed.residues[0], "m.pdb")
    assert sorted(atoms) == ["CA", "N", "O", "OC1"] and n_alt == 1          # no H, no OXT; OC1 read as O
    assert atoms["CA"].xyz == (1.5, 0.1, 0.0) and atoms["CA"].lineno == 6 and atoms["O"] is atoms["OC1"]


def test_residue_numbers_and_bytes():
    assert residue_number("42") == 42 and residue_number("-3") == -3 and residue_number("") == 0
    assert residue_number("A000") == 0xA000                             # past 9999: hexadecimal
    with pytest.raises(ValueError):
        residue_number("12!")
    assert decode_pdb("REMARK caf\u00e9\n".encode("latin-1"), "x.pdb") == "REMARK caf\u00e9\n"
    for data, what in ((b"  \n", "file is empty"), (b"ATOM\x00\x01", "is a binary file")):
        with pytest.raises(InputError, match=f"x.pdb: {what}"):
            decode_pdb(data, "x.pdb")


@pytest.mark.parametrize("occupancies, kept", [([0.4, 0.6], 1), ([0.5, 0.5], 0), ([0.2, 0.7, 0.7], 1),
                                                ([float("nan"), 1.0], 0), ([1.0, float("nan"), 2.0], 2), ([1.0], 0)])
def test_highest_occupancy_then_the_first(occupancies, kept):
    """The one alternate-location rule (the raw-file reader's and the cleaning step's)."""
    from flashschnet.cg.pdb import highest_occupancy

    assert highest_occupancy(occupancies) == kept


@pytest.mark.parametrize("xyz, fault", [((1.0, -2.0, 9999.999), ""), ((float("nan"), 0.0, 0.0), "non-finite"),
                                        ((0.0, float("-inf"), 0.0), "non-finite"), ((0.0, 0.0, -1.0e4), "beyond")])
def test_position_fault(xyz, fault):
    """The one rule for input coordinates (files, the cleaning step of both force fields, OpenMM-ML positions)."""
    from flashschnet.cg.pdb import position_fault

    assert position_fault(xyz) == fault
