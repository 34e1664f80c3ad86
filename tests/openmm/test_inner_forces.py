"""flashschnet.openmm.inner_forces: a distilled inner model's bond, angle and dihedral terms as native OpenMM forces,
for packed replicas, with either sign (the inner group's +, the outer group's correction -), against the model's own
PyTorch energies and autograd forces; an inner model of another bead count refused."""
from __future__ import annotations

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from flashschnet.distill import InnerModel
from flashschnet.openmm.inner_forces import add_inner_forces

N, R = 5, 2                                          # beads, packed replicas


def _inner(seed=0):
    """A chain of 5 beads: 4 bonds (quadratic about 3.8 A), 3 angles (cubic), 2 dihedrals (2 harmonics); random
    coefficients, kcal/mol and Angstrom."""
    rng = np.random.default_rng(seed)
    return InnerModel(bonds=[[0, 1], [1, 2], [2, 3], [3, 4]], bond_x0=np.full(4, 3.8), bond_c=rng.normal(size=(4, 2)),
                      angles=[[0, 1, 2], [1, 2, 3], [2, 3, 4]], angle_x0=np.full(3, -0.3),
                      angle_c=rng.normal(size=(3, 3)), dihedrals=[[0, 1, 2, 3], [1, 2, 3, 4]],
                      dihedral_cos=rng.normal(size=(2, 2)), dihedral_sin=rng.normal(size=(2, 2)), n_beads=N)


def _energy_forces(system, pos_nm, group):
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    ctx.setPositions(pos_nm)
    state = ctx.getState(getEnergy=True, getForces=True, groups={group})
    return (state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole),
            state.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_forces_are_the_inner_models_energy_for_each_replica(sign):
    inner = _inner()
    rng = np.random.default_rng(1)
    chain = np.stack([0.38 * np.arange(N), 0.12 * (-1.0) ** np.arange(N), 0.05 * np.arange(N) ** 2], axis=1)
    pos_nm = np.concatenate([chain + rng.normal(scale=0.02, size=chain.shape) for _ in range(R)])
    system = openmm.System()
    for _ in range(R * N):
        system.addParticle(12.0)
    forces = add_inner_forces(system, inner, R, N, group=3, sign=sign)
    assert [type(f).__name__ for f in forces] == ["CustomBondForce", "CustomAngleForce", "CustomTorsionForce"]
    assert (forces[0].getNumBonds(), forces[1].getNumAngles(), forces[2].getNumTorsions()) == (R * 4, R * 3, R * 2)
    assert {f.getForceGroup() for f in forces} == {3}
    assert {f.getName() for f in forces} == {"CGSchNet inner model" if sign > 0 else
                                             "CGSchNet inner model (outer correction)"}
    e, f = _energy_forces(system, pos_nm, 3)
    e_ref, f_ref = inner.energy_forces(torch.as_tensor(pos_nm.reshape(R, N, 3) * 10.0))      # Angstrom, kcal/mol
    want_e = sign * 4.184 * float(e_ref.sum())
    want_f = sign * 41.84 * f_ref.reshape(-1, 3).numpy()
    assert abs(want_e) > 1.0 and abs(float(e_ref[0] - e_ref[1])) > 1e-3          # the replicas differ
    assert e == pytest.approx(want_e, rel=1e-10)
    assert np.abs(f - want_f).max() <= 1e-9 * np.abs(want_f).max()


def test_an_inner_model_of_another_molecule_is_refused():
    with pytest.raises(ValueError, match="the inner model has 5 beads, the molecule 4"):
        add_inner_forces(openmm.System(), _inner(), 1, 4, group=1)
