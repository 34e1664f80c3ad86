"""flashschnet-analyze: --help, a report of a real tiny flashschnet-simulate run checked against a direct
computation, a synthetic MARTINI-style directory (BB beads, solvent, a periodic DCD with a partial last frame)
analysed without a display (no pyplot), and one-line exit-2 errors for bad input."""
from __future__ import annotations

import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import mdtraj as md
import numpy as np
import pytest
import torch

from tests.conftest import EXAMPLES, STRUCTURES
from flashschnet.openmm.observables import (MOLAR_GAS_CONSTANT_KJ_MOL_K, fraction_native_contacts, kabsch_align,
                                         native_contacts, radius_of_gyration, rmsf)
from flashschnet.scripts.analyze import main

torch.set_num_threads(1)
ENTRY = Path(sys.executable).parent / "flashschnet-analyze"
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
FILES = {"report.md", "report.json", "energy.png", "structure.png", "contacts.png", "fes.png"}


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    """A real flashschnet-simulate run: 2 replicas, 40 steps, a frame every 10 steps."""
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path_factory.mktemp("sim") / "run"
    rc = simulate([PDB, "--model", MODEL, "--steps", "40", "--replicas", "2", "--report-interval", "10",
                   "--out", str(out), "--seed", "7", "--quiet", "--threads", "1"])
    assert rc == 0
    return out


def _analyze(capsys, *argv):
    rc = main([str(a) for a in argv] + ["--quiet"])
    return rc, capsys.readouterr().err


def _one_line_error(rc, err, *needles):
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("flashschnet-analyze: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_help_through_the_console_entry_point():
    assert ENTRY.exists(), f"console entry point not installed at {ENTRY}"
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for flag in ("RUN_DIR", "--out", "--reference", "--temperature", "--stride", "--replicas", "--force"):
        assert flag in res.stdout
    # --help loads none of the analysis' heavy modules (torch comes with the flashschnet package itself)
    code = ("import sys\nfrom flashschnet.scripts import analyze\ntry:\n    analyze.main(['--help'])\n"
            "except SystemExit:\n    pass\nheavy = [m for m in ('matplotlib', 'openmm', 'mdtraj', "
            "'flashschnet.openmm') if m in sys.modules]\nassert not heavy, heavy\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_report_of_a_simulate_run_matches_a_direct_computation(sim_run, tmp_path, capsys):
    out = tmp_path / "report"
    rc, err = _analyze(capsys, sim_run, "--out", out)
    assert rc == 0, err
    assert FILES <= set(os.listdir(out))
    for png in FILES - {"report.md", "report.json"}:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "flashschnet" and rep["backbone_bead"] == "CA" and rep["n_residues"] == 20
    assert rep["temperature_K"] == 300.0 and rep["temperature_source"] == "run.json"
    assert rep["kT_kJ_mol"] == pytest.approx(MOLAR_GAS_CONSTANT_KJ_MOL_K * 300)

    # independent reading: mdtraj for the DCDs, its topology for the CA beads and the reference
    top = md.load(str(sim_run / "topology.pdb"))
    ca = top.topology.select("name CA")
    ref = top.xyz[0, ca].astype(float)
    pairs = native_contacts(ref)
    assert rep["n_native_contacts"] == len(pairs) > 0
    pooled = []
    for r in range(2):
        frames = md.load(str(sim_run / f"replica_{r:03d}.dcd"), top=top.topology).xyz[:, ca].astype(float)
        pooled.append(frames)
        got = rep["replicas"][r]
        assert got["replica"] == r and got["frames"] == 5          # step 0 (the start) and 4 more
        assert got["step"] == [0, 10, 20, 30, 40]
        assert np.allclose(got["time_ps"], [0.0, 0.04, 0.08, 0.12, 0.16])
        rmsd, aligned = kabsch_align(frames, ref)
        assert np.abs(np.array(got["rmsd_nm"]) - rmsd).max() < 1e-5
        assert rmsd.max() > 1e-3                       # the frames did move: the comparison means something
        assert np.abs(np.array(got["rg_nm"]) - radius_of_gyration(frames)).max() < 1e-5
        assert np.abs(np.array(got["rmsf_nm"]) - rmsf(aligned)).max() < 1e-5
        assert np.allclose(got["q"], fraction_native_contacts(frames, ref, pairs))
        s = got["summary"]
        assert s["rmsd_mean_nm"] == pytest.approx(rmsd.mean(), abs=1e-5)
        assert s["final_rmsd_nm"] == pytest.approx(rmsd[-1], abs=1e-5)
    # log traces are the log.csv rows
    with open(sim_run / "log.csv") as f:
        rows = list(csv.DictReader(f))
    for r in range(2):
        mine = [x for x in rows if x["replica"] == str(r)]
        trace = rep["log"][str(r)]
        assert trace["step"] == [int(x["step"]) for x in mine]
        assert np.allclose(trace["potential_energy_kJ_mol"], [float(x["potential_energy_kJ_mol"]) for x in mine])
        assert np.allclose(trace["temperature_K"], [float(x["temperature_K"]) for x in mine])
        assert rep["replicas"][r]["summary"]["temperature_mean_K"] == pytest.approx(
            np.mean([float(x["temperature_K"]) for x in mine]))
    # contact map: fraction of the 10 pooled frames with CA-CA < 0.8 nm, |i-j| >= 3; reference in "reference"
    allf = np.concatenate(pooled)
    d = np.linalg.norm(allf[:, :, None] - allf[:, None], axis=-1)
    want = (d < 0.8).mean(axis=0)
    cm = np.array(rep["contact_map"]["fraction"], dtype=float)
    i, j = np.indices(cm.shape)
    far = np.abs(i - j) >= 3
    assert np.isnan(cm[~far]).all() and np.allclose(cm[far], want[far])
    nat = np.array(rep["contact_map"]["reference"], dtype=float)
    dn = np.linalg.norm(ref[:, None] - ref[None], axis=-1)
    assert np.array_equal(nat[far], (dn < 0.8)[far].astype(float))
    # FES: finite exactly where populated, F = -kT ln(n / n_max)
    fes = rep["fes"]
    rmsd_all = np.concatenate([rep["replicas"][r]["rmsd_nm"] for r in range(2)])
    rg_all = np.concatenate([rep["replicas"][r]["rg_nm"] for r in range(2)])
    counts, _, _ = np.histogram2d(rmsd_all, rg_all, bins=[fes["rmsd_edges_nm"], fes["rg_edges_nm"]])
    assert counts.sum() == 10
    F = np.array([[np.nan if v is None else v for v in row] for row in fes["free_energy_kJ_mol"]])
    assert np.array_equal(np.isfinite(F), counts > 0)
    kT = rep["kT_kJ_mol"]
    assert np.allclose(F[counts > 0], -kT * np.log(counts[counts > 0] / counts.max()))
    md_text = (out / "report.md").read_text()
    for needle in ("| replica | frames |", "![free-energy surface](fes.png)", "(contacts.png)", "(energy.png)"):
        assert needle in md_text


def test_options_replicas_stride_temperature_reference(sim_run, tmp_path, capsys):
    out = tmp_path / "opts"
    # --temperature other than the run's own: one line before any work (F at another kT of these frames is not
    # the free energy there)
    t0 = time.perf_counter()
    _one_line_error(*_analyze(capsys, sim_run, "--out", out, "--temperature", "350"),
                    "--temperature 350 contradicts the run's own 300 K", "run.json", "drop --temperature")
    assert time.perf_counter() - t0 < 5 and not out.exists()
    rc, err = _analyze(capsys, sim_run, "--out", out, "--replicas", "1", "--stride", "2", "--temperature", "300",
                       "--reference", PDB, "--bins", "3")
    assert rc == 0, err
    rep = json.loads((out / "report.json").read_text())
    assert [r["replica"] for r in rep["replicas"]] == [1] and list(rep["log"]) == ["1"]
    assert rep["replicas"][0]["step"] == [0, 20, 40] and rep["replicas"][0]["frames"] == 3
    assert rep["temperature_K"] == 300 and rep["kT_kJ_mol"] == pytest.approx(MOLAR_GAS_CONSTANT_KJ_MOL_K * 300)
    assert rep["temperature_source"] == "--temperature"
    assert rep["input_warnings"] == []
    assert rep["fes"]["bins"] == 3 and len(rep["fes"]["free_energy_kJ_mol"]) == 3
    # the all-atom PDB's CA atoms are the 5-bead mapping's CA beads: same RMSD as against topology.pdb
    top = md.load(str(sim_run / "topology.pdb"))
    ca = top.topology.select("name CA")
    frames = md.load(str(sim_run / "replica_001.dcd"), top=top.topology).xyz[::2, ca].astype(float)
    aa = md.load_pdb(PDB)
    ref = aa.xyz[0, aa.topology.select("name CA")].astype(float)
    assert np.abs(np.array(rep["replicas"][0]["rmsd_nm"]) - kabsch_align(frames, ref)[0]).max() < 1e-5
    assert rep["reference"] == os.path.abspath(PDB)
    # a run that recorded no temperature: --temperature sets kT
    d = _copy(sim_run, tmp_path / "no_temperature")
    cfg = json.loads((d / "run.json").read_text())
    del cfg["temperature_K"]
    (d / "run.json").write_text(json.dumps(cfg))
    rc, err = _analyze(capsys, d, "--out", tmp_path / "t350", "--temperature", "350", "--bins", "3")
    assert rc == 0, err
    rep350 = json.loads((tmp_path / "t350" / "report.json").read_text())
    assert rep350["temperature_K"] == 350 and rep350["kT_kJ_mol"] == pytest.approx(MOLAR_GAS_CONSTANT_KJ_MOL_K * 350)


def _martini_dir(path: Path, n_res=12, n_water=30, n_frames=5, seed=0):
    """A MARTINI-looking run directory: BB (+ SC1 on every other residue) beads, W solvent, periodic box."""
    import openmm.app as app
    import openmm.unit as u

    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    top = app.Topology()
    chain = top.addChain("A")
    names, pos = [], []
    bb = np.cumsum(rng.normal(0, 0.22, (n_res, 3)) + [0.3, 0, 0], axis=0) + 2.0
    for k in range(n_res):
        res = top.addResidue("ALA" if k % 2 else "LYS", chain)
        top.addAtom("BB", app.Element.getBySymbol("C"), res)
        names.append("BB")
        pos.append(bb[k])
        if k % 2 == 0:
            top.addAtom("SC1", app.Element.getBySymbol("C"), res)
            names.append("SC1")
            pos.append(bb[k] + [0, 0.3, 0])
    wchain = top.addChain("W")
    for k in range(n_water):
        top.addAtom("W", app.Element.getBySymbol("O"), top.addResidue("W", wchain))
        names.append("W")
        pos.append(rng.uniform(0, 6, 3))
    pos = np.array(pos)
    top.setUnitCellDimensions(u.Quantity((6.0, 6.0, 6.0), u.nanometer))
    with open(path / "topology.pdb", "w") as f:
        app.PDBFile.writeFile(top, pos * u.nanometer, f)
    frames = pos[None] + rng.normal(0, 0.05, (n_frames, len(pos), 3))
    with open(path / "trajectory.dcd", "wb") as f:
        dcd = app.DCDFile(f, top, 0.02 * u.picosecond, firstStep=100, interval=100)
        for x in frames:
            dcd.writeModel(x * u.nanometer, periodicBoxVectors=np.eye(3) * 6.0 * u.nanometer)
    with open(path / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "time_ps", "replica", "potential_energy_kJ_mol", "temperature_K", "ns_per_day"])
        for k in range(n_frames):
            w.writerow([100 * (k + 1), 2.0 * (k + 1), 0, -1000.0 - k, 305.0 + k, 50.0])
    (path / "run.json").write_text(json.dumps({"dt_fs": 20.0, "temperature_K": 310.0, "report_interval": 100}))
    is_bb = np.array([n == "BB" for n in names])
    return frames[:, is_bb], pos[is_bb]


def test_martini_style_directory_without_display(tmp_path):
    run = tmp_path / "martini"
    frames, ref = _martini_dir(run)
    ref = np.round(ref * 10, 3) / 10                   # what topology.pdb keeps (0.001 Angstrom)
    # a run killed mid-write: the header announces one more frame, of which only half was written
    dcd = run / "trajectory.dcd"
    data = bytearray(dcd.read_bytes())
    data[8:12] = struct.pack("<i", struct.unpack("<i", bytes(data[8:12]))[0] + 1)
    dcd.write_bytes(bytes(data) + bytes(data[-400:-200]))
    # no display, and a GUI backend requested: the report must not depend on either
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["MPLBACKEND"] = "TkAgg"
    code = ("import sys\nfrom flashschnet.scripts.analyze import main\nrc = main(sys.argv[1:])\n"
            "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot (GUI backends) was imported'\nsys.exit(rc)\n")
    res = subprocess.run([sys.executable, "-c", code, str(run), "--quiet"], capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    out = run / "analysis"
    assert FILES <= set(os.listdir(out))
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "martini" and rep["backbone_bead"] == "BB" and rep["n_residues"] == 12
    assert rep["temperature_K"] == 310.0
    got = rep["replicas"][0]
    assert got["frames"] == 5 and got["step"] == [100, 200, 300, 400, 500]
    assert np.allclose(got["time_ps"], [2, 4, 6, 8, 10])
    assert np.abs(np.array(got["rmsd_nm"]) - kabsch_align(frames, ref)[0]).max() < 1e-5
    assert np.abs(np.array(got["rg_nm"]) - radius_of_gyration(frames)).max() < 1e-5
    assert any("complete" in n for n in rep["notes"]), rep["notes"]
    assert rep["log"]["0"]["temperature_K"] == [305.0, 306.0, 307.0, 308.0, 309.0]
    # an all-atom reference has no BB beads: its CA atoms stand in for them (noted in the report)
    aa = tmp_path / "aa.pdb"
    shifted = ref + 0.05
    aa.write_text("".join(f"ATOM  {k + 1:5d}  CA  {'ALA' if k % 2 else 'LYS'} A{k + 1:4d}    {x * 10:8.3f}{y * 10:8.3f}"
                          f"{z * 10:8.3f}  1.00  0.00           C\n" for k, (x, y, z) in enumerate(shifted)) + "END\n")
    assert main([str(run), "--out", str(tmp_path / "aa_report"), "--reference", str(aa), "--quiet"]) == 0
    rep = json.loads((tmp_path / "aa_report" / "report.json").read_text())
    assert any("CA atoms stand in" in n for n in rep["notes"])
    assert np.abs(np.array(rep["replicas"][0]["rmsd_nm"]) - kabsch_align(frames, shifted)[0]).max() < 1e-5
    # ... but not one of another protein: residue 1 is LYS in the run (it used to be analysed against it)
    (tmp_path / "ala.pdb").write_text(aa.read_text().replace(" LYS ", " ALA "))
    assert main([str(run), "--out", str(tmp_path / "ala_report"), "--reference", str(tmp_path / "ala.pdb"),
                 "--quiet"]) == 2


def _copy(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("analysis*"))
    return dst


def test_refuses_to_overwrite_a_report_without_force(sim_run, tmp_path, capsys):
    out = tmp_path / "again"
    assert _analyze(capsys, sim_run, "--out", out)[0] == 0
    before = (out / "report.json").read_text()
    rc, err = _analyze(capsys, sim_run, "--out", out, "--stride", "2")
    _one_line_error(rc, err, "report.md", "--force")
    assert (out / "report.json").read_text() == before
    rc, err = _analyze(capsys, sim_run, "--out", out, "--stride", "2", "--force")
    assert rc == 0, err
    assert json.loads((out / "report.json").read_text())["replicas"][0]["frames"] == 3     # steps 0, 20, 40 of 0..40


def test_bad_input_is_one_line_and_exit_2(sim_run, tmp_path, capsys):
    import openmm.app as app
    import openmm.unit as u

    # missing directory
    _one_line_error(*_analyze(capsys, tmp_path / "nope"), "nope", "no such directory")
    # no trajectories
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "topology.pdb").write_text((sim_run / "topology.pdb").read_text())
    _one_line_error(*_analyze(capsys, empty), "no trajectories", "replica_NNN.dcd")
    # topology.pdb missing
    d = _copy(sim_run, tmp_path / "notop")
    (d / "topology.pdb").unlink()
    _one_line_error(*_analyze(capsys, d), "topology.pdb", "missing")
    # topology/trajectory atom-count mismatch (a topology with one bead less)
    d = _copy(sim_run, tmp_path / "mismatch")
    lines = (d / "topology.pdb").read_text().splitlines(keepends=True)
    last = max(k for k, l in enumerate(lines) if l.startswith("ATOM"))
    (d / "topology.pdb").write_text("".join(lines[:last] + lines[last + 1:]))
    _one_line_error(*_analyze(capsys, d), "replica_000.dcd", "97 atoms per frame", "has 96")
    # empty trajectory: a DCD header without frames
    d = _copy(sim_run, tmp_path / "noframes")
    pdb = app.PDBFile(str(d / "topology.pdb"))
    with open(d / "replica_001.dcd", "wb") as f:
        app.DCDFile(f, pdb.topology, 0.004 * u.picosecond)
    _one_line_error(*_analyze(capsys, d), "replica_001.dcd", "no complete frame")
    # damaged DCD
    d = _copy(sim_run, tmp_path / "damaged")
    (d / "replica_000.dcd").write_bytes(b"\x00garbage" * 10)
    _one_line_error(*_analyze(capsys, d), "replica_000.dcd", "not a readable DCD")
    # unreadable log.csv: binary, wrong header, a broken row in the middle
    for name, content in (("binary", b"\xff\xfe\x00\x81" * 50), ("header", b"a,b,c\n1,2,3\n"),
                          ("row", None)):
        d = _copy(sim_run, tmp_path / f"log_{name}")
        if content is None:
            rows = (d / "log.csv").read_text().splitlines()
            rows[2] = "10,0.04,one,400.0,300.0,2.0"          # line 3 of 9: not a partial last row
            (d / "log.csv").write_text("\n".join(rows) + "\n")
        else:
            (d / "log.csv").write_bytes(content)
        _one_line_error(*_analyze(capsys, d), "log.csv", {"binary": "unreadable log", "header": "no column step",
                                                          "row": "line 3: unreadable row"}[name])
    # a replica the run does not have; a reference with the wrong number of residues
    _one_line_error(*_analyze(capsys, sim_run, "--out", tmp_path / "x", "--replicas", "0,5"), "--replicas 0,5",
                    "has no replica 5")
    villin = STRUCTURES / "1VII_villin.pdb"
    _one_line_error(*_analyze(capsys, sim_run, "--out", tmp_path / "y", "--reference", villin),
                    "1VII_villin.pdb", "topology.pdb: 20 residues, but the reference", "has 36")
    _one_line_error(*_analyze(capsys, sim_run, "--out", tmp_path / "z", "--reference", tmp_path / "none.pdb"),
                    "none.pdb", "no such file")
    # argparse rejects malformed options with exit 2 as well
    with pytest.raises(SystemExit) as exc:
        main([str(sim_run), "--stride", "0"])
    assert exc.value.code == 2
    assert "--stride" in capsys.readouterr().err


def test_partial_last_log_row_is_tolerated(sim_run, tmp_path, capsys):
    d = _copy(sim_run, tmp_path / "cut")
    text = (d / "log.csv").read_text()
    (d / "log.csv").write_text(text + "50,0.2,0,41")            # killed while writing the next row
    rc, err = _analyze(capsys, d)
    assert rc == 0, err
    rep = json.loads((d / "analysis" / "report.json").read_text())
    assert rep["log"]["0"]["step"] == [0, 10, 20, 30, 40]
    assert any("incomplete" in n for n in rep["notes"])


# -- parallel tempering: per temperature, never pooled --------------------------------------------------------

LADDER = "300:400:3"


@pytest.fixture(scope="module")
def pt_run(tmp_path_factory):
    """A real parallel-tempering run: 3 temperatures, 40 steps, an exchange and a frame every 10 steps."""
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path_factory.mktemp("pt") / "run"
    rc = simulate([PDB, "--model", MODEL, "--steps", "40", "--temperatures", LADDER, "--exchange-interval", "10",
                   "--report-interval", "10", "--out", str(out), "--seed", "3", "--quiet", "--threads", "1"])
    assert rc == 0
    return out


def _rung_frames(run, name):
    """The CA frames of one T<K>.dcd, read with mdtraj (independently of flashschnet's reader)."""
    top = md.load(str(run / "topology.pdb"))
    ca = top.topology.select("name CA")
    return md.load(str(run / name), top=top.topology).xyz[:, ca].astype(float), top.xyz[0, ca].astype(float)


def _fes_array(fes):
    return np.array([[np.nan if v is None else v for v in row] for row in fes["free_energy_kJ_mol"]])


def test_tempering_run_is_analysed_per_temperature_each_with_its_own_kT(pt_run, tmp_path, capsys):
    from flashschnet.openmm.ladder import geometric_ladder, rung_name

    out = tmp_path / "pt_report"
    rc, err = _analyze(capsys, pt_run, "--out", out, "--bins", "2")
    assert rc == 0, err
    assert FILES <= set(os.listdir(out))
    rep = json.loads((out / "report.json").read_text())
    temps = geometric_ladder(300.0, 400.0, 3)
    assert rep["ensemble"] == "parallel tempering" and rep["temperatures_K"] == pytest.approx(temps, abs=1e-9)
    # nothing per walker, nothing under one temperature
    assert "replicas" not in rep and "temperature_K" not in rep and "kT_kJ_mol" not in rep and "fes" not in rep
    with open(pt_run / "log.csv") as f:
        log_rows = list(csv.DictReader(f))
    nontrivial = 0
    for rec, t in zip(rep["temperatures"], temps):
        name = rung_name(t) + ".dcd"
        frames, ref = _rung_frames(pt_run, name)
        assert rec["file"] == name and rec["frames"] == len(frames) == rec["summary"]["frames"] > 1
        assert np.abs(np.array(rec["rmsd_nm"]) - kabsch_align(frames, ref)[0]).max() < 1e-5
        assert np.abs(np.array(rec["rg_nm"]) - radius_of_gyration(frames)).max() < 1e-5
        # F = -R T ln p from this temperature's frames only, with this temperature's kT
        kT = MOLAR_GAS_CONSTANT_KJ_MOL_K * t
        assert rec["kT_kJ_mol"] == pytest.approx(kT, rel=1e-12)
        fes = rec["fes"]
        counts, _, _ = np.histogram2d(rec["rmsd_nm"], rec["rg_nm"], bins=[fes["rmsd_edges_nm"], fes["rg_edges_nm"]])
        assert counts.sum() == len(frames)
        F = _fes_array(fes)
        assert np.array_equal(np.isfinite(F), counts > 0)
        assert np.allclose(F[counts > 0], -kT * np.log(counts[counts > 0] / counts.max()), rtol=1e-9, atol=1e-12)
        nontrivial += bool((F[counts > 0] > 0).any())         # a bin below the top one: the kT is tested
        # the contact map of this temperature's frames
        d = np.linalg.norm(frames[:, :, None] - frames[:, None], axis=-1)
        cm = np.array(rec["contact_map"], dtype=float)
        far = np.abs(np.subtract.outer(np.arange(len(cm)), np.arange(len(cm)))) >= 3
        assert np.allclose(cm[far], (d < 0.8).mean(axis=0)[far])
        # energies: the log rows whose walker was at this temperature (its thermostat_K)
        mine = sorted((r for r in log_rows if abs(float(r["thermostat_K"]) - t) < 1e-6), key=lambda r: int(r["step"]))
        assert rec["log"]["step"] == [int(r["step"]) for r in mine] and len(mine) == len(frames)
        assert np.allclose(rec["log"]["potential_energy_kJ_mol"], [float(r["potential_energy_kJ_mol"]) for r in mine])
        assert rec["log"]["walker"] == [int(r["replica"]) for r in mine]
    assert nontrivial >= 2, "the run's F surfaces are flat: the kT check means nothing"
    md_text = (out / "report.md").read_text()
    assert "| T (K) | kT (kJ/mol) |" in md_text and "| 346.4 | 2.88 | `T346.4.dcd` |" in md_text
    assert "| replica |" not in md_text and "pooled" not in md_text.replace("no result pools", "")
    # far too few frames for anything: warnings, on stderr and in the report
    assert {s["figure"] for s in rep["too_little_data"]} == {"energy.png", "structure.png", "contacts.png", "fes.png"}
    fes_short = next(s for s in rep["too_little_data"] if s["figure"] == "fes.png")
    n = rep["temperatures"][0]["frames"]
    assert fes_short["subjects"] == pytest.approx(temps) and fes_short["frames"] == n
    assert fes_short["more_frames"] == 100 - n and fes_short["more_steps"] == (100 - n) * 10
    assert f"warning: {fes_short['message']}" in err and "## Too little data" in md_text


def test_tempering_run_refuses_temperature_and_replicas(pt_run, tmp_path, capsys):
    out = tmp_path / "never"
    _one_line_error(*_analyze(capsys, pt_run, "--out", out, "--temperature", "350"),
                    "--temperature 350", "parallel-tempering run (3 temperatures, 300.0-400.0 K)", "own kT")
    _one_line_error(*_analyze(capsys, pt_run, "--out", out, "--replicas", "0"),
                    "--replicas", "analysed per temperature", "not per walker")
    assert not out.exists()
    # a run killed before it demultiplexed: its per-temperature files are not there yet
    d = _copy(pt_run, tmp_path / "killed")
    (d / "T346.4.dcd").unlink()
    _one_line_error(*_analyze(capsys, d, "--out", out), "T346.4.dcd: missing", "--resume")
    assert not out.exists()


def test_tempering_run_of_an_older_layout(pt_run, tmp_path, capsys):
    """run.json's temperature_K beside temperatures is not the run's kT; a log without thermostat_K is attributed
    through walkers.csv; without run.json the ladder comes from the T<K>.dcd names, and a log no file attributes
    is left out (noted), never shown under a guessed temperature; a rung without frames is left out (noted)."""
    import openmm.app as app
    import openmm.unit as u

    d = _copy(pt_run, tmp_path / "old")
    cfg = json.loads((d / "run.json").read_text())
    cfg["temperature_K"] = 350.0
    (d / "run.json").write_text(json.dumps(cfg))
    with open(d / "log.csv") as f:
        rows = list(csv.reader(f))
    drop = rows[0].index("thermostat_K")
    (d / "log.csv").write_text("".join(",".join(r[:drop] + r[drop + 1:]) + "\n" for r in rows))
    rc, err = _analyze(capsys, d, "--out", d / "a")
    assert rc == 0, err
    rep = ref_rep = json.loads((d / "a" / "report.json").read_text())
    assert [r["kT_kJ_mol"] for r in rep["temperatures"]] == pytest.approx(
        [MOLAR_GAS_CONSTANT_KJ_MOL_K * t for t in rep["temperatures_K"]])
    assert any("walkers.csv" in n for n in rep["notes"])
    with open(pt_run / "log.csv") as f:
        log_rows = list(csv.DictReader(f))
    for rec in rep["temperatures"]:
        mine = sorted((r for r in log_rows if abs(float(r["thermostat_K"]) - rec["temperature_K"]) < 1e-6),
                      key=lambda r: int(r["step"]))
        assert rec["log"]["walker"] == [int(r["replica"]) for r in mine]

    # no run.json, no walkers.csv, no thermostat_K; the 400 K walker dropped before its first frame
    (d / "run.json").unlink()
    (d / "walkers.csv").unlink()
    pdb = app.PDBFile(str(d / "topology.pdb"))
    with open(d / "T400.0.dcd", "wb") as f:
        app.DCDFile(f, pdb.topology, 0.004 * u.picosecond)
    rc, err = _analyze(capsys, d, "--out", d / "b")
    assert rc == 0, err
    rep = json.loads((d / "b" / "report.json").read_text())
    assert rep["temperatures_K"] == [300.0, 346.4] and "file names" in rep["temperature_source"]
    assert rep["temperatures"][1]["kT_kJ_mol"] == pytest.approx(MOLAR_GAS_CONSTANT_KJ_MOL_K * 346.4)
    assert rep["temperatures"][0]["rmsd_nm"] == ref_rep["temperatures"][0]["rmsd_nm"]
    assert all(r["log"] is None and "potential_energy_mean_kJ_mol" not in r["summary"] for r in rep["temperatures"])
    assert any("not attributed to temperatures" in n for n in rep["notes"])
    assert any("T400.0.dcd: no frame" in n and "400.0 K is left out" in n for n in rep["notes"])
    assert "energy.png" not in {s["figure"] for s in rep["too_little_data"]}


# -- too little data ------------------------------------------------------------------------------------------

def test_too_little_data_is_warned_with_how_much_more(sim_run, tmp_path, capsys):
    """sim_run has a handful of frames per replica: every figure is short, and the warning says by how much."""
    from flashschnet.openmm.analyze import MIN_CONTACT_FRAMES, MIN_FES_FRAMES, MIN_RMSF_FRAMES, MIN_TRACE_POINTS

    out = tmp_path / "short"
    rc, err = _analyze(capsys, sim_run, "--out", out)
    assert rc == 0, err
    rep = json.loads((out / "report.json").read_text())
    per = [len(md.load(str(sim_run / f"replica_{r:03d}.dcd"), top=str(sim_run / "topology.pdb"))) for r in range(2)]
    short = {(s["figure"], s["quantity"]): s for s in rep["too_little_data"]}
    fes = short["fes.png", "F(RMSD, Rg)"]
    assert fes["subjects"] is None and fes["frames"] == sum(per) and fes["needed"] == MIN_FES_FRAMES
    # two replicas add two frames per report of 10 steps
    assert fes["more_frames"] == MIN_FES_FRAMES - sum(per)
    assert fes["more_steps"] == -(-(MIN_FES_FRAMES - sum(per)) // 2) * 10
    assert f"from {sum(per)} frames (2 replicas pooled); at least {MIN_FES_FRAMES} are needed" in fes["message"]
    rmsf_short = short["structure.png", "the RMSF"]
    assert rmsf_short["subjects"] == [0, 1] and rmsf_short["frames"] == min(per)
    assert rmsf_short["more_steps"] == (MIN_RMSF_FRAMES - min(per)) * 10
    assert (("contacts.png", "the contact map") in short) == (sum(per) < MIN_CONTACT_FRAMES)
    with open(sim_run / "log.csv") as f:
        rows = [int(r["replica"]) for r in csv.DictReader(f)]
    few_rows = min(map(rows.count, (0, 1))) < MIN_TRACE_POINTS
    assert (("energy.png", "the energy and temperature traces") in short) == few_rows
    warned = [l for l in err.splitlines() if "warning: too little data" in l]
    assert [l.split("warning: ", 1)[1] for l in warned] == [s["message"] for s in rep["too_little_data"]]
    md_text = (out / "report.md").read_text()
    assert "## Too little data" in md_text and fes["message"] in md_text


def test_enough_data_is_not_warned_about(tmp_path, capsys):
    """A synthetic single-trajectory run of exactly MIN_FES_FRAMES frames: no warning; one frame less: only F's."""
    from flashschnet.openmm.analyze import MIN_FES_FRAMES

    run = tmp_path / "enough"
    _martini_dir(run, n_frames=MIN_FES_FRAMES)
    rc, err = _analyze(capsys, run)
    assert rc == 0, err
    assert json.loads((run / "analysis" / "report.json").read_text())["too_little_data"] == []
    assert "warning" not in err and "Too little data" not in (run / "analysis" / "report.md").read_text()
    run = tmp_path / "one_short"
    _martini_dir(run, n_frames=MIN_FES_FRAMES - 1)
    rc, err = _analyze(capsys, run)
    assert rc == 0, err
    short = json.loads((run / "analysis" / "report.json").read_text())["too_little_data"]
    assert [(s["figure"], s["frames"], s["more_frames"], s["more_steps"]) for s in short] == \
        [("fes.png", MIN_FES_FRAMES - 1, 1, 100)]
    assert err.count("warning: too little data") == 1
