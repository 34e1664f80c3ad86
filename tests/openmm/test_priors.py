"""flashschnet.openmm.priors: the mlcg prior terms as native OpenMM forces (``add_prior_forces``) against mlcg's
prior oracle, all terms and each alone, packed replicas; the unit factors they need. The terms themselves
(PyTorch reference, serialization, fit): tests/model/priors/ (test_terms.py, test_energy.py, test_placeholder.py, ...)."""
import numpy as np
import pytest

from tests.conftest import needs_prior_oracle, rel_error
from flashschnet.priors import PriorSet, PriorTerm

KCAL = 4.184  # kJ per kcal
ANGSTROM = 0.1  # nm per Angstrom


def _platforms():
    import openmm as mm
    names = [mm.Platform.getPlatform(i).getName() for i in range(mm.Platform.getNumPlatforms())]
    return [p for p in ("Reference", "CPU") if p in names]


def _openmm_eval(prior, pos_A, platform, replicas=1):
    import openmm as mm
    from flashschnet.openmm.priors import add_prior_forces

    n = prior.n_beads
    system = mm.System()
    for _ in range(replicas * n):
        system.addParticle(12.0)
    forces = add_prior_forces(system, prior, replicas=replicas, n_beads=n, length_to_nm=ANGSTROM,
                              energy_to_kj=KCAL, force_group=1)
    plat = mm.Platform.getPlatformByName(platform)
    props = {"Precision": "double"} if platform in ("CUDA", "OpenCL") else {}
    ctx = mm.Context(system, mm.VerletIntegrator(0.001), plat, props)
    ctx.setPositions(np.asarray(pos_A, dtype=np.float64).reshape(-1, 3) * ANGSTROM)
    st = ctx.getState(getEnergy=True, getForces=True, groups={1})
    e = st.getPotentialEnergy().value_in_unit(mm.unit.kilojoule_per_mole) / KCAL
    f = np.asarray(st.getForces(asNumpy=True).value_in_unit(mm.unit.kilojoule_per_mole / mm.unit.nanometer))
    # the forces belong to ``system``: return it too so they stay valid
    return e, f / (KCAL / ANGSTROM), (system, forces)


@needs_prior_oracle
@pytest.mark.parametrize("platform", ["Reference", "CPU"])
def test_openmm_matches_mlcg(prior_oracle, oracle_priors, platform):
    if platform not in _platforms():
        pytest.skip(f"OpenMM platform {platform} not available")
    tol = 1e-6 if platform == "Reference" else 1e-4
    for fr in range(prior_oracle["positions_A"].shape[0]):
        e, f, (system, forces) = _openmm_eval(oracle_priors, prior_oracle["positions_A"][fr].numpy(), platform)
        want = float(prior_oracle["energies_kcal_mol"][fr])
        assert abs(e - want) <= tol * abs(want)
        assert rel_error(f, prior_oracle["forces_kcal_mol_A"][fr]) < tol, (platform, fr)
    assert len(forces) == 4
    assert all(not fo.usesPeriodicBoundaryConditions() and fo.getForceGroup() == 1 for fo in forces)
    assert len({fo.getName() for fo in forces}) == 4


@needs_prior_oracle
def test_openmm_per_term_matches_mlcg(prior_oracle, oracle_priors):
    """Each term alone (catches a dihedral sign flip hidden by other terms)."""
    for t in oracle_priors.terms:
        one = PriorSet(terms=[t], n_beads=49)
        e, f, _ = _openmm_eval(one, prior_oracle["positions_A"][1].numpy(), "Reference")
        ref = prior_oracle["terms"][t.name]
        assert abs(e - float(ref["energies_kcal_mol"][1])) <= 1e-6 * max(1.0, abs(float(ref["energies_kcal_mol"][1]))), t.name
        assert rel_error(f, ref["forces_kcal_mol_A"][1]) < 1e-6, t.name


@needs_prior_oracle
def test_openmm_replicas(prior_oracle, oracle_priors):
    pos = prior_oracle["positions_A"][:3].numpy()
    e, f, _ = _openmm_eval(oracle_priors, pos, "Reference", replicas=3)
    assert abs(e - float(prior_oracle["energies_kcal_mol"][:3].sum())) < 1e-6 * abs(e)
    f = f.reshape(3, 49, 3)
    for r in range(3):
        assert rel_error(f[r], prior_oracle["forces_kcal_mol_A"][r]) < 1e-6


def test_openmm_requires_units():
    import openmm as mm
    from flashschnet.openmm.priors import add_prior_forces

    ps = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 1]], {"x0": [1.0], "k": [1.0]})], n_beads=2)
    system = mm.System()
    system.addParticle(1.0)
    system.addParticle(1.0)
    with pytest.raises(ValueError):
        add_prior_forces(system, ps)
