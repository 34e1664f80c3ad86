"""flashschnet-train's all-atom reference run (flashschnet.openmm.reference_md, ``flashschnet-train md``): what
AMBER cannot parameterise is refused, and the command writes the frames it is asked for. The stages that read a
reference run (mapping, priors, force matching, fit and validate): tests/model/train/test_fit.py."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def test_reference_md_refuses_what_amber_cannot_parameterise(tmp_path):
    from flashschnet.openmm.reference_md import reference_md

    bad = tmp_path / "lig.pdb"
    lines = [l for l in open(PDB) if l.startswith("ATOM")][:30]
    lines.append("HETATM  999  C1  LIG B   1       1.000   1.000   1.000  1.00  0.00           C\n")
    bad.write_text("".join(lines) + "END\n")
    with pytest.raises(InputError, match="cannot parameterise"):
        reference_md(str(bad), str(tmp_path / "o.npz"), frames=1, interval=1, progress=False)


def test_cli_md(tmp_path, capsys):
    from flashschnet.scripts.train import main

    out = tmp_path / "d.npz"
    assert main(["md", PDB, "--out", str(out), "--frames", "3", "--interval", "5", "--equilibration", "0",
                 "--quiet"]) == 0
    assert "done: reference data" in capsys.readouterr().err
    assert np.load(out)["positions_nm"].shape == (3, 304, 3)
    assert main(["md", str(tmp_path / "nope.pdb"), "--out", str(out), "--frames", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.pdb" in err[0]
