"""flashschnet.scripts.backmap (flashschnet-backmap): a tiny flashschnet-simulate run (3 frames) backmapped through
the CLI, in this process, in worker processes and on a Dask scheduler; one temperature of a tempering run; one CG
structure with --structure and --hydrogens; every bad input is one line, exit 2, and nothing is written."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.conftest import EXAMPLES, STRUCTURES
from flashschnet.scripts.backmap import main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


@pytest.fixture(scope="module")
def run_dir(tiny_run):
    """flashschnet-simulate on trp-cage: 20 steps, a frame every 10 (frames 0, 10, 20; conftest's, shared)."""
    return tiny_run


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
    # an earlier backmap in --out is kept unless --force (as flashschnet-analyze keeps a report)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference", run_dir / "cleaned.pdb",
                       "--out", out)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "a backmap is already there; pass --force" in lines[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference", run_dir / "cleaned.pdb",
                       "--side-chains", "templates", "--force", "--out", out)
    assert rc == 0, err
    assert json.loads((out / "backmap.json").read_text())["settings"]["side_chains"] == "templates"


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
    (["--replica", "3"], ["--replica 3", "has no replica 3", "choose among 0"]),
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


def test_a_ca_structure_is_rebuilt(run_dir, tmp_path, capsys):
    import mdtraj as md

    from flashschnet.cg import map_pdb
    from flashschnet.openmm import write_cg_pdb

    ca = tmp_path / "ca.pdb"
    write_cg_pdb(map_pdb(PDB, mapping="ca"), str(ca))
    rc, err = _backmap(capsys, "--structure", ca, "--reference", run_dir / "cleaned.pdb", "--out", tmp_path / "o")
    assert rc == 0, err
    assert "done: 1 frame of structure backmapped" in err.splitlines()[-1]
    traj = md.load(str(tmp_path / "o" / "backmapped.pdb"))
    native = md.load(str(run_dir / "cleaned.pdb"))
    assert traj.n_atoms == native.topology.select("not element H").size


def test_missing_side_chain_packer_is_one_line(run_dir, tmp_path, capsys, monkeypatch):
    import sys

    from flashschnet.openmm.backmap import faspr

    monkeypatch.setattr(faspr, "_FOUND", {})
    monkeypatch.setitem(sys.modules, "pyfaspr", None)
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference", run_dir / "cleaned.pdb",
                       "--out", tmp_path / "o")
    _refused(rc, err, tmp_path / "o", "pip install pyfaspr==0.3.1", "--side-chains templates")
    # the templates need no extra package
    rc, err = _backmap(capsys, "--structure", run_dir / "topology.pdb", "--reference", run_dir / "cleaned.pdb",
                       "--side-chains", "templates", "--out", tmp_path / "t")
    assert rc == 0, err


def test_backmap_on_a_dask_scheduler(run_dir, tmp_path, capsys):
    """--scheduler: the frames after the first rebuilt on a Dask worker process, the same structures as here."""
    import logging

    import distributed

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.ERROR, memory_limit=0,
                                       scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    try:
        rc, err = _backmap(capsys, run_dir, "--frames", "0:3", "--scheduler", cluster.scheduler_address,
                           "--out", tmp_path / "dask")
    finally:
        cluster.close()
    assert rc == 0, err
    summary = json.loads((tmp_path / "dask" / "backmap.json").read_text())
    assert summary["scheduler"] == cluster.scheduler_address and summary["frames"] == [0, 1, 2]
    rc, err = _backmap(capsys, run_dir, "--frames", "0:3", "--out", tmp_path / "here")
    assert rc == 0, err
    import mdtraj as md

    a, b = (md.load(str(tmp_path / d / "backmapped.dcd"), top=str(tmp_path / d / "topology_allatom.pdb"))
            for d in ("dask", "here"))
    # the same structures, up to the CPU platform's minimisations, which are not bitwise reproducible between
    # runs and thread counts (frames differed by up to 0.12 A RMSD here), each frame's CA on that frame's beads
    rmsd = np.sqrt(np.mean(np.sum((a.xyz - b.xyz) ** 2, axis=-1), axis=1))
    assert a.n_frames == b.n_frames == 3 and (rmsd < 0.03).all(), rmsd
    from flashschnet.openmm.dcd import read_dcd

    cg = md.load_pdb(str(run_dir / "topology.pdb"))
    beads = read_dcd(str(run_dir / "replica_000.dcd"))[:3, cg.topology.select("name CA")]
    assert np.linalg.norm(a.xyz[:, a.topology.select("name CA")] - beads, axis=-1).max() < 0.05
    rc, err = _backmap(capsys, run_dir, "--scheduler", "tcp://127.0.0.1:9", "--out", tmp_path / "none")
    _refused(rc, err, tmp_path / "none", "--scheduler tcp://127.0.0.1:9: cannot reach a Dask scheduler there")


def test_backmap_one_temperature_of_a_tempering_run(tempering_run, tmp_path, capsys):
    """--temperature picks that rung's trajectory, not another's; without it, the lowest."""
    import mdtraj as md

    from flashschnet.openmm.dcd import read_dcd
    from flashschnet.openmm.run_reader import RunDir

    ladder = RunDir(str(tempering_run)).ladder()
    assert sorted(ladder) == pytest.approx([300.0, 346.41, 400.0], abs=0.01)      # geometric
    mid = sorted(ladder)[1]
    rc, err = _backmap(capsys, tempering_run, "--temperature", "346.41", "--frames", "1:3", "--out", tmp_path / "t350")
    assert rc == 0, err
    assert "done: 2 frames of 346.4 K backmapped" in err.splitlines()[-1]
    traj = md.load(str(tmp_path / "t350" / "backmapped.dcd"), top=str(tmp_path / "t350" / "topology_allatom.pdb"))
    cg = md.load_pdb(str(tempering_run / "topology.pdb"))
    ca = cg.topology.select("name CA")
    beads = {t: read_dcd(path)[1:3][:, ca] for t, path in ladder.items()}
    got = traj.xyz[:, traj.topology.select("name CA")]
    off = {t: float(np.abs(got - b).max()) for t, b in beads.items()}
    assert off[mid] < 0.05 and min(off[300.0], off[400.0]) > off[mid], off
    # (a copy with its checkpoint emptied: what the run directory lacks is a note, and backmap.json's input_warnings)
    damaged = tmp_path / "damaged"
    shutil.copytree(tempering_run, damaged)
    (damaged / "checkpoint.chk").write_bytes(b"")
    rc, err = _backmap(capsys, damaged, "--frames", "0", "--out", tmp_path / "lowest")
    assert rc == 0 and "backmapping its lowest temperature, 300.0 K" in err and "of 300.0 K" in err, err
    assert "note: checkpoint.chk: empty; the run cannot be resumed from it" in err
    warned = json.loads((tmp_path / "lowest" / "backmap.json").read_text())["input_warnings"]
    assert len(warned) == 1 and warned[0].startswith("checkpoint.chk: empty")
    rc, err = _backmap(capsys, tempering_run, "--temperature", "330", "--out", tmp_path / "none")
    _refused(rc, err, tmp_path / "none", "--temperature 330: not a temperature of", "300, 346.41, 400 K")
