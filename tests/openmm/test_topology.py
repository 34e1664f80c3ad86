"""The CG OpenMM topology and PDB output (``flashschnet.openmm.topology``) of mapped structures."""
from __future__ import annotations

import numpy as np

from tests.conftest import STRUCTURES
from flashschnet.cg import map_pdb
from tests.helpers.pdb_text import BB, atom_line, residue_lines, write_pdb


def test_cg_topology_counts():
    from flashschnet.openmm.topology import cg_topology
    mol = map_pdb(STRUCTURES / "1UBQ_ubiquitin.pdb")
    top = cg_topology(mol)
    assert top.getNumAtoms() == mol.n_beads
    assert top.getNumResidues() == len(mol.residues)
    assert top.getNumChains() == 1
    assert top.getNumBonds() == len(mol.bonds)
    atoms = list(top.atoms())
    assert [a.name for a in atoms] == mol.bead_names
    assert {a.element.symbol for a in atoms} == {"N", "C", "O"}
    assert [r.name for r in top.residues()][:3] == ["MET", "GLN", "ILE"]
    assert [r.id for r in top.residues()][:2] == ["1", "2"]
    top3 = cg_topology(mol, replicas=3)
    assert top3.getNumAtoms() == 3 * mol.n_beads
    assert top3.getNumResidues() == 3 * len(mol.residues)
    assert top3.getNumChains() == 3
    assert top3.getNumBonds() == 3 * len(mol.bonds)
    b = [(x.atom1.index, x.atom2.index) for x in top3.bonds()]
    n = mol.n_beads
    assert b[len(mol.bonds)] == (mol.bonds[0, 0] + n, mol.bonds[0, 1] + n)


def test_cg_topology_broken_chain(tmp_path):
    from flashschnet.openmm.topology import cg_topology
    lines = residue_lines("ALA", 1) + residue_lines("GLY", 2, serial0=10)
    lines += residue_lines("SER", 3, shift=(30.0, 0, 0), serial0=20)
    mol = map_pdb(write_pdb(tmp_path, lines))
    top = cg_topology(mol, replicas=2)
    chains = list(top.chains())
    assert len(chains) == 4
    assert [len(list(c.residues())) for c in chains] == [2, 1, 2, 1]
    assert top.getNumBonds() == 2 * len(mol.bonds)


def test_write_cg_pdb_roundtrip(tmp_path):
    import mdtraj as md
    from flashschnet.openmm.topology import write_cg_pdb
    mol = map_pdb(STRUCTURES / "4PTI_bpti.pdb")
    out = tmp_path / "cg.pdb"
    write_cg_pdb(mol, out)
    t = md.load(str(out))
    assert t.n_atoms == mol.n_beads == 284
    assert t.n_residues == len(mol.residues)
    np.testing.assert_allclose(t.xyz[0], mol.positions / 10.0, atol=1e-3)
    assert [a.name for a in t.topology.atoms] == mol.bead_names
    # other positions
    shifted = mol.positions + 1.0
    write_cg_pdb(mol, out, positions_angstrom=shifted)
    np.testing.assert_allclose(md.load(str(out)).xyz[0], shifted / 10.0, atol=1e-3)
    ca = map_pdb(STRUCTURES / "1L2Y_trpcage.pdb", mapping="ca")
    write_cg_pdb(ca, out)
    t = md.load(str(out))
    assert t.n_atoms == 20
    np.testing.assert_allclose(t.xyz[0], ca.positions / 10.0, atol=1e-3)


def test_write_cg_pdb_insertion_codes(tmp_path):
    import mdtraj as md
    from flashschnet.openmm.topology import cg_topology, write_cg_pdb
    lines = residue_lines("ALA", 1) + [atom_line(10 + k, a, "GLY", "A", 1, np.array(BB[a]) + [3.8, 0, 0],
                                                   icode="A") for k, a in enumerate(("N", "CA", "C", "O"))]
    mol = map_pdb(write_pdb(tmp_path, lines))
    assert [r.label for r in mol.residues] == ["ALA 1 (chain A)", "GLY 1A (chain A)"]
    assert [r.id for r in cg_topology(mol).residues()] == ["1", "1A"]
    out = tmp_path / "cg.pdb"
    write_cg_pdb(mol, out)
    text = out.read_text()
    assert " GLY A   1A " in text
    t = md.load(str(out))
    assert t.n_residues == 2 and t.n_atoms == 9


def test_cg_molecule_from_topology_refuses_non_finite_positions():
    """The OpenMM-ML path (createSystem(..., positions=)) reads positions here: NaN or absurd ones are one line
    naming the atom, before any System is built."""
    import pytest

    from flashschnet.errors import InputError
    from flashschnet.openmm import cg_molecule_from_topology
    from flashschnet.openmm.topology import cg_topology

    mol = map_pdb(STRUCTURES / "1L2Y_trpcage.pdb")
    top = cg_topology(mol, 2)
    for bad, what in ((np.nan, "non-finite"), (np.inf, "non-finite"), (5e3, "beyond 999.9999 nm")):
        pos = np.tile(mol.positions, (2, 1)) * 0.1
        pos[mol.n_beads + 3, 1] = bad                  # replica 1: every replica's positions are checked
        with pytest.raises(InputError) as err:
            cg_molecule_from_topology(top, positions=pos, replicas=2, source="top.pdb")
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("top.pdb: the position of atom ") and what in msg, msg
        assert f"(index {mol.n_beads + 3})" in msg, msg
