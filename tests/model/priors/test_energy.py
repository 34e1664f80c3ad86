"""flashschnet.priors.energy: the plain-PyTorch reference energies and forces of the prior terms, equal to mlcg's
(the prior oracle, per term and in total, float64 and float32) and minus the gradient of the energy. The terms as
native OpenMM forces: tests/openmm/test_priors.py."""

import torch

from flashschnet.priors import PriorSet, PriorTerm, per_term_energy, prior_energy, prior_energy_forces

from tests.conftest import needs_prior_oracle, rel_error


@needs_prior_oracle
def test_torch_reference_matches_mlcg(prior_oracle, oracle_priors):
    pos = prior_oracle["positions_A"]
    pt = per_term_energy(oracle_priors, pos)
    for name, e in pt.items():
        ref = prior_oracle["terms"][name]
        assert rel_error(e, ref["energies_kcal_mol"]) < 1e-6, name
        t = PriorSet(terms=[oracle_priors.term(name)], n_beads=49)
        _, f = prior_energy_forces(t, pos)
        assert rel_error(f, ref["forces_kcal_mol_A"]) < 1e-6, name
    e, f = prior_energy_forces(oracle_priors, pos)
    assert e.shape == (7,) and f.shape == (7, 49, 3)
    assert rel_error(e, prior_oracle["energies_kcal_mol"]) < 1e-10
    assert rel_error(f, prior_oracle["forces_kcal_mol_A"]) < 1e-10
    assert rel_error(prior_energy(oracle_priors, pos), prior_oracle["energies_kcal_mol"]) < 1e-10


@needs_prior_oracle
def test_torch_reference_float32(prior_oracle, oracle_priors):
    e, f = prior_energy_forces(oracle_priors, prior_oracle["positions_A"].float())
    assert e.dtype == torch.float32 and f.dtype == torch.float32
    assert rel_error(e, prior_oracle["energies_kcal_mol"]) < 1e-4
    assert rel_error(f, prior_oracle["forces_kcal_mol_A"]) < 1e-3


def test_forces_match_finite_differences():
    torch.manual_seed(0)
    pos = torch.randn(2, 6, 3, dtype=torch.float64) * 2.0
    pos[:, :, 0] += torch.arange(6, dtype=torch.float64) * 1.5
    terms = [
        PriorTerm("b", "harmonic_bond", [[0, 1], [2, 3]], {"x0": torch.tensor([1.5, 1.2]), "k": torch.tensor([200., 300.])}),
        PriorTerm("a", "harmonic_angle_cos", [[0, 1, 2], [3, 4, 5]], {"x0": torch.tensor([-0.3, -0.5]), "k": torch.tensor([100., 80.])}),
        PriorTerm("d", "dihedral_fourier", [[0, 1, 2, 3], [2, 3, 4, 5]],
                  {"k1s_sin": torch.tensor([[1.0, -0.5, 0.2], [0.3, 0.0, 0.0]]),
                   "k2s_cos": torch.tensor([[-2.0, 0.4, 0.1], [1.0, 0.0, 0.0]]), "v0": torch.tensor([0.5, -1.0])}),
        PriorTerm("r", "repulsion", [[0, 5], [1, 4]], {"sigma": torch.tensor([3.0, 2.5])}),
    ]
    ps = PriorSet(terms=terms, n_beads=6)
    _, f = prior_energy_forces(ps, pos)
    h = 1e-5
    fd = torch.zeros_like(pos)
    for i in range(6):
        for a in range(3):
            p = pos.clone(); p[:, i, a] += h
            m = pos.clone(); m[:, i, a] -= h
            fd[:, i, a] = -(prior_energy(ps, p) - prior_energy(ps, m)) / (2 * h)
    assert (f - fd).abs().max() < 1e-6 * max(1.0, float(f.abs().max()))
