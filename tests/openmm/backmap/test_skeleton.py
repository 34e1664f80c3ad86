"""flashschnet.openmm.backmap.skeleton: the skeleton of a 5-bead or CA CG structure and its all-atom reference --
the reference's residues with N, CA, C, O and (but for glycine) CB, each atom on the bead of its name (5 beads) or
only CA on one (CA mapping) -- and the one-line InputErrors for residues that differ from the reference's and a
reference that is not there."""
from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.backmap import build_skeleton

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.mark.parametrize("mapping", ["5bead", "ca"])
def test_each_skeleton_atom_sits_on_the_bead_of_its_name(mapping):
    from flashschnet.cg import map_pdb
    from flashschnet.openmm import cg_topology

    mol = map_pdb(PDB, mapping=mapping)
    cg = cg_topology(mol)
    skeleton = build_skeleton(cg, PDB, "beads.pdb")
    assert skeleton.mapping == mapping and skeleton.n_beads == mol.n_beads and skeleton.disulfides == []
    assert len(skeleton.labels) == 20 and skeleton.labels[5] == "TRP 6 (chain A)"
    top = skeleton.topology()
    assert [r.name for r in top.residues()] == [r.name for r in cg.residues()]
    beads = list(cg.atoms())
    for atom, bead in zip(top.atoms(), skeleton.bead_index):
        assert atom.name in ("N", "CA", "C", "O", "CB") and (atom.name != "CB" or atom.residue.name != "GLY")
        if mapping == "5bead" or atom.name == "CA":
            assert bead >= 0 and (beads[bead].name, beads[bead].residue.index) == (atom.name, atom.residue.index)
        else:
            assert bead == -1                           # rebuilt from the CA trace
    assert len(skeleton.mapped) == mol.n_beads          # every bead holds one skeleton atom


def test_residues_must_match_the_reference(tmp_path):
    from flashschnet.openmm import cg_topology
    from flashschnet.cg import map_pdb

    mol = map_pdb(PDB)
    other = tmp_path / "other.pdb"
    text = (EXAMPLES / "1L2Y_trpcage.pdb").read_text().replace("TRP A   6", "PHE A   6")
    other.write_text(text)
    with pytest.raises(InputError, match=r"residue 6 is TRP 6, but the reference .* has PHE 6"):
        build_skeleton(cg_topology(mol), str(other), "beads.pdb")
    with pytest.raises(InputError, match="no such file"):
        build_skeleton(cg_topology(mol), str(tmp_path / "none.pdb"), "beads.pdb")
