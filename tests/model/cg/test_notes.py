"""flashschnet.cg.notes: the wording of the ingestion notes -- counts and lists shortened for one line, residue labels,
and every note one line that starts with the input's path. The notes the CG mapping actually writes:
tests/model/cg/test_mapping.py; the cleaning step's: tests/openmm/test_cleaning.py."""
from __future__ import annotations

import inspect
import math
from collections import Counter

from flashschnet.cg import notes


def test_counts_lists_and_labels():
    assert notes.format_counts(Counter({"NA": 2, "HOH": 53, "CL": 2})) == "HOH x53, CL x2, NA x2"
    assert notes.format_list(["a", "b", "c"]) == "a, b, c"
    assert notes.format_list([str(i) for i in range(9)], limit=3) == "0, 1, 2 and 6 more"
    assert notes.residue_label("LYS", "12A", "A") == "LYS 12A (chain A)"
    assert notes.residue_label("ALA", 3, " ") == "ALA 3 (chain -)"


def test_every_note_is_one_line_starting_with_the_path():
    args = {"n_models": 3, "n_atoms": 4, "labels": ["ALA 1 (chain A)"] * 7, "changes": ["HSD->HIS", "HSD->HIS"],
            "pairs": ["CYS 3 - CYS 40"], "max_distance_a": 2.5, "replaced": ["MSE 2 (chain A)"], "names": ["HOH", "NA"],
            "rebuilt": ["LYS 5 (chain A)"], "before": "GLU 72 (chain A)", "after": "LYS 73 (chain A)",
            "distance": 0.754, "minimum": 1.0, "what": "C-N", "limit": 2.0, "label": "LEU 43 (chain A)", "bond": 1.23,
            "angle": 120.5, "dihedral_rad": math.pi, "ignored": Counter({"HOH": 5}), "name": "MSE",
            "read_as": "MET (selenomethionine)"}
    made = {}
    for name in notes.__all__:
        fn = getattr(notes, name)
        params = [p for p, v in inspect.signature(fn).parameters.items() if v.default is inspect.Parameter.empty]
        if params[0] != "src":
            continue
        made[name] = fn("/data/in.pdb", *[args[p] for p in params[1:]])
    assert len(made) == 15
    for name, text in made.items():
        assert text.startswith("/data/in.pdb: ") and "\n" not in text, name
    assert made["several_models"] == "/data/in.pdb: 3 models found; using the first (MODEL 1) only"
    assert "ALA 1 (chain A) and 2 more" in made["ideal_cb_placed"] and "of 7 residues" in made["ideal_cb_placed"]
    assert "HSD->HIS x2" in made["standardised_names"]
    assert "(C-N distance 0.75 A < 1.0 A)" in made["short_peptide_bond"]
    assert "(C-N distance 0.75 A > 2.0 A)" in made["chain_break"]
    assert "N-CA-C-O 180 deg" in made["terminal_o_placed"]
    assert made["ignored_non_protein"].endswith("ignored 5 non-protein residues (waters, ions, caps, ligands): HOH x5")
    assert made["noted_alias"] == "/data/in.pdb: MSE read as MET (selenomethionine): ALA 1 (chain A), " \
        "ALA 1 (chain A), ALA 1 (chain A), ALA 1 (chain A), ALA 1 (chain A) and 2 more"
