"""flashschnet.openmm.martini.prepare: PDB -> martinize2 -> insane -> system.top: a prepared box neutral, padded and
reproducible (insane seeded); ``go=True`` (MartiniGo, martinize2 -go) writes a system.top that our reader and
``gmx_d grompp`` both accept, with the same energies in both force fields, refuses an elastic network beside it, and
keeps GO_VIRT undefined for a force field patched to include the Go files itself; martinize2's own failure is one
InputError line, and a tool stopped by a full disk an OutputError."""
from __future__ import annotations

import os
import re
import shutil
import sys
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, EXAMPLES, SHARED, STRUCTURES
from flashschnet.errors import InputError
from flashschnet.openmm.martini.prepare import GO_FILES, prepare_system, write_system_top
from flashschnet.openmm.martini.system import build_system, read_gro
from flashschnet.openmm.martini.topology import read_topology
from tests.helpers.martini_energies import gromacs_terms as _terms

M3 = SHARED / "martini" / "m3"
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def _m3() -> str:
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    return str(M3)


def _close(ours: float, ref: float) -> bool:
    """Double precision, as in test_system.py: 1e-10 relative or 1e-9 kJ/mol near 0."""
    return abs(ours - ref) <= max(1e-10 * abs(ref), 1e-9)


def _renamed_trpcage(tmp_path, name="XYZ"):
    """trp-cage with residue 5 renamed to something neither OpenMM, pdbfixer nor MARTINI 3 knows (as in
    test_run.py)."""
    lines = [line[:17] + name + line[20:] if line.startswith("ATOM") and line[22:26].strip() == "5" else line
             for line in open(PDB)]
    pdb = tmp_path / "bad.pdb"
    pdb.write_text("".join(lines))
    return pdb


def test_prepared_box_is_neutral_padded_and_reproducible(tmp_path):
    m3 = _m3()
    a = prepare_system(PDB, m3, tmp_path / "a", padding_nm=1.5, seed=3)
    b = prepare_system(PDB, m3, tmp_path / "b", padding_nm=1.5, seed=3)
    assert Path(a.gro).read_text() == Path(b.gro).read_text()          # insane seeded: same system
    top = read_topology(a.top, include_dirs=[m3])
    charge = sum(atom.charge * count for name, count in top.molecules for atom in top.moleculetypes[name].atoms)
    assert abs(charge) < 1e-6
    assert dict(top.molecules)["W"] > 0 and dict(top.molecules)["NA"] > 0 and dict(top.molecules)["CL"] > 0
    pos, box = read_gro(a.gro)
    protein = pos[:a.n_protein_beads]
    assert np.allclose(box, box[0]) and (protein.min(axis=0) >= 1.5 - 0.01).all()
    assert (box - protein.max(axis=0) >= 1.5 - 0.01).all()
    assert build_system(top, box).getNumParticles() == len(pos)


def test_failed_martinize2_is_one_line(tmp_path):
    """martinize2's own failure (here: a residue MARTINI 3 does not know, given to prepare_system without the
    cleaning step) is one InputError line naming the file, the tool and the fix; its log is kept."""
    from flashschnet.errors import InputError

    pdb = _renamed_trpcage(tmp_path)
    with pytest.raises(InputError) as err:
        prepare_system(str(pdb), _m3(), str(tmp_path / "system"), seed=1)
    msg = str(err.value)
    assert len(msg.splitlines()) == 1 and "martinize2 failed" in msg and "bad.pdb" in msg and "--ignore XYZ" in msg
    assert (tmp_path / "system" / "martinize2.log").exists()


def test_a_tool_stopped_by_a_full_disk_is_an_output_error(tmp_path):
    """martinize2 or insane killed by a full disk (here a Python writing to /dev/full, as the tools are Python
    programs) is the output's error -- exit status 5, naming the file -- not bad input (exit 2)."""
    import os
    import sys

    from flashschnet.errors import InputError, OutputError
    from flashschnet.openmm.martini.prepare import _run

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    tool = [sys.executable, "-c", "f = open('/dev/full', 'w'); f.write('x' * 10); f.close()"]
    with pytest.raises(OutputError) as err:
        _run(tool, str(tmp_path), "tool.log", "x.pdb: building the MARTINI protein")
    assert err.value.status == 5 and "No space left on device" in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    # a failure that is not an OS error stays the input's
    with pytest.raises(InputError) as err:
        _run([sys.executable, "-c", "raise SystemExit('unknown residue')"], str(tmp_path), "tool.log", "x.pdb")
    assert not isinstance(err.value, OutputError)


# ---------------------------------------------------------------------------------------- prepare (go=True)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    m3 = _m3()
    for tool in ("martinize2", "insane"):
        here = os.path.join(os.path.dirname(sys.executable), tool)
        if not (os.access(here, os.X_OK) or shutil.which(tool)):
            pytest.skip(f"{tool} is not installed (pip install vermouth insane)")
    folder = tmp_path_factory.mktemp("go") / "system"
    prep = prepare_system(str(STRUCTURES / "1L2Y_trpcage.pdb"), str(m3), str(folder), name="trpcage", go=True)
    return prep, m3


def test_prepare_with_go_writes_a_topology_our_reader_takes(prepared):
    prep, m3 = prepared
    folder = prep.folder
    assert prep.go and prep.protein_molecules == [("trpcage", 1)]
    for f in GO_FILES + ("trpcage.itp",):
        assert os.path.isfile(os.path.join(folder, f)), f
    lines = [l.strip() for l in open(prep.top)]
    includes = [l.split('"')[1] for l in lines if l.startswith("#include")]
    assert includes == ["martini_v3.0.0.itp", *GO_FILES, "martini_v3.0.0_ions_v1.itp",
                        "martini_v3.0.0_solvents_v1.itp", "trpcage.itp"]
    assert lines.index("#define GO_VIRT") < lines.index('#include "martini_v3.0.0.itp"')
    assert not re.search(r"-elastic\b", open(os.path.join(folder, "martinize2.log")).readline())
    top = read_topology(prep.top, include_dirs=[m3])
    pos, box = read_gro(prep.gro)
    mol = top.moleculetypes["trpcage"]
    assert top.n_particles() == len(pos) and prep.n_protein_beads == len(mol.atoms)
    assert prep.n_go_sites == 20 == sum(1 for v in mol.virtual_sites if len(v.atoms) == 1)
    go_types = {a.type for a in mol.atoms if a.name == "CA"}
    assert prep.n_go_contacts == sum(1 for k in top.nonbond_params if set(k) <= go_types) > 0
    # insane neutralised the system: it did not count the Go sites' residues twice
    assert abs(sum(sum(a.charge for a in top.moleculetypes[m].atoms) * c for m, c in top.molecules)) < 1e-9
    # the gro names the Go sites CA again (insane saw them as vCA)
    assert sum(1 for l in open(prep.gro).read().splitlines()[2:2 + len(pos)] if l[10:15].strip() == "CA") == 20
    system = build_system(top, box)
    assert np.isfinite(_terms(system, pos)["Potential"])


def test_prepare_with_go_writes_a_topology_grompp_takes_with_equal_energies(prepared, tmp_path):
    prep, m3 = prepared
    if shutil.which("gmx_d") is None:
        pytest.skip("gmx_d (GROMACS, double precision) is not installed")
    mdp = tmp_path / "rerun.mdp"
    mdp.write_text((DATA / "martini" / "rerun.mdp").read_text() + f"include = -I{m3}\n")

    def gmx(*args):
        res = subprocess.run(["gmx_d", *args], cwd=prep.folder, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        return res

    tpr, edr, xvg = tmp_path / "r.tpr", tmp_path / "r.edr", tmp_path / "e.xvg"
    gmx("grompp", "-f", str(mdp), "-c", prep.gro, "-p", prep.top, "-o", str(tpr), "-po", str(tmp_path / "mdout.mdp"),
        "-maxwarn", "5")
    gmx("mdrun", "-s", str(tpr), "-rerun", prep.gro, "-e", str(edr), "-g", str(tmp_path / "r.log"), "-nt", "1")
    names = ["Bond", "G96Angle", "Restr. Angles", "Proper Dih.", "Improper Dih.", "LJ (SR)", "Coulomb (SR)",
             "Potential"]
    res = subprocess.run(["gmx_d", "energy", "-f", str(edr), "-o", str(xvg), "-dp"], input="\n".join(
        n.replace(" ", "-") for n in names) + "\n", capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    legends = [l.split('"')[1] for l in xvg.read_text().splitlines() if l.startswith("@ s") and "legend" in l]
    values = [float(x) for x in [l for l in xvg.read_text().splitlines() if l and l[0] not in "#@"][-1].split()[1:]]
    top = read_topology(prep.top, include_dirs=[m3])
    pos, box = read_gro(prep.gro)
    ours = _terms(build_system(top, box), pos)
    assert set(legends) >= {"LJ (SR)", "Coulomb (SR)", "Potential"}
    for term, ref in zip(legends, values):
        assert _close(ours[term], ref), (term, ours[term], ref)


def test_prepare_refuses_go_with_an_elastic_network(tmp_path):
    pdb = str(STRUCTURES / "1L2Y_trpcage.pdb")
    with pytest.raises(InputError, match="replaces the elastic network"):
        prepare_system(pdb, str(tmp_path), str(tmp_path / "x"), go=True, elastic=True)
    with pytest.raises(InputError, match="needs go=True"):
        prepare_system(pdb, str(tmp_path), str(tmp_path / "x"), go_eps=5.0)


def test_a_force_field_patched_for_go_keeps_go_virt_undefined(tmp_path):
    """A martini_v3.0.0.itp that includes the Go files itself under #ifdef GO_VIRT would include them a second
    time: then system.top leaves GO_VIRT undefined and only its own includes count."""
    plain, patched = tmp_path / "plain", tmp_path / "patched"
    for d, extra in ((plain, ""), (patched, '#ifdef GO_VIRT\n#include "go_atomtypes.itp"\n#endif\n')):
        d.mkdir()
        (d / "martini_v3.0.0.itp").write_text("[ defaults ]\n1 2\n" + extra)
        write_system_top(str(d / "system.top"), str(d), ["p.itp"], [("p", 1)], "t", go=True)
    assert "#define GO_VIRT" in (plain / "system.top").read_text().splitlines()
    assert "#define GO_VIRT" not in (patched / "system.top").read_text()
    assert '#include "go_nbparams.itp"' in (patched / "system.top").read_text().splitlines()

