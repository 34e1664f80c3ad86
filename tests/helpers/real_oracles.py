"""The real mlcg files and mlcg's own numbers for them (``tests/data/oracles/real/``, see its README.txt), shared by
the converter's tests (tests/model/test_convert.py) and OpenMM-ML's (tests/openmm/test_mlpotential.py)."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.conftest import DATA

REAL = DATA / "oracles" / "real"
S_MODEL, S_ORACLE = REAL / "model_and_prior_S.pt", REAL / "oracle_S.pt"


def load_oracle(path):
    return torch.load(path, weights_only=True)


def chignolin_pdb(tmp_path) -> Path:
    """An all-atom-style PDB whose N, CA, CB, C, O atoms sit at oracle S's 5-bead positions (frame 0), so that
    the 5-bead mapping reproduces mlcg's chignolin (CLN025, YYDPETGTWY) beads exactly."""
    o = load_oracle(S_ORACLE)
    seq = ["TYR", "TYR", "ASP", "PRO", "GLU", "THR", "GLY", "THR", "TRP", "TYR"]
    lines, res, name = [], -1, ""
    for i, (t, xyz) in enumerate(zip(o["bead_types"].tolist(), o["positions_A"][0].tolist())):
        if t == 21:
            res, name = res + 1, "N"
        elif t == 22 or (t == 6 and name == "N"):
            name = "CA"
        else:
            name = {23: "C", 24: "O"}.get(t, "CB")
        lines.append(f"ATOM  {i + 1:5d}  {name:<3s} {seq[res]} A{res + 1:4d}    "
                     f"{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}  1.00  0.00           {name[0]}")
    path = tmp_path / "cln025_5bead.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    return path
