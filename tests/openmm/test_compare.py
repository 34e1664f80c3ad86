"""flashschnet-compare end to end on a tiny budget: both runs, the Markdown/JSON/PNG report, --analyse-only and
the refusal to overwrite."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, SHARED
from flashschnet.scripts.compare import main

M3 = SHARED / "martini" / "m3"
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
ENTRY = Path(sys.executable).parent / "flashschnet-compare"


def test_help_through_the_console_entry_point():
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for flag in ("--model", "--forcefield-dir", "--out", "--martini-ns", "--flashschnet-ns", "--replicas",
                 "--platform", "--analyse-only"):
        assert flag in res.stdout


def test_tiny_comparison(tmp_path, capsys):
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    out = tmp_path / "cmp"
    args = [PDB, "--model", MODEL, "--forcefield-dir", str(M3), "--out", str(out), "--martini-ns", "0.004",
            "--flashschnet-ns", "0.0002", "--replicas", "2", "--frames", "5", "--threads", "1", "--quiet"]
    assert main(args) == 0
    assert "report in" in capsys.readouterr().err
    res = json.loads((out / "comparison.json").read_text())
    m, f = res["martini"], res["flashschnet"]
    assert m["speed"]["steps"] == 200 and f["speed"]["steps"] == 50 and f["replicas"] == 2
    assert m["speed"]["ns_per_day"] > 0 and f["speed"]["ns_per_day"] > 0
    assert len(m["summary"]["rmsf_nm"]) == len(f["summary"]["rmsf_nm"]) == 20       # one bead per residue
    assert res["ss_native"] == "CHHHHHHHCCHHHHCCCCCC"                     # mdtraj DSSP of 1L2Y, model 1
    for run in (m, f):
        s = run["summary"]
        assert len(s["times_ns"]) == 6 and s["times_ns"][0] == 0.0          # step 0 and 5 frames
        assert 0.0 <= s["q"]["mean"] <= 1.0 and s["rmsd"]["mean"] >= 0.0
        assert 0.0 <= s["ss_retention"]["mean"] <= 1.0
    md = (out / "comparison.md").read_text()
    for row in ("ns/day per replica", "ns/day aggregate", "backbone RMSD", "radius of gyration", "RMSF",
                "native contacts Q", "secondary-structure retention"):
        assert row in md
    assert (out / "comparison.png").stat().st_size > 10_000
    (out / "comparison.md").unlink()
    assert main(args + ["--analyse-only"]) == 0 and (out / "comparison.md").read_text() == md
    capsys.readouterr()
    assert main(args) == 2 and "--analyse-only" in capsys.readouterr().err
