"""flashschnet.openmm.martini.system: the MARTINI 3 OpenMM System against GROMACS -- single-point energies, term by
term, of villin, BPTI, ubiquitin and MartiniGo villin solvated by insane (water, 0.15 M NaCl), and of three charged
beads whose excluded pairs straddle the cut-off, equal ``gmx_d mdrun -rerun`` on the same coordinates to double
precision (fixtures and the script that makes them: tests/data/martini/make_gromacs_reference.sh); forces, virtual
sites and constraints, read_gro's errors, a short stable run.

MartiniGo (``martinize2 -go``, vermouth 0.15; tests/data/martini/systems/villin_go), on one build of its System: the
reader takes the Go virtual sites, atom types and contacts completely; the Go sites are massless virtual sites on
their beads; the energies equal GROMACS term by term, the Go contacts alone included (GROMACS run once more without
go_nbparams.itp); forces are minus the energy gradient; a charged site on its bead without an exclusion is refused."""
from __future__ import annotations

import json

import numpy as np
import openmm
import openmm.unit as u
import pytest

from tests.conftest import DATA, SHARED, platforms
from flashschnet.openmm.martini.system import build_system, read_gro
from flashschnet.openmm.martini.topology import TopologyError, read_topology
from tests.helpers.martini_energies import gromacs_terms as _terms

M3 = SHARED / "martini" / "m3"
SYSTEMS = DATA / "martini" / "systems"
PROTEINS = ["villin", "bpti", "ubiquitin", "villin_go"]
#: every fixture with GROMACS energies: the proteins and excluded pairs beyond the cut-off (no reaction-field
#: exclusion correction there, as in GROMACS's kernels)
SYSTEMS_WITH_ENERGIES = PROTEINS + ["excluded_beyond_cutoff"]


def close_to_gromacs(ours: float, ref: float) -> bool:
    """Double-precision agreement: 1e-10 relative, or 1e-9 kJ/mol for terms near 0 (the reference is printed
    with 12 decimals). GROMACS <= 2019's 138.935458 for 1/(4 pi eps0) is 2.6e-9 off: it fails this."""
    return abs(ours - ref) <= max(1e-10 * abs(ref), 1e-9)


def _system(protein):
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    top = read_topology(SYSTEMS / protein / "system.top", include_dirs=[M3])
    pos, box = read_gro(SYSTEMS / protein / "system.gro")
    return top, pos, box, build_system(top, box)


@pytest.mark.parametrize("protein", SYSTEMS_WITH_ENERGIES)
def test_energies_equal_gromacs_term_by_term(protein):
    top, pos, box, system = _system(protein)
    assert system.getNumParticles() == len(pos) == top.n_particles()
    gmx = json.loads((SYSTEMS / protein / "gromacs_energies.json").read_text())["energies"]
    ours = _terms(system, pos)      # virtual sites where system.gro puts them: mdrun -rerun does not rebuild them
    assert {"LJ (SR)", "Coulomb (SR)", "Potential"} <= set(gmx)
    for term, ref in gmx.items():
        assert close_to_gromacs(ours[term], ref), (term, ours[term], ref, (ours[term] - ref) / ref if ref else None)
    assert ours.get("Angle", 0.0) == 0.0          # martinize2 emits no harmonic (type 1) angles


@pytest.mark.parametrize("platform", [p for p in platforms() if p in ("CPU", "Reference")])
def test_every_platform_agrees(platform):
    top, pos, box, system = _system("villin")
    gmx = json.loads((SYSTEMS / "villin" / "gromacs_energies.json").read_text())["energies"]
    assert abs(_terms(system, pos, platform)["Potential"] - gmx["Potential"]) <= 1e-5 * abs(gmx["Potential"])


def test_forces_are_minus_the_energy_gradient():
    top, pos, box, system = _system("villin")
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos)
    f = ctx.getState(getForces=True).getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)
    vsite = [i for i in range(system.getNumParticles()) if system.isVirtualSite(i)]
    h = 1e-5
    for i in [0, 5, 40, 87, 300, 935]:      # protein beads (not virtual sites), water, an ion
        assert i not in vsite
        for a in range(3):
            p1, p2 = pos.copy(), pos.copy()
            p1[i, a] += h
            p2[i, a] -= h
            ctx.setPositions(p1)
            e1 = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            ctx.setPositions(p2)
            e2 = ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            assert abs(-(e1 - e2) / (2 * h) - f[i, a]) < 1e-4 * max(1.0, abs(f[i, a])), (i, a)


def test_virtual_sites_masses_and_constraints():
    top, pos, box, system = _system("villin")
    mol = top.moleculetypes["villin_0"]
    for v in mol.virtual_sites:
        assert system.isVirtualSite(v.site) and system.getParticleMass(v.site).value_in_unit(u.dalton) == 0.0
    assert system.getNumConstraints() == len(mol.of("constraints"))
    # the COM site sits at the mass-weighted mean of its constructing beads after applying constraints
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos)
    ctx.computeVirtualSites()
    x = ctx.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
    v = mol.virtual_sites[0]
    w = np.array([mol.atoms[a].mass for a in v.atoms])
    assert np.allclose(x[v.site], (w[:, None] * x[list(v.atoms)]).sum(0) / w.sum(), atol=1e-12)


def test_bad_coordinate_files(tmp_path):
    bad = tmp_path / "x.gro"
    bad.write_text("title\nnot a number\n")
    with pytest.raises(TopologyError, match="not a readable .gro"):
        read_gro(bad)
    tri = tmp_path / "t.gro"
    tri.write_text("t\n1\n    1W        W    1   0.084   3.595   3.359\n 4.0 4.0 4.0 0.0 0.0 1.0 0.0 0.0 0.0\n")
    with pytest.raises(TopologyError, match="triclinic"):
        read_gro(tri)


def test_a_short_martini_run_is_stable():
    """Minimise, then 1,000 Langevin steps at MARTINI's 20 fs (300 K, 1/ps) on the CPU platform: finite,
    temperature near 300 K, every protein bond within 20 % of its length."""
    top, pos, box, system = _system("villin")
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 20 * u.femtosecond)
    integ.setRandomNumberSeed(5)
    ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName("CPU"), {"Threads": "1"})
    ctx.setPositions(pos)
    openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, 500)
    ctx.setVelocitiesToTemperature(300 * u.kelvin, 5)
    n_vs = sum(system.isVirtualSite(i) for i in range(system.getNumParticles()))
    dof = 3 * (system.getNumParticles() - n_vs) - system.getNumConstraints()
    temps = []
    for _ in range(10):
        integ.step(100)
        st = ctx.getState(getEnergy=True, getPositions=True)
        assert np.isfinite(st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole))
        temps.append(2 * st.getKineticEnergy().value_in_unit(u.kilojoule_per_mole) / (dof * 0.0083144626))
    assert 270.0 < np.mean(temps[2:]) < 330.0
    x = st.getPositions(asNumpy=True).value_in_unit(u.nanometer)
    for b in top.moleculetypes["villin_0"].of("bonds"):
        i, j = b.atoms
        assert abs(np.linalg.norm(x[i] - x[j]) / b.params[0] - 1.0) < 0.2 or b.params[1] < 1000.0


# ---------------------------------------------------------------------------------------------------- MartiniGo

GO = DATA / "martini" / "systems" / "villin_go"
MOL = "villin_go"


def _m3():
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    return M3


def _close(ours: float, ref: float) -> bool:
    """Double precision, as close_to_gromacs: 1e-10 relative or 1e-9 kJ/mol near 0."""
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
