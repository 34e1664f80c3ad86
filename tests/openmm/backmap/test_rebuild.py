"""flashschnet.openmm.backmap.rebuild on trp-cage: the native structure mapped to 5 beads and rebuilt (one frame)
comes back close to the original (backbone <= 0.3 A; all heavy atoms <= 2.0 A RMSD), without clashes, all L, no new
cis peptide bond; on that one rebuild (built once), the files written from it load in mdtraj and in amber14 and a
failed write leaves the previous ones (:mod:`.output`), and the checks find what they look for on it
(:mod:`.checks`). The residue checks against the reference: test_skeleton.py; --frames: test_inputs.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import BackmapSettings, Rebuilder, build_skeleton, compare, write_backmapped
from flashschnet.openmm.backmap import checks

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """Trp-cage cleaned, mapped, rebuilt from its own beads: (cleaned PDBFile, rebuilder, frame result)."""
    import openmm.app as app

    from flashschnet.openmm import cg_topology
    from flashschnet.openmm.cleaning import clean_pdb

    folder = tmp_path_factory.mktemp("native")
    cleaned = clean_pdb(PDB)
    ref = cleaned.write(str(folder / "cleaned.pdb"))
    mol = cleaned.molecule()
    skeleton = build_skeleton(cg_topology(mol), ref, "trp-cage beads")
    rebuilder = Rebuilder(skeleton, BackmapSettings())
    result = rebuilder.frame(mol.positions / 10.0)
    return app.PDBFile(ref), rebuilder, result, folder


def test_native_trpcage_comes_back_close_to_the_original(native):
    ref, rebuilder, result, _ = native
    import openmm.unit as unit

    q = compare(ref.topology, ref.getPositions(asNumpy=True).value_in_unit(unit.nanometer), rebuilder.topology,
                result.positions_nm)
    assert q["missing"] == 0 and q["n_heavy"] == ref.topology.getNumAtoms()
    assert q["backbone_rmsd_nm"] <= 0.03, q          # the target: 0.3 A
    # the target for all heavy atoms: 2.0 A (1.88 A measured with FASPR's side chains; 2.35 A with the
    # templates, BackmapSettings(side_chains="templates"): TRP6 built at chi1 = -65 where the native's is trans)
    assert q["heavy_rmsd_nm"] <= 0.20, q


def test_native_trpcage_is_clean(native):
    _, rebuilder, result, _ = native
    c = result.check
    assert c.clashes == [] and c.d_residues == [] and c.new_cis == [], c
    assert c.converged and c.max_deviation_nm <= checks.DEVIATION_NM, c       # 0.36 A measured
    assert result.notes == []
    names = [a.name for a in rebuilder.topology.atoms()]
    assert names.count("OXT") == 1 and "H" in names         # the C-terminus closed, hydrogens for amber


def test_backmapped_files_load_in_mdtraj_and_amber14(native):
    import mdtraj as md
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.openmm.backmap import drop_hydrogens

    _, rebuilder, result, folder = native
    ff = app.ForceField("amber14-all.xml", "implicit/gbn2.xml")
    both = np.stack([result.positions_nm, result.positions_nm + 0.1])
    with_h = folder / "with_h"
    with_h.mkdir()
    write_backmapped(str(with_h), rebuilder.topology, both, {"test": True})
    pdb = app.PDBFile(str(with_h / "topology_allatom.pdb"))
    ff.createSystem(pdb.topology)                             # no template error: every residue has its atoms
    top, heavy = drop_hydrogens(rebuilder.topology, both)
    assert all(a.element.symbol != "H" for a in top.atoms())
    out = folder / "heavy"
    out.mkdir()
    files = write_backmapped(str(out), top, heavy, {"test": True}, first_step=10, interval=10, dt_ps=0.004)
    traj = md.load(files["backmapped.dcd"], top=files["topology_allatom.pdb"])
    assert traj.n_frames == 2 and traj.n_atoms == top.getNumAtoms()
    np.testing.assert_allclose(traj.xyz, heavy, atol=2e-4)
    models = md.load(files["backmapped.pdb"])
    assert models.n_frames == 2
    modeller = app.Modeller(app.PDBFile(files["topology_allatom.pdb"]).topology, heavy[0] * unit.nanometer)
    modeller.addHydrogens(ff)
    ff.createSystem(modeller.topology)
    assert sorted(p.name for p in out.iterdir()) == ["backmap.json", "backmapped.dcd", "backmapped.pdb",
                                                     "topology_allatom.pdb"]


def test_checks_find_clashes_d_residues_and_cis_bonds(native):
    _, rebuilder, result, _ = native
    top, xyz = rebuilder.topology, result.positions_nm
    mirrored = xyz * np.array([-1.0, 1.0, 1.0])                # a mirror image: every CA is D
    n_chiral = sum(1 for r in top.residues() if r.name != "GLY")
    assert len(checks.d_residues(mirrored, top)) == n_chiral
    atoms = {(a.residue.index, a.name): a.index for a in top.atoms()}
    moved = xyz.copy()
    moved[atoms[(5, "CZ2")]] = xyz[atoms[(0, "CG")]] + 0.01    # TRP6 ring atom onto ASN1's CG
    found = checks.clashes(moved, top)
    assert {(min(i, j), max(i, j)) for i, j, _ in found} >= {tuple(sorted((atoms[(5, "CZ2")], atoms[(0, "CG")])))}
    assert checks.clashes(xyz, top) == []
    assert checks.cis_peptides(xyz, top) == []
    w = checks.omegas(xyz, top)
    assert len(w) == top.getNumResidues() - 1 and all(abs(v) > 150 for v in w.values())


def test_a_failed_write_leaves_the_previous_files(native, tmp_path, write_faults):
    from flashschnet.errors import OutputError
    from flashschnet.openmm.backmap import output

    _, rebuilder, result, _ = native
    pos = result.positions_nm[None]
    write_backmapped(str(tmp_path), rebuilder.topology, pos, {"n": 1})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    write_faults.fail("backmapped.dcd", module=output, limit=100)
    with pytest.raises(OutputError, match="backmapped.dcd"):
        write_backmapped(str(tmp_path), rebuilder.topology, np.concatenate([pos, pos]), {"n": 2})
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before     # no staging folder left either
