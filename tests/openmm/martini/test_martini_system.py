"""The MARTINI 3 OpenMM System against GROMACS: single-point energies, term by term, of villin, BPTI,
ubiquitin and MartiniGo villin solvated by insane (water, 0.15 M NaCl), and of three charged beads whose excluded
pairs straddle the cut-off, equal ``gmx_d mdrun -rerun`` on the same coordinates to double precision (fixtures
and the script that makes them: tests/data/martini/make_gromacs_reference.sh)."""
from __future__ import annotations

import json

import numpy as np
import openmm
import openmm.unit as u
import pytest

from conftest import DATA, SHARED, platforms
from flashschnet.openmm.martini.system import build_system, read_gro
from flashschnet.openmm.martini.topology import TopologyError, read_topology
from helpers.martini_energies import gromacs_terms as _terms

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
