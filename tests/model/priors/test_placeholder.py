"""flashschnet.priors.placeholder: the placeholder prior fit to one structure (fit_priors_to_structure) -- mlcg's
term tuples, the native structure as the minimum, glycine and chain ends, the CA mapping."""

import numpy as np
import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.priors import DEFAULT_SIGMA, PriorSet, fit_priors_to_structure, per_term_energy, prior_energy_forces

from tests.conftest import needs_prior_oracle
from tests.helpers.chignolin import ONE_LETTER, cln_molecule


def _tuples(t):
    return {tuple(x) for x in t.tolist()}


@needs_prior_oracle
def test_fit_topology_matches_mlcg(prior_oracle):
    mol = cln_molecule(prior_oracle)
    fit = fit_priors_to_structure(mol)
    T = prior_oracle["terms"]

    def union(names):
        return set().union(*[_tuples(T[n]["atom_indices"]) for n in names if n in T])

    assert _tuples(fit.term("bonds").indices) == union([n for n in T if T[n]["kind"] == "harmonic_bond"])
    assert _tuples(fit.term("angles").indices) == union([n for n in T if T[n]["kind"] == "harmonic_angle_cos"])
    assert _tuples(fit.term("phi").indices) == union([n for n in T if n.endswith("_phi")])
    assert _tuples(fit.term("psi").indices) == union([n for n in T if n.endswith("_psi")])
    assert _tuples(fit.term("omega").indices) == union(["pro_omega", "non_pro_omega"])
    assert _tuples(fit.term("gamma_1").indices) == union(["gamma_1"])
    assert _tuples(fit.term("gamma_2").indices) == union(["gamma_2"])
    assert _tuples(fit.term("non_bonded").indices) == union(["non_bonded"])
    assert fit.term("non_bonded").n_tuples == 924
    assert fit.fingerprint == mol.fingerprint()


@needs_prior_oracle
def test_fit_native_is_minimum(prior_oracle):
    mol = cln_molecule(prior_oracle)
    fit = fit_priors_to_structure(mol)
    pos = torch.as_tensor(mol.positions).unsqueeze(0)
    pt = per_term_energy(fit, pos)
    for name in ("bonds", "angles", "phi", "psi", "omega", "gamma_1", "gamma_2"):
        assert abs(float(pt[name][0])) < 1e-9, name
    sub = PriorSet(terms=[t for t in fit.terms if t.kind != "repulsion"], n_beads=fit.n_beads)
    _, f = prior_energy_forces(sub, pos)
    assert float(f.abs().max()) < 1e-6
    # dihedrals: native is the minimum (U >= 0 everywhere, = 0 at native)
    perturbed = pos + 0.1 * torch.randn_like(pos)
    for name in ("phi", "psi", "omega", "gamma_1", "gamma_2"):
        assert float(per_term_energy(fit, perturbed)[name][0]) > 0
    sig = fit.term("non_bonded").params["sigma"]
    assert float(sig.max()) <= DEFAULT_SIGMA + 1e-12
    d = (pos[0, fit.term("non_bonded").indices[:, 1]] - pos[0, fit.term("non_bonded").indices[:, 0]]).norm(dim=-1)
    assert bool((sig <= 0.9 * d + 1e-12).all())


@needs_prior_oracle
def test_fit_glycine_and_chain_ends(prior_oracle):
    """Gly (residue 7) has no gamma_1; no phi for the first residue, no psi/omega/gamma_2 for the last."""
    mol = cln_molecule(prior_oracle)
    fit = fit_priors_to_structure(mol, k_dihedral=2.0)
    assert fit.term("gamma_1").n_tuples == 9 and fit.term("phi").n_tuples == 9
    assert fit.term("omega").n_tuples == 9 and fit.term("gamma_2").n_tuples == 9
    assert torch.allclose(fit.term("phi").params["v0"], torch.full((9,), 2.0, dtype=torch.float64))


@needs_prior_oracle
def test_fit_ca_mapping(prior_oracle):
    """CA mapping: bonds CA_i-CA_{i+1}, angles over 3 CAs, dihedrals over 4, repulsion from 5 bonds apart."""
    from flashschnet.cg.molecule import CGMolecule

    five = cln_molecule(prior_oracle)
    ca = [i for i, n in enumerate(five.bead_names) if n == "CA"]
    nres = len(ca)
    mol = CGMolecule(mapping="ca", bead_names=["CA"] * nres,
                     bead_types=np.array([ONE_LETTER.index(r.one_letter) + 1 for r in five.residues]),
                     masses=np.full(nres, 12.0), positions=five.positions[ca], bead_residue=np.arange(nres),
                     residues=five.residues, chain_of_residue=np.zeros(nres, dtype=np.int64),
                     bonds=np.array([[i, i + 1] for i in range(nres - 1)]), source="chignolin CA")
    fit = fit_priors_to_structure(mol)
    assert {t.name: t.n_tuples for t in fit.terms} == {
        "bonds": nres - 1, "angles": nres - 2, "ca_dihedral": nres - 3,
        "non_bonded": sum(1 for i in range(nres) for j in range(i + 5, nres))}
    pt = per_term_energy(fit, torch.as_tensor(mol.positions).unsqueeze(0))
    assert all(abs(float(pt[n][0])) < 1e-9 for n in ("bonds", "angles", "ca_dihedral"))
    with pytest.raises(InputError, match="10-bead ca molecule \\(YYDPETGTWY\\)"):
        fit.check_applies_to(five)
