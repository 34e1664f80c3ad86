"""flashschnet.openmm.backmap.workers: many CG frames rebuilt in this process (the first fixes the atoms every frame
gets), the frames in their order, and one note line per frame that did not come out clean, named by its label -- on
a dipeptide (trp-cage's first two residues), the smallest structure the whole rebuild runs on. Worker processes and
a Dask scheduler: tests/scripts/test_backmap.py."""
from __future__ import annotations

import numpy as np

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import BackmapSettings, backmap_frames, build_skeleton

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def test_frames_are_rebuilt_in_order_with_a_note_line_per_frame(tmp_path):
    from flashschnet.cg import map_pdb
    from flashschnet.openmm import cg_topology

    ref = tmp_path / "dipeptide.pdb"
    ref.write_text("".join(line for line in open(PDB) if line.startswith("ATOM") and int(line[22:26]) <= 2)
                   + "END\n")
    mol = map_pdb(str(ref))
    skeleton = build_skeleton(cg_topology(mol), str(ref), "beads")
    frames = np.stack([mol.positions / 10.0, mol.positions / 10.0 + 1.0])      # the second: the first moved 1 nm
    said = []
    # deviation_nm=0: no mapped atom ends exactly on its bead, so every frame gets a note
    done = backmap_frames(skeleton, frames, BackmapSettings(deviation_nm=0.0), progress=False,
                          labels=["first", "second"], echo=said.append)
    n = done.topology.getNumAtoms()
    assert [r.name for r in done.topology.residues()] == ["ASN", "LEU"]
    assert any(a.element.symbol == "H" for a in done.topology.atoms())
    assert done.positions_nm.shape == (2, n, 3) and len(done.checks) == len(done.notes) == 2
    assert len(said) == 2
    for k, label in enumerate(["first", "second"]):
        check, notes = done.checks[k], done.notes[k]
        assert check.clashes == [] and check.d_residues == [] and 0.0 < check.max_deviation_nm < 0.05, check
        assert len(notes) == 1 and notes[0].startswith("a mapped atom is ") and said[k] == f"note: {label}: {notes[0]}"
    np.testing.assert_allclose(done.positions_nm[1] - 1.0, done.positions_nm[0], atol=0.01)
