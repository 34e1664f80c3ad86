"""flashschnet.openmm.dynamics: force groups and integrators of single and multiple time stepping.

The multiple-time-step integrator with an outer force that vanishes (the inner model is the full network) repeats
single stepping at the inner step; a distilled classical inner model enters the potential energy once with each
sign (the Context's energy is still priors + network)."""
from __future__ import annotations

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet import load_model, map_pdb
from flashschnet.distill import template_for
from flashschnet.distill.fit import with_coefficients
from flashschnet.errors import InputError
from flashschnet.openmm.dynamics import INNER_GROUP, OUTER_GROUP, Dynamics
from flashschnet.openmm.system import build_system, replica_positions_nm
from flashschnet.tiny import tiny_model

PDB = EXAMPLES / "1L2Y_trpcage.pdb"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tiny_model(PDB, str(tmp_path_factory.mktemp("tiny") / "tiny.pt"))
    return path, map_pdb(str(PDB))


def _context(system, integrator):
    return openmm.Context(system, integrator, openmm.Platform.getPlatformByName("Reference"))


def _start(ctx, mol, R, seed=5):
    rng = np.random.default_rng(seed)
    ctx.setPositions(replica_positions_nm(mol, R) + rng.normal(scale=0.005, size=(R * mol.n_beads, 3)))
    ctx.setVelocities(rng.normal(scale=0.3, size=(R * mol.n_beads, 3)))


def test_a_vanishing_outer_force_repeats_single_stepping(tiny):
    """Without friction (the random streams of two integrator programs differ: OpenMM's reference custom
    integrator draws per-DOF numbers per computation of the program) the trajectories agree to the last bit."""
    path, mol = tiny
    R, h, k, outer_steps = 2, 2.0, 2, 10
    temps = np.repeat([300.0, 340.0], mol.n_beads)
    single = Dynamics(h, 0.0)
    mts = Dynamics(k * h, 0.0, k, inner=load_model(path))             # inner = full: full - inner is exactly 0
    # one Context at a time: the Reference platform's custom integrators share one random generator per process,
    # which creating a Context reseeds
    a = build_system(mol, load_model(path), replicas=R, dynamics=single, compress="none")
    ctx_a = _context(a, single.integrator(temps, seed=9))
    _start(ctx_a, mol, R)
    ctx_a.getIntegrator().step(k * outer_steps)
    pa = ctx_a.getState(getPositions=True).getPositions(asNumpy=True)._value
    b = build_system(mol, load_model(path), replicas=R, dynamics=mts, compress="none")
    ctx_b = _context(b, mts.integrator(temps, seed=9))
    _start(ctx_b, mol, R)
    out = ctx_b.getState(getForces=True, groups={OUTER_GROUP}).getForces(asNumpy=True)._value
    assert np.abs(out).max() == 0.0
    ctx_b.getIntegrator().step(outer_steps)
    pb = ctx_b.getState(getPositions=True).getPositions(asNumpy=True)._value
    moved = np.abs(pa - replica_positions_nm(mol, R)).max()
    assert moved > 1e-3                                               # it did move ...
    assert np.abs(pa - pb).max() < 1e-12                              # ... the same way, to rounding


def test_a_distilled_inner_model_cancels_in_the_potential_energy(tiny):
    path, mol = tiny
    model = load_model(path)
    priors = model.priors_for(mol)
    rng = np.random.default_rng(2)
    frames = mol.positions[None] + rng.normal(scale=0.1, size=(3,) + mol.positions.shape)
    template = template_for(priors, frames, mol.n_beads)
    inner = with_coefficients(template, rng.normal(scale=0.5, size=template.n_parameters))
    R = 2
    plain = build_system(mol, model, replicas=R)
    mts = build_system(mol, model, replicas=R, dynamics=Dynamics(8.0, 1.0, 2, inner=inner))
    pos = replica_positions_nm(mol, R) + rng.normal(scale=0.01, size=(R * mol.n_beads, 3))
    groups = {"all": {0, 1}, "outer": {OUTER_GROUP}, "inner": {INNER_GROUP}}
    energies = {}
    for name, system in (("plain", plain), ("mts", mts)):
        ctx = _context(system, openmm.VerletIntegrator(0.001))
        ctx.setPositions(pos)
        energies[name] = {g: ctx.getState(getEnergy=True, groups=groups[g]).getPotentialEnergy().value_in_unit(
            u.kilojoule_per_mole) for g in groups}
    assert energies["mts"]["all"] == pytest.approx(energies["plain"]["all"], rel=1e-10)
    # the inner model's energy moved from the outer group to the inner one
    e_inner = float(inner.energy(torch.as_tensor(pos.reshape(R, -1, 3) * 10.0)).sum()) * 4.184
    assert abs(e_inner) > 1.0
    assert energies["mts"]["outer"] == pytest.approx(energies["plain"]["outer"] - e_inner, rel=1e-9)
    assert energies["mts"]["inner"] == pytest.approx(energies["plain"]["inner"] + e_inner, rel=1e-9)


def test_dynamics_checks():
    with pytest.raises(InputError, match="need an inner model"):
        Dynamics(8.0, 1.0, 2)
    with pytest.raises(InputError, match=">= 1"):
        Dynamics(8.0, 1.0, 0, inner=object())
    d = Dynamics(12.0, 1.0, 3, inner=object())
    assert d.mts and d.inner_step_fs == 4.0 and d.step_ps == 0.012
    plain = Dynamics(4.0, 1.0)
    assert isinstance(plain.integrator(300.0, 1), openmm.LangevinMiddleIntegrator)
    assert isinstance(plain.integrator([300.0] * 3, 1), openmm.CustomIntegrator)
    with pytest.raises(ValueError, match="particles"):
        d.integrator(300.0, 1)
