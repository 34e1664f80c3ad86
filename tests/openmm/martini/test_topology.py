"""flashschnet.openmm.martini.topology: the GROMACS topology reader on martinize2's MARTINI 3 output for two proteins
(villin, trp-cage), with the MARTINI 3 force-field files from ../shared/martini/m3, the preprocessor, and its
one-line errors on broken input, broken MartiniGo files (tests/data/martini/systems/villin_go) included. The reader
on the whole MartiniGo system: test_system.py."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA, SHARED
from flashschnet.openmm.martini.topology import TopologyError, read_topology

M3 = SHARED / "martini" / "m3"
FIXTURES = DATA / "martini"
PROTEINS = {"villin": "molecule_0", "trpcage": "trpcage_0"}
GO = DATA / "martini" / "systems" / "villin_go"
MOL = "villin_go"


@pytest.fixture(scope="module")
def ffdir(tmp_path_factory):
    """The force-field folder as martinize2's topol.top expects it (``martini.itp`` = MARTINI 3.0.0)."""
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    d = tmp_path_factory.mktemp("ff")
    for f in M3.glob("*.itp"):
        os.symlink(f, d / f.name)
    os.symlink(M3 / "martini_v3.0.0.itp", d / "martini.itp")
    return d


def _itp_counts(path: Path):
    """Independent count of the data lines of each section of a martinize2 .itp (no preprocessor branches
    taken except the default: #ifdef FLEXIBLE blocks skipped, #ifndef FLEXIBLE blocks kept)."""
    counts, section, skip = {}, None, []
    for line in path.read_text().splitlines():
        line = line.split(";")[0].strip()
        if line.startswith("#ifdef"):
            skip.append(True)
        elif line.startswith("#ifndef"):
            skip.append(False)
        elif line.startswith("#endif"):
            skip.pop()
        elif line.startswith("["):
            section = line.strip("[] ")
        elif line and not any(skip):
            counts[section] = counts.get(section, 0) + 1
    return counts


@pytest.mark.parametrize("protein", list(PROTEINS))
def test_martinize2_topologies_are_read_completely(ffdir, protein):
    top = read_topology(FIXTURES / protein / "topol.top", include_dirs=[ffdir])
    name = PROTEINS[protein]
    assert top.molecules == [(name, 1)] and top.nbfunc == 1 and top.comb_rule == 2
    assert len(top.atomtypes) > 800 and len(top.nonbond_params) > 300_000
    mol = top.moleculetypes[name]
    counts = _itp_counts(FIXTURES / protein / f"{name}.itp")
    assert len(mol.atoms) == counts["atoms"] == top.n_particles()
    for section in ("bonds", "constraints", "angles", "dihedrals"):
        assert len(mol.of(section)) == counts[section], section
    assert len(mol.exclusions) == counts["exclusions"] and len(mol.virtual_sites) == counts["virtual_sitesn"]
    # masses from the bead sizes (regular 72, small 54, tiny 36), backbone first, charges integral
    assert {a.mass for a in mol.atoms} <= {72.0, 54.0, 36.0, 0.0}
    assert mol.atoms[0].name == "BB" and mol.atoms[0].resnr == 1
    total = sum(a.charge for a in mol.atoms)
    assert abs(total - round(total)) < 1e-9
    # function types martinize2 emits, 0-based indices
    assert {i.func for i in mol.of("angles")} <= {1, 2, 10}
    assert {i.func for i in mol.of("dihedrals")} <= {1, 2, 9, 11}
    first = mol.of("bonds")[0]
    assert min(first.atoms) >= 0 and first.func == 1 and len(first.params) == 2
    vs = mol.virtual_sites[0]
    assert vs.kind == "n" and vs.func == 2 and len(vs.atoms) == 4 and vs.site not in vs.atoms


def test_flexible_define_turns_side_chain_constraints_into_bonds(ffdir):
    rigid = read_topology(FIXTURES / "villin" / "topol.top", include_dirs=[ffdir]).moleculetypes["molecule_0"]
    flex = read_topology(FIXTURES / "villin" / "topol.top", include_dirs=[ffdir],
                         defines={"FLEXIBLE": ""}).moleculetypes["molecule_0"]
    moved = len(rigid.of("constraints")) - len(flex.of("constraints"))
    assert moved > 0 and len(flex.of("bonds")) - len(rigid.of("bonds")) == moved


def test_solvated_system_with_ions_and_water(ffdir, tmp_path):
    top_path = tmp_path / "system.top"
    top_path.write_text(f'#include "martini_v3.0.0.itp"\n#include "martini_v3.0.0_ions_v1.itp"\n'
                        f'#include "martini_v3.0.0_solvents_v1.itp"\n#include "{FIXTURES}/villin/molecule_0.itp"\n'
                        "[ system ]\nvillin in water\n[ molecules ]\nmolecule_0 1\nW 830\nNA 8\nCL 10\n")
    top = read_topology(top_path, include_dirs=[ffdir])
    assert top.system_name == "villin in water"
    assert top.n_particles() == 88 + 830 + 8 + 10
    assert top.moleculetypes["W"].atoms[0].type == "W" and top.moleculetypes["NA"].atoms[0].charge == 1.0
    # explicit pair table (MARTINI 3 water: sigma 0.47 nm, epsilon 4.65 kJ/mol), either order
    assert top.pair_parameters("W", "W") == (0.47, 4.65)
    assert top.pair_parameters("W", "Q5") == top.pair_parameters("Q5", "W")
    assert top.pair_parameters("Q5", "TQ5") == top.pair_parameters("TQ5", "Q5")


def test_preprocessor_macros_continuations_and_else(tmp_path):
    (tmp_path / "inc.itp").write_text("[ atomtypes ]\nA 72.0 0.000 A 0.47 3.5\nB 36.0 0.0 A 0.34 2.0 ; tiny\n")
    (tmp_path / "t.top").write_text(
        "[ defaults ]\n1 2\n#include \"inc.itp\"\n#define KB 1250.0\n#define LONG\n"
        "[ moleculetype ]\nM 1\n[ atoms ]\n1 A 1 ALA BB 1 0.5\n2 B 1 ALA SC1 2 -0.5 \\\n 40.0\n"
        "[ bonds ]\n#ifdef LONG\n1 2 1 0.5 KB\n#else\n1 2 1 0.3 KB\n#endif\n"
        "#ifndef LONG\n[ exclusions ]\n1 2\n#endif\n"
        "[ system ]\nt\n[ molecules ]\nM 3\n")
    top = read_topology(tmp_path / "t.top")
    mol = top.moleculetypes["M"]
    assert mol.atoms[1].mass == 40.0 and mol.atoms[0].mass == 72.0 and mol.atoms[1].charge == -0.5
    assert mol.of("bonds")[0].params == (0.5, 1250.0) and mol.exclusions == []
    assert top.n_particles() == 6
    assert top.pair_parameters("A", "B") == pytest.approx((0.405, (3.5 * 2.0) ** 0.5))
    assert [os.path.basename(f) for f in top.files] == ["t.top", "inc.itp"]


BROKEN = {
    "missing include": ('#include "nothere.itp"\n', "nothere.itp\" not found", 1),
    "unknown section": ("[ cmap ]\n1 2 3 4 5 1\n", "[ cmap ] is not supported", 1),
    "index out of range": ("[ defaults ]\n1 2\n[ atomtypes ]\nA 72 0 A 0.47 3.5\n[ moleculetype ]\nM 1\n"
                           "[ atoms ]\n1 A 1 ALA BB 1 0\n[ bonds ]\n1 5 1 0.3 1000\n", "atom index 5", 10),
    "unknown atom type": ("[ moleculetype ]\nM 1\n[ atoms ]\n1 Q9 1 ALA BB 1 0\n", "type 'Q9'", 4),
    "open ifdef": ("#ifdef X\n[ system ]\nx\n", "not closed by #endif", None),
    "bad number": ("[ defaults ]\n1 two\n", "comb-rule 'two' is not an integer", 2),
    "atoms out of order": ("[ atomtypes ]\nA 72 0 A 0.47 3.5\n[ moleculetype ]\nM 1\n[ atoms ]\n2 A 1 ALA BB 1 0\n",
                           "atom number 2", 6),
    "undefined molecule": ("[ molecules ]\nPROT 1\n", "'PROT' is not defined", 2),
    "interaction before moleculetype": ("[ bonds ]\n1 2 1 0.3 1\n", "before any [ moleculetype ]", 1),
    "pair of an undefined type": ("[ atomtypes ]\nA 72 0 A 0.47 3.5\n[ nonbond_params ]\nA X 1 0.5 3.0\n",
                                  "names atom type 'X'", 4),
    "non-LJ pair": ("[ atomtypes ]\nA 72 0 A 0.47 3.5\n[ nonbond_params ]\nA A 2 0.5 3.0 1.0\n",
                    "function type 2 is not supported", 4),
    "short pair line": ("[ atomtypes ]\nA 72 0 A 0.47 3.5\n[ nonbond_params ]\nA A 1 0.5\n",
                        "needs 'type type func sigma epsilon'", 4),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_topologies_give_one_line_errors(tmp_path, case):
    text, message, line = BROKEN[case]
    path = tmp_path / "bad.top"
    path.write_text(text)
    with pytest.raises(TopologyError) as info:
        read_topology(path)
    msg = str(info.value)
    assert message in msg and "\n" not in msg, msg
    if line is not None:
        assert f"bad.top:{line}:" in msg, msg


# -------------------------------------------------------------------------------------------- MartiniGo errors


def _m3():
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    return M3


def _first_data_line(text, section):
    on = False
    for n, line in enumerate(text, 1):
        if line.strip().startswith("["):
            on = line.strip("[] ") == section
        elif on and line.split(";")[0].strip():
            return n
    raise AssertionError(section)


def _broken_copy(tmp_path, file, section, edit):
    """The villin_go fixture in ``tmp_path`` with one line of ``file`` edited: the first data line of
    ``section``, or (no section) the include of go_atomtypes.itp. Returns that line's number."""
    for f in GO.iterdir():
        shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / file).read_text().splitlines()
    lineno = _first_data_line(text, section) if section else text.index('#include "go_atomtypes.itp"') + 1
    text[lineno - 1] = edit(text[lineno - 1])
    (tmp_path / file).write_text("\n".join(text) + "\n")
    return lineno


BROKEN_GO = {   # file, section, edit of its first data line, message
    "contact without epsilon": ("go_nbparams.itp", "nonbond_params", lambda l: " ".join(l.split()[:4]),
                                "needs 'type type func sigma epsilon'"),
    "contact of a misspelt type": ("go_nbparams.itp", "nonbond_params", lambda l: l.replace(MOL, "vilin_go", 1),
                                   "names atom type 'vilin_go_"),
    "contact with a non-LJ function": ("go_nbparams.itp", "nonbond_params", lambda l: re.sub(" 1 ", " 2 ", l, count=1),
                                       "function type 2 is not supported"),
    "Go type with a bad particle type": ("go_atomtypes.itp", "atomtypes", lambda l: l.replace(" A ", " Q "),
                                         "particle type 'Q'"),
    "contacts included before their types": ("system.top", None, lambda l: '#include "go_nbparams.itp"',
                                             "go_atomtypes.itp must be included"),
}


@pytest.mark.parametrize("case", list(BROKEN_GO))
def test_broken_go_files_give_one_line_errors(tmp_path, case):
    file, section, edit, message = BROKEN_GO[case]
    lineno = _broken_copy(tmp_path, file, section, edit)
    with pytest.raises(TopologyError) as info:
        read_topology(tmp_path / "system.top", include_dirs=[_m3()])
    msg = str(info.value)
    assert message in msg and "\n" not in msg, msg
    where = file if section else "go_nbparams.itp"      # the contacts' first line names an undefined type
    assert re.search(rf"{re.escape(str(tmp_path))}/{re.escape(where)}:\d+: ", msg), msg
    if section:
        assert f"{file}:{lineno}:" in msg, msg

