"""flashschnet-backmap: a tiny flashschnet-simulate run (3 frames) backmapped through the CLI, in this process and in
worker processes; one CG structure with --structure and --hydrogens; every bad input is one line, exit 2, and
nothing is written."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import EXAMPLES, STRUCTURES
from flashschnet.scripts.backmap import main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """flashschnet-simulate on trp-cage: 20 steps, a frame every 10 (frames 0, 10, 20)."""
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path_factory.mktemp("bm") / "run"
    assert simulate([PDB, "--model", MODEL, "--steps", "20", "--report-interval", "10", "--out", str(out),
                     "--seed", "5", "--quiet", "--threads", "1"]) == 0
    return out


def _backmap(capsys, *argv):
    rc = main([str(a) for a in argv] + ["--quiet"])
    return rc, capsys.readouterr().err


def test_backmap_a_run_directory_in_worker_processes(run_dir, tmp_path, capsys):
    import mdtraj as md

    out = tmp_path / "bm"
    rc, err = _backmap(capsys, run_dir, "--frames", "0:3", "--workers", "2", "--out", out)
    assert rc == 0, err
    assert "done: 3 frames of replica 0 backmapped" in err.splitlines()[-1]
    summary = json.loads((out / "backmap.json").read_text())
    assert summary["frames"] == [0, 1, 2] and len(summary["per_frame"]) == 3 and summary["workers"] == 2
    for frame in summary["per_frame"]:         # a note per frame that is not clean, and only then
        assert (frame["notes"] != []) == (f"note: frame {frame['frame']}:" in err)
        assert frame["d_chirality_residues"] == []
    traj = md.load(str(out / "backmapped.dcd"), top=str(out / "topology_allatom.pdb"))
    models = md.load(str(out / "backmapped.pdb"))
    assert traj.n_frames == models.n_frames == 3 and traj.n_atoms == models.n_atoms
    assert not any(a.element.symbol == "H" for a in traj.topology.atoms)
    np.testing.assert_allclose(traj.xyz, models.xyz, atol=2e-4)
    # the CA atoms sit on the CA beads of those frames, within the largest deviation backmap.json reports
    from flashschnet.openmm.dcd import read_dcd

    cg = md.load_pdb(str(run_dir / "topology.pdb"))
    beads = read_dcd(str(run_dir / "replica_000.dcd"))[:, cg.topology.select("name CA")]
    deviation = np.linalg.norm(traj.xyz[:, traj.topology.select("name CA")] - beads, axis=-1).max(axis=1)
    assert (deviation <= np.array([f["max_deviation_nm"] for f in summary["per_frame"]]) + 2e-4).all()
    assert deviation.max() < 0.1


def test_backmap_one_structure_with_hydrogens(run_dir, tmp_path, capsys):
    import openmm.app as app

    out = tmp_path / "s"
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference", run_dir / "cleaned.pdb",
                       "--hydrogens", "--out", out)
    assert rc == 0, err
    pdb = app.PDBFile(str(out / "topology_allatom.pdb"))
    assert any(a.element.symbol == "H" for a in pdb.topology.atoms())
    app.ForceField("amber14-all.xml").createSystem(pdb.topology)


def _refused(rc, err, out, *needles):
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("flashschnet-backmap: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not out.exists(), "nothing may be written on bad input"


def test_run_directory_without_topology(run_dir, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "topology.pdb").unlink()
    rc, err = _backmap(capsys, copy, "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "topology.pdb: missing")


@pytest.mark.parametrize("argv, needles", [
    (["--frames", "500:600"], ["--frames 500:600", "has 3 frames (0 to 2)"]),
    (["--replica", "3"], ["--replica 3", "has replicas 0 to 0"]),
    (["--temperature", "300"], ["--temperature 300", "not a parallel-tempering run"]),
])
def test_bad_choices_of_frames(run_dir, tmp_path, capsys, argv, needles):
    rc, err = _backmap(capsys, run_dir, *argv, "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", *needles)


def test_structure_that_does_not_match_its_reference(run_dir, tmp_path, capsys):
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference",
                       STRUCTURES / "1VII_villin.pdb", "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "residues, but the reference")


def test_structure_needs_a_reference_and_one_input(run_dir, tmp_path, capsys):
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "--structure needs --reference")
    rc, err = _backmap(capsys, "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "give RUN_DIR or --structure")
    rc, err = _backmap(capsys, "--structure", PDB, "--reference", PDB, "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "a CG topology is needed")


def test_a_ca_structure_is_refused_naming_why(run_dir, tmp_path, capsys):
    from flashschnet.cg import map_pdb
    from flashschnet.openmm import write_cg_pdb

    ca = tmp_path / "ca.pdb"
    write_cg_pdb(map_pdb(PDB, mapping="ca"), str(ca))
    rc, err = _backmap(capsys, "--structure", ca, "--reference", run_dir / "cleaned.pdb", "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "CA-only CG structure", "5-bead")
