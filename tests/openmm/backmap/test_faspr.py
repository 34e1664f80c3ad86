"""flashschnet.openmm.backmap.faspr: FASPR packs side chains on a backbone (trp-cage's TRP6 comes out in its native
rotamer, which the one-template builder misses), a packed residue is moved rigidly onto N, CA, C and the CB bead,
and a FASPR that fails quietly (exit status 0) or is missing is one clear error."""
from __future__ import annotations

import io
import math
import sys

import numpy as np
import pytest

from tests.conftest import EXAMPLES, STRUCTURES
from flashschnet.errors import InputError
from flashschnet.openmm.backmap import faspr

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.fixture(scope="module")
def native():
    """Trp-cage's residue names and {(residue, atom name): xyz nm} of its heavy atoms."""
    import openmm.app as app
    import openmm.unit as unit

    pdb = app.PDBFile(PDB)
    xyz = pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    atoms = {(a.residue.index, a.name): np.asarray(xyz[a.index], dtype=np.float64) for a in pdb.topology.atoms()}
    return [r.name for r in pdb.topology.residues()], atoms


def _chi1(res, gamma):
    from flashschnet.cg.geometry import dihedral

    return math.degrees(dihedral(res["N"], res["CA"], res["CB"], res[gamma]))


def test_faspr_packs_native_rotamers_on_the_native_backbone(native):
    names, atoms = native
    backbone = np.stack([[atoms[(i, k)] for k in ("N", "CA", "C", "O")] for i in range(len(names))])
    packed = faspr.pack_side_chains(names, backbone)
    assert len(packed) == len(names)
    for i, (name, res) in enumerate(zip(names, packed)):
        assert set(res) == {"N", "CA", "C"} | ({"CB"} if name != "GLY" else set()) | set(faspr.SIDE_CHAIN[name])
        np.testing.assert_allclose(res["CA"], atoms[(i, "CA")], atol=1e-3)       # the backbone kept (PDB's 3 decimals)
    # TRP6: trans in the NMR model (chi1 near 180); the template builder's chi1 = -65 misses it (docs/backmapping.md)
    native_chi1 = _chi1({k: atoms[(5, k)] for k in ("N", "CA", "CB", "CG")}, "CG")
    assert abs((_chi1(packed[5], "CG") - native_chi1 + 180) % 360 - 180) < 30, (_chi1(packed[5], "CG"), native_chi1)


def test_faspr_gets_most_chi1_of_a_crystal_structure_right():
    """Lysozyme (1HEL, 1.7 A X-ray): chi1 within 40 deg of the crystal's for 90 of 103 residues (87%; FASPR's paper:
    about 9 in 10). Trp-cage's NMR model has rare rotamers (LEU2 +53, LYS8 +76, ARG16 +59): 5 of 13 there."""
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.openmm.cleaning import clean_pdb

    pdb = app.PDBFile(io.StringIO(clean_pdb(str(STRUCTURES / "1HEL_lysozyme.pdb")).text))
    xyz = pdb.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    atoms = {(a.residue.index, a.name): np.asarray(xyz[a.index], dtype=np.float64) for a in pdb.topology.atoms()}
    names = [r.name for r in pdb.topology.residues()]
    backbone = np.stack([[atoms[(i, k)] for k in ("N", "CA", "C", "O")] for i in range(len(names))])
    packed = faspr.pack_side_chains(names, backbone)
    right = total = 0
    for i, name in enumerate(names):
        if faspr.SIDE_CHAIN[name] and name != "PRO":
            g = faspr.SIDE_CHAIN[name][0]
            native = _chi1({k: atoms[(i, k)] for k in ("N", "CA", "CB", g)}, g)
            total += 1
            right += abs((_chi1(packed[i], g) - native + 180) % 360 - 180) < 40
    assert total == 103 and right >= 0.8 * total, (right, total)


def test_a_packed_residue_is_moved_onto_its_beads():
    rng = np.random.default_rng(3)
    res = {k: rng.normal(size=3) for k in ("N", "CA", "C", "CB", "CG", "CD")}
    angle = 0.7
    rot = np.array([[math.cos(angle), -math.sin(angle), 0.0], [math.sin(angle), math.cos(angle), 0.0], [0, 0, 1.0]])
    shift = np.array([0.3, -1.0, 2.0])
    anchors = {k: res[k] @ rot.T + shift for k in ("N", "CA", "C", "CB")}
    moved = faspr.fit_side_chain(res, anchors)
    for k in res:                                   # a rigid motion is found exactly, side chain included
        np.testing.assert_allclose(moved[k], res[k] @ rot.T + shift, atol=1e-12)
    glycine = {k: res[k] for k in ("N", "CA", "C")}
    assert faspr.fit_side_chain(glycine, anchors) == glycine


def _fake(tmp_path, script: str) -> str:
    exe = tmp_path / "FASPR"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return str(exe)


def test_faspr_failing_quietly_is_caught(native, tmp_path):
    names, atoms = native
    backbone = np.stack([[atoms[(i, k)] for k in ("N", "CA", "C", "O")] for i in range(len(names))])
    # FASPR prints an error and exits 0 (its own behaviour when it cannot read its library)
    exe = _fake(tmp_path, 'echo "error! cannot find rotamer library dun2010bbdep.bin"\nexit 0\n')
    with pytest.raises(RuntimeError, match="FASPR failed: error! cannot find rotamer library"):
        faspr.pack_side_chains(names, backbone, exe)
    # an output with residues missing, and one with an atom missing
    exe = _fake(tmp_path, 'while [ "$1" != "-o" ]; do shift; done\nhead -4 "${0%/*}/given.pdb" > "$2"\nexit 0\n')
    (tmp_path / "given.pdb").write_text(faspr.backbone_pdb(["ASN"], 10 * backbone[:1]))
    with pytest.raises(RuntimeError, match="1 of 20 residues written"):
        faspr.pack_side_chains(names, backbone, exe)
    with pytest.raises(RuntimeError, match=r"residue 1 \(ASN\) without CB, CG, OD1, ND2"):
        faspr.pack_side_chains(names[:1], backbone[:1], exe)
    with pytest.raises(InputError, match="FASPR packs the 20 standard amino acids only"):
        faspr.pack_side_chains(["HOH"], backbone[:1], exe)


def test_missing_pyfaspr_is_one_line(monkeypatch):
    monkeypatch.setattr(faspr, "_FOUND", {})
    monkeypatch.setitem(sys.modules, "pyfaspr", None)           # import pyfaspr -> ImportError
    with pytest.raises(InputError, match=r"pyfaspr, which is not installed: pip install pyfaspr==0.3.1 .* "
                                         r"--side-chains templates") as info:
        faspr.faspr_executable()
    assert "\n" not in str(info.value)
