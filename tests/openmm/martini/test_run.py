"""flashschnet-martini: PDB -> martinize2 -> insane -> our System -> 20 fs Langevin, through the CLI: a short
stable run with reporters like flashschnet-simulate, resume, a MartiniGo run, and clear errors for missing
parameter files, unusable structures and bad arguments. The preparation itself (the box, martinize2's failures):
test_prepare.py."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EXAMPLES, SHARED
from flashschnet.openmm.martini import read_topology
from flashschnet.openmm.martini.prepare import FORCEFIELD_FILES
from flashschnet.openmm.dcd import read_dcd
from flashschnet.scripts.martini import main

M3 = SHARED / "martini" / "m3"
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
ENTRY = Path(sys.executable).parent / "flashschnet-martini"


def _m3() -> str:
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    return str(M3)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_help_through_the_console_entry_point():
    assert ENTRY.exists(), f"console entry point not installed at {ENTRY}"
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for flag in ("--forcefield-dir", "--steps", "--out", "--platform", "--seed", "--dt", "--resume", "--padding",
                 "--salt"):
        assert flag in res.stdout


def test_short_run_is_stable_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    args = [PDB, "--forcefield-dir", _m3(), "--out", str(out), "--report-interval", "100", "--seed", "5",
            "--threads", "1", "--quiet"]
    assert main(args + ["--steps", "1000"]) == 0            # 20 ps at 20 fs
    err = capsys.readouterr().err
    assert "energy minimisation" in err and "done: 1000 steps" in err
    for name in ("run.json", "topology.pdb", "trajectory.dcd", "log.csv", "checkpoint.chk", "system/system.top",
                 "system/cg.pdb", "system/martinize2.log"):
        assert (out / name).exists(), name
    cfg = json.loads((out / "run.json").read_text())
    assert cfg["dt_fs"] == 20.0 and cfg["temperature_K"] == 300.0
    rows = _rows(out / "log.csv")
    assert [int(r["step"]) for r in rows] == list(range(0, 1001, 100))          # step 0: the minimised start
    energies = np.array([float(r["potential_energy_kJ_mol"]) for r in rows])
    temps = np.array([float(r["temperature_K"]) for r in rows])
    assert np.isfinite(energies).all() and (energies < 0).all()
    assert 270 < temps.mean() < 330, temps                  # Langevin at 300 K, dof without constraints/vsites
    n = sum(1 for l in open(out / "topology.pdb") if l.startswith(("ATOM", "HETATM")))
    frames = read_dcd(str(out / "trajectory.dcd"))
    assert frames.shape == (11, n, 3) and np.isfinite(frames).all()
    start = np.array([[float(l[30:38]), float(l[38:46]), float(l[46:54])] for l in open(out / "topology.pdb")
                      if l.startswith(("ATOM", "HETATM"))]) / 10.0
    assert np.abs(frames[0] - start).max() < 1e-4          # frame 0 is the minimised structure (PDB: 0.001 A)
    bb = [i for i, l in enumerate(l for l in open(out / "topology.pdb") if l.startswith(("ATOM", "HETATM")))
          if l[12:16].strip() == "BB"]
    assert len(bb) == 20                                     # trp-cage: 20 residues
    step = np.linalg.norm(np.diff(frames[:, bb], axis=1), axis=2)
    assert step.max() < 0.5, step.max()                      # the chain stays whole and bonded (unwrapped)

    assert main(args + ["--steps", "1500", "--resume"]) == 0
    assert "resuming" in capsys.readouterr().err
    assert [int(r["step"]) for r in _rows(out / "log.csv")] == list(range(0, 1501, 100))
    assert read_dcd(str(out / "trajectory.dcd")).shape[0] == 16                # step 0 once

    assert main(args + ["--steps", "10"]) == 2               # the folder already holds a run
    assert "already holds a run" in capsys.readouterr().err


def test_missing_forcefield_files_one_line(tmp_path, capsys):
    ff = tmp_path / "ff"
    ff.mkdir()
    (ff / FORCEFIELD_FILES[0]).write_text("; only the main file\n")
    rc = main([PDB, "--forcefield-dir", str(ff), "--steps", "10", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashschnet-martini: error:")
    assert "martini_v3.0.0_ions_v1.itp" in err[0] and "flashschnet-martini --fetch-forcefield DIR" in err[0]
    rc = main([PDB, "--forcefield-dir", str(tmp_path / "nowhere"), "--steps", "10", "--out", str(tmp_path / "o"),
               "--quiet"])
    assert rc == 2 and "is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "o" / "run.json").exists()


def _renamed_trpcage(tmp_path, name="XYZ"):
    """trp-cage with residue 5 renamed to something neither OpenMM, pdbfixer nor MARTINI 3 knows."""
    lines = [line[:17] + name + line[20:] if line.startswith("ATOM") and line[22:26].strip() == "5" else line
             for line in open(PDB)]
    pdb = tmp_path / "bad.pdb"
    pdb.write_text("".join(lines))
    return pdb


@pytest.mark.parametrize("content, message", [
    ("HETATM    1  C1  LIG A   1       0.000   0.000   0.000  1.00  0.00           C\nEND\n", "no protein residues"),
    (None, "residue XYZ 5 (chain A) is an amino acid"),
])
def test_unusable_structures_are_one_line_through_the_entry_point(tmp_path, content, message):
    """Refused by the cleaning step, before martinize2 runs: one line naming the file (and the residue)."""
    _m3()
    pdb = _renamed_trpcage(tmp_path) if content is None else tmp_path / "bad.pdb"
    if content is not None:
        pdb.write_text(content)
    res = subprocess.run([str(ENTRY), str(pdb), "--forcefield-dir", str(M3), "--steps", "10",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    line = res.stderr.strip()
    assert line.startswith("flashschnet-martini: error:") and message in line and "bad.pdb" in line
    assert not (tmp_path / "o" / "run.json").exists()      # nothing that looks like a run


@pytest.mark.parametrize("args, message", [
    (["--dt", "60"], "--dt 60"),
    (["--padding", "0.5"], "below the 1.1 nm cut-off"),
    (["--platform", "NoSuchPlatform"], "not available"),
    (["--report-interval", "10", "--checkpoint-interval", "15"], "multiple of --report-interval"),
])
def test_bad_arguments(tmp_path, capsys, args, message):
    rc = main([PDB, "--forcefield-dir", str(M3), "--steps", "10", "--out", str(tmp_path / "o"), "--quiet", *args])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_nan_coordinate_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    """The same cleaning step as flashschnet-simulate's: a NaN is refused before martinize2 or any output."""
    lines = Path(PDB).read_text().splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("ATOM"))
    lines[i] = lines[i][:30] + "     nan" + lines[i][38:]
    pdb = tmp_path / "nan.pdb"
    pdb.write_text("\n".join(lines) + "\n")
    rc = main([str(pdb), "--forcefield-dir", _m3(), "--steps", "10", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"flashschnet-martini: error: {pdb}: line {i + 1}: atom "), err
    assert "non-finite coordinate" in err[0] and not (tmp_path / "o").exists()


def test_go_model_run_through_the_cli(tmp_path, capsys):
    """--go: martinize2 -go's files in OUT/system, one residue per Go site in the trajectory topology (they follow
    the beads), run.json records it, and a resume keeps it (given or not) and refuses another set-up."""
    out = tmp_path / "go"
    args = [PDB, "--forcefield-dir", _m3(), "--go", "--steps", "10", "--report-interval", "5",
            "--minimize-iterations", "50", "--seed", "3", "--out", str(out), "--quiet"]
    assert main(args) == 0
    assert (out / "system" / "go_atomtypes.itp").exists() and (out / "system" / "go_nbparams.itp").exists()
    assert json.loads((out / "run.json").read_text())["go"] is True
    top = read_topology(str(out / "system" / "system.top"), include_dirs=[_m3()])
    sites = [a for a in top.moleculetypes["protein"].atoms if a.name == "CA"]
    assert len(sites) == 20                                  # one Go site per trp-cage residue
    capsys.readouterr()
    args[args.index("--steps") + 1] = "20"
    assert main(args + ["--resume", "--padding", "2"]) == 2
    assert "--padding 2 (the run's: 1.5)" in capsys.readouterr().err
    assert main([a for a in args if a != "--go"] + ["--resume"]) == 0      # --go left out: the run's
    assert json.loads((out / "run.json").read_text())["go"] is True
