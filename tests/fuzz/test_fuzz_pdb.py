"""Property-based fuzzing of PDB input (hypothesis): whatever text arrives -- truncated or deleted lines,
duplicated atoms, insertion codes, alternate locations, HETATM-only files, huge coordinates, junk bytes -- the
mapping either gives a consistent CG molecule with finite positions or raises InputError with a one-line
message naming the source. Never another exception, never NaN."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import EXAMPLES
from flashschnet.cg import map_pdb_text
from flashschnet.errors import InputError
from tests.helpers.fuzz import fuzz_settings

TEXT = (EXAMPLES / "1L2Y_trpcage.pdb").read_text()
ATOMS = [l for l in TEXT.splitlines() if l.startswith(("ATOM", "HETATM"))]
FIRST_MODEL = ATOMS[:ATOMS.index(next(l for l in ATOMS[1:] if l[6:11].strip() == "1"))] if any(
    l[6:11].strip() == "1" for l in ATOMS[1:]) else ATOMS
SETTINGS = fuzz_settings(60)


def _check(text: str, mapping: str = "5bead") -> None:
    try:
        mol = map_pdb_text(text, source="fuzz.pdb", mapping=mapping)
    except InputError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and "fuzz.pdb" in msg, msg
        return
    n = mol.n_beads
    assert n > 0 and mol.positions.shape == (n, 3) and np.isfinite(mol.positions).all()
    assert np.abs(mol.positions).max() < 2e4                       # within what PDB columns hold (+ rebuilt atoms)
    assert len(mol.bead_types) == len(mol.masses) == len(mol.bead_residue) == n
    assert (np.asarray(mol.bonds) < n).all() and (np.asarray(mol.bonds) >= 0).all()


def _edit(lines, op, i, j, value):
    lines = list(lines)
    if not lines:
        return lines
    i %= len(lines)
    line = lines[i]
    if op == "truncate":
        lines[i] = line[: j % (len(line) + 1)]
    elif op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, line)
    elif op == "icode":
        lines[i] = line[:26].ljust(26) + "ABZ"[j % 3] + line[27:]
    elif op == "altloc":
        lines[i] = line[:16].ljust(16) + "AB "[j % 3] + line[17:]
    elif op == "hetatm":
        lines[i] = "HETATM" + line[6:]
    elif op == "coordinate":
        field = [(30, 38), (38, 46), (46, 54)][j % 3]
        text = f"{value:8.3f}"[:8] if math.isfinite(value) else "     nan"
        lines[i] = line[: field[0]].ljust(field[0]) + text.rjust(8) + line[field[1]:]
    elif op == "junk":
        lines[i] = line[: j % 80] + "\x00\xff#$%" + line[j % 80:]
    elif op == "resname":
        lines[i] = line[:17].ljust(17) + ["XYZ", "HOH", "MSE", "   ", "NAL"][j % 5] + line[20:]
    return lines


@SETTINGS
@given(ops=st.lists(st.tuples(st.sampled_from(["truncate", "delete", "duplicate", "icode", "altloc", "hetatm",
                                               "coordinate", "junk", "resname"]),
                              st.integers(0, 10_000), st.integers(0, 10_000),
                              st.floats(allow_nan=True, allow_infinity=True, width=32)),
                    min_size=1, max_size=6),
       mapping=st.sampled_from(["5bead", "ca"]))
def test_edited_pdb_maps_or_fails_cleanly(ops, mapping):
    lines = FIRST_MODEL
    for op in ops:
        lines = _edit(lines, *op)
    _check("\n".join(lines) + "\nEND\n", mapping)


@SETTINGS
@given(st.text(max_size=400))
def test_arbitrary_text(text):
    _check(text)


@SETTINGS
@given(st.binary(max_size=400))
def test_binary_junk(data):
    _check(data.decode("latin1"))


@pytest.mark.parametrize("text", ["", "END\n", "\n\n\n",
                                  "\n".join("HETATM" + l[6:] for l in FIRST_MODEL),
                                  "\n".join(l[:40] for l in FIRST_MODEL),
                                  "\n".join(l[:30] + "1.0e+30 " + l[38:] for l in FIRST_MODEL)])
def test_classic_broken_files(text):
    _check(text)


def test_huge_coordinates_are_refused_with_the_line():
    text = "\n".join(l[:30] + "1.0e+30 " + l[38:] for l in FIRST_MODEL)
    with pytest.raises(InputError, match=r"fuzz.pdb: line 1: atom N of residue .* beyond what a PDB record holds"):
        map_pdb_text(text, source="fuzz.pdb")
