"""flashschnet.openmm.backmap.command: every input of a backmapping is checked before anything is written or any frame
rebuilt -- one input of the two, --workers, --workers with --scheduler, --out, an earlier backmap without --force,
--structure without --reference or with --replica, and a CG structure whose residues are not the reference's: one
InputError line each, and the output folder is not created. Whole backmappings through the command line:
tests/scripts/test_backmap.py."""
from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.backmap import backmap

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def _refused(out, match, **kw):
    lines = []
    with pytest.raises(InputError, match=match) as info:
        backmap(str(out), progress=False, echo=lines.append, **kw)
    assert "\n" not in str(info.value) and lines == []
    return str(info.value)


@pytest.mark.parametrize("kw, match", [
    (dict(), r"^give a run directory or --structure CG\.pdb \(one of them\)$"),
    (dict(run_dir="run", structure=PDB, reference=PDB), r"\(one of them\)"),
    (dict(structure=PDB, reference=PDB, workers=0), r"^--workers must be >= 1, got 0$"),
    (dict(structure=PDB, reference=PDB, workers=2, scheduler="tcp://127.0.0.1:9"),
     r"give one of --workers N \(processes here\) and --scheduler ADDRESS"),
    (dict(structure=PDB), r"^--structure needs --reference: the all-atom PDB"),
    (dict(structure=PDB, reference=PDB, replica=0), r"^--replica and --temperature choose a trajectory of a run "),
    (dict(structure=PDB, reference=PDB, temperature_K=300.0), r"a --structure has none$"),
])
def test_bad_choices_are_one_line_and_create_nothing(tmp_path, kw, match):
    out = tmp_path / "out"
    _refused(out, match, **kw)
    assert not out.exists()


def test_an_out_that_is_a_file_or_holds_a_backmap_is_refused_and_left_as_it_was(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    _refused(a_file, r"--out .*file: exists and is not a directory", structure=PDB, reference=PDB)
    assert a_file.read_text() == "mine"
    out = tmp_path / "out"
    out.mkdir()
    (out / "backmapped.dcd").write_bytes(b"earlier")
    _refused(out, r"backmapped\.dcd: a backmap is already there; pass --force", structure=PDB, reference=PDB)
    assert [p.name for p in out.iterdir()] == ["backmapped.dcd"] and (out / "backmapped.dcd").read_bytes() == b"earlier"
    _refused("  ", r"^--out is empty", structure=PDB, reference=PDB)


def test_a_structure_that_is_not_its_reference_is_refused_before_the_out_folder_is_made(tmp_path):
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.cg import map_pdb
    from flashschnet.openmm import cg_topology

    mol = map_pdb(PDB)
    beads = tmp_path / "beads.pdb"
    with open(beads, "w") as f:
        app.PDBFile.writeFile(cg_topology(mol), mol.positions / 10.0 * unit.nanometer, f)
    other = tmp_path / "other.pdb"
    other.write_text((EXAMPLES / "1L2Y_trpcage.pdb").read_text().replace("TRP A   6", "PHE A   6"))
    out = tmp_path / "out"
    _refused(out, r"beads\.pdb: residue 6 is TRP 6, but the reference .*other\.pdb has PHE 6", structure=str(beads),
             reference=str(other))
    _refused(out, r"--structure .*none\.pdb: missing", structure=str(tmp_path / "none.pdb"), reference=PDB)
    assert not out.exists()
