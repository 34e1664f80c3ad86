"""MartiniGo (``martinize2 -go``, vermouth 0.15) in our MARTINI engine: the reader takes the Go virtual sites, atom
types and contacts of tests/data/martini/systems/villin_go completely; the OpenMM System's energies equal
``gmx_d mdrun -rerun`` term by term, the Go contacts alone included (GROMACS run once more without
go_nbparams.itp); forces are minus the energy gradient; ``prepare_system(go=True)`` writes a system.top that our
reader and ``gmx_d grompp`` both accept, with the same energies in both force fields; broken Go files give one-line
errors."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import subprocess

import numpy as np
import openmm
import openmm.unit as u
import pytest

from conftest import DATA, SHARED, STRUCTURES
from flashschnet.errors import InputError
from flashschnet.openmm.martini.prepare import GO_FILES, prepare_system, write_system_top
from flashschnet.openmm.martini.system import build_system, read_gro
from flashschnet.openmm.martini.topology import TopologyError, read_topology
from helpers.martini_energies import gromacs_terms as _terms

M3 = SHARED / "martini" / "m3"
GO = DATA / "martini" / "systems" / "villin_go"
MOL = "villin_go"


def _m3():
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    return M3


def _close(ours: float, ref: float) -> bool:
    """Double precision, as in test_martini_system.py: 1e-10 relative or 1e-9 kJ/mol near 0."""
    return abs(ours - ref) <= max(1e-10 * abs(ref), 1e-9)


def _data_lines(path, section):
    """Independent count: the data lines of ``[ section ]`` in one file."""
    out, on = [], False
    for line in open(path):
        line = line.split(";")[0].strip()
        if line.startswith("["):
            on = line.strip("[] ") == section
        elif on and line:
            out.append(line.split())
    return out


@pytest.fixture(scope="module")
def go_system():
    top = read_topology(GO / "system.top", include_dirs=[_m3()])
    pos, box = read_gro(GO / "system.gro")
    return top, pos, box, build_system(top, box)


def _go_types():
    return [t[0] for t in _data_lines(GO / "go_atomtypes.itp", "atomtypes")]


# ------------------------------------------------------------------------------------------------- reader


def test_the_reader_takes_every_go_site_type_contact_and_exclusion(go_system):
    top, pos, box, system = go_system
    mol = top.moleculetypes[MOL]
    go_types = _go_types()
    residues = sorted({a.resnr for a in mol.atoms})
    assert len(go_types) == len(residues) == 36
    # one massless, uncharged Go site per residue, a virtual_sitesn (COG) of that residue's backbone bead
    sites = [k for k, a in enumerate(mol.atoms) if a.type in set(go_types)]
    assert len(sites) == 36 and all(mol.atoms[k].name == "CA" for k in sites)
    by_site = {v.site: v for v in mol.virtual_sites}
    assert len(mol.virtual_sites) == len(_data_lines(GO / f"{MOL}.itp", "virtual_sitesn")) == 36 + 1   # + a COM
    for k in sites:
        v = by_site[k]
        bead = mol.atoms[v.atoms[0]]
        assert v.kind == "n" and v.func == 1 and len(v.atoms) == 1
        assert bead.name == "BB" and bead.resnr == mol.atoms[k].resnr
        assert mol.atoms[k].mass == 0.0 and mol.atoms[k].charge == 0.0
        t = top.atomtypes[mol.atoms[k].type]
        assert (t.sigma, t.epsilon, t.charge, t.mass) == (0.0, 0.0, 0.0, 0.0)
    # every Go contact of go_nbparams.itp, as written (LJ, sigma nm, epsilon kJ/mol)
    contacts = _data_lines(GO / "go_nbparams.itp", "nonbond_params")
    assert len(contacts) == 46
    go = {k: v for k, v in top.nonbond_params.items() if k[0] in go_types and k[1] in go_types}
    assert len(go) == len(contacts)
    for a, b, func, sigma, eps in contacts:
        assert go[(a, b)] == (1, float(sigma), float(eps)) and float(eps) == 9.414
        assert top.pair_parameters(b, a) == (float(sigma), float(eps))
    assert top.pair_parameters(go_types[0], "W") == (0.0, 0.0)      # no LJ with anything else (W: 0 0 as type)
    # the exclusions of the backbone pairs in contact ("; Go model exclusion") and the rest
    assert len(mol.exclusions) == len(_data_lines(GO / f"{MOL}.itp", "exclusions"))
    assert top.n_particles() == len(pos) == system.getNumParticles()


def test_go_sites_are_massless_virtual_sites_on_their_beads(go_system):
    top, pos, box, system = go_system
    mol = top.moleculetypes[MOL]
    go_sites = [v for v in mol.virtual_sites if len(v.atoms) == 1]
    for v in go_sites:
        assert system.isVirtualSite(v.site) and system.getParticleMass(v.site).value_in_unit(u.dalton) == 0.0
        # insane wrote the site where martinize2 put it: on its bead, so mdrun -rerun's positions are the built ones
        assert np.array_equal(pos[v.site], pos[v.atoms[0]])
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    moved = pos + np.random.default_rng(1).normal(0.0, 0.05, pos.shape)
    ctx.setPositions(moved)
    ctx.computeVirtualSites()
    x = ctx.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
    for v in go_sites:
        assert np.array_equal(x[v.site], moved[v.atoms[0]])                  # exactly: weights 1 and 0


# ------------------------------------------------------------------------------------------------ energies


def test_go_energies_equal_gromacs_term_by_term(go_system):
    top, pos, box, system = go_system
    gmx = json.loads((GO / "gromacs_energies.json").read_text())["energies"]
    ours = _terms(system, pos)
    for term, ref in gmx.items():
        assert _close(ours[term], ref), (term, ours[term], ref)


def test_the_go_contacts_alone_equal_gromacs(go_system):
    """GROMACS without go_nbparams.itp isolates the contacts' energy (part of LJ (SR)); ours without them
    matches that run, and the difference is the shifted LJ of the 46 contacts summed by hand."""
    top, pos, box, system = go_system
    ref = json.loads((GO / "gromacs_energies.json").read_text())
    with_go, without = ref["energies"], ref["energies_without_go_contacts"]
    go_types = set(_go_types())
    bare = read_topology(GO / "system.top", include_dirs=[_m3()])
    bare.nonbond_params = {k: v for k, v in bare.nonbond_params.items() if not set(k) <= go_types}
    ours = _terms(build_system(bare, box), pos)
    for term, value in without.items():
        assert _close(ours[term], value), (term, ours[term], value)
    mol = top.moleculetypes[MOL]
    index = {a.type: k for k, a in enumerate(mol.atoms) if a.type in go_types}
    rc, by_hand, n = 1.1, 0.0, 0
    for (a, b), (_, s, e) in top.nonbond_params.items():
        if a in go_types and b in go_types:
            d = pos[index[a]] - pos[index[b]]
            r = float(np.linalg.norm(d - box * np.round(d / box)))
            if r < rc:
                by_hand += 4 * e * ((s / r) ** 12 - (s / r) ** 6) - 4 * e * ((s / rc) ** 12 - (s / rc) ** 6)
                n += 1
    assert n == 46 and by_hand < -300.0           # the native structure: every contact near its minimum
    assert abs((with_go["LJ (SR)"] - without["LJ (SR)"]) - by_hand) <= 1e-9 * abs(by_hand)
    for term in ("Bond", "Coulomb (SR)"):
        assert with_go[term] == without[term]


def test_forces_are_minus_the_energy_gradient_with_go_sites(go_system):
    top, pos, box, system = go_system
    mol = top.moleculetypes[MOL]
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))

    def energy_and_forces(x, forces=False):
        ctx.setPositions(x)
        ctx.computeVirtualSites()          # moving a backbone bead moves its Go site
        st = ctx.getState(getEnergy=True, getForces=forces)
        e = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        return (e, st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)) if forces else e

    go_types = set(_go_types())
    contacted = {t for pair in top.nonbond_params if set(pair) <= go_types for t in pair}
    sites = {v.site: v.atoms[0] for v in mol.virtual_sites if len(v.atoms) == 1}
    beads = sorted(sites[k] for k, a in enumerate(mol.atoms) if a.type in contacted)
    assert len(beads) > 10
    _, f = energy_and_forces(pos, forces=True)
    h = 1e-5
    for i in beads[:4] + [beads[-1], 1, len(mol.atoms) + 7]:     # backbone beads in contacts, a side chain, water
        assert not system.isVirtualSite(i)
        for a in range(3):
            p1, p2 = pos.copy(), pos.copy()
            p1[i, a] += h
            p2[i, a] -= h
            fd = -(energy_and_forces(p1) - energy_and_forces(p2)) / (2 * h)
            assert abs(fd - f[i, a]) < 1e-4 * max(1.0, abs(f[i, a])), (i, a, fd, f[i, a])


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


# ---------------------------------------------------------------------------------------------------- errors


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


def test_a_charged_site_on_its_bead_without_an_exclusion_is_refused(tmp_path):
    """A one-atom virtual site sits on its atom (r = 0): fine with no charge and no LJ between them (Go sites),
    a broken topology otherwise."""
    (tmp_path / "t.top").write_text(
        "[ defaults ]\n1 2\n[ atomtypes ]\nA 72 0 A 0.47 3.5\nV 0 0 A 0 0\n[ moleculetype ]\nM 1\n"
        "[ atoms ]\n1 A 1 ALA BB 1 1.0\n2 A 2 ALA BB 2 0\n3 V 1 ALA CA 3 0.5 0\n"
        "[ bonds ]\n1 2 1 0.35 1000\n[ virtual_sitesn ]\n3 1 1\n[ system ]\nx\n[ molecules ]\nM 1\n")
    top = read_topology(tmp_path / "t.top")
    with pytest.raises(TopologyError, match=r"t\.top:15: virtual site 3 sits on atom 1") as info:
        build_system(top, [3.0, 3.0, 3.0])
    assert "\n" not in str(info.value)
    top.moleculetypes["M"].atoms[2].charge = 0.0          # a Go site: builds, no 0/0 at r = 0
    system = build_system(top, [3.0, 3.0, 3.0])
    e = _terms(system, np.array([[1.0, 1.0, 1.0], [1.35, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    assert all(np.isfinite(v) for v in e.values())
