"""Tests of the mlcg prior terms: torch reference, serialization and the placeholder fit. The terms as native
OpenMM forces: tests/openmm/test_prior_forces.py."""

import numpy as np
import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.priors import (
    DEFAULT_SIGMA,
    PriorSet,
    PriorTerm,
    compute_torsions,
    fit_priors_to_structure,
    per_term_energy,
    prior_energy,
    prior_energy_forces,
)

from conftest import needs_prior_oracle, rel_error


# ------------------------------------------------------------------------------------------ hand-built molecule
_ONE = "ACDEFGHIKLMNPQRSTVWY"
_THREE = {"A": "ALA", "C": "CYS", "D": "ASP", "E": "GLU", "F": "PHE", "G": "GLY", "H": "HIS", "I": "ILE",
          "K": "LYS", "L": "LEU", "M": "MET", "N": "ASN", "P": "PRO", "Q": "GLN", "R": "ARG", "S": "SER",
          "T": "THR", "V": "VAL", "W": "TRP", "Y": "TYR"}


def _oracle_bonds(oracle):
    t = oracle["terms"]
    return torch.cat([t[n]["atom_indices"] for n in t if t[n]["kind"] == "harmonic_bond"]).numpy()


def _cln_molecule(oracle, frame=0, types=None):
    """A 5-bead CGMolecule built by hand from the oracle's bead types, positions and bond list."""
    from flashschnet.cg.molecule import CGMolecule, CGResidue

    types = [int(x) for x in (oracle["bead_types"].tolist() if types is None else types)]
    names, bead_res, residues = [], [], []
    for t in types:
        if t == 21:
            names.append("N")
            residues.append(None)
        elif t in (22, 6) and names[-1] == "N":
            names.append("CA")
            if t == 6:
                residues[-1] = "G"
        elif t == 23:
            names.append("C")
        elif t == 24:
            names.append("O")
        else:
            names.append("CB")
            residues[-1] = _ONE[t - 1]
        bead_res.append(len(residues) - 1)
    res = [CGResidue(chain="A", resseq=i + 1, icode="", resname=_THREE[a], one_letter=a)
           for i, a in enumerate(residues)]
    masses = np.array([{"N": 14.0, "O": 16.0}.get(n, 12.0) for n in names])
    return CGMolecule(mapping="5bead", bead_names=names, bead_types=np.array(types, dtype=np.int64),
                      masses=masses, positions=oracle["positions_A"][frame].numpy().copy(),
                      bead_residue=np.array(bead_res, dtype=np.int64), residues=res,
                      chain_of_residue=np.zeros(len(res), dtype=np.int64),
                      bonds=np.sort(_oracle_bonds(oracle), axis=1), source="chignolin (mlcg oracle)")


# ------------------------------------------------------------------------------------------------ torch reference
@needs_prior_oracle
def test_from_oracle_skips_empty_terms(prior_oracle, oracle_priors):
    names = [t.name for t in oracle_priors.terms]
    assert not set(names) & set(prior_oracle["empty_terms"])
    assert set(names) == {n for n, t in prior_oracle["terms"].items() if t["atom_indices"].numel()}
    assert oracle_priors.n_beads == 49 and oracle_priors.fingerprint[0] == "5bead"


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


@needs_prior_oracle
def test_dihedral_sign_convention(prior_oracle, oracle_priors):
    """mlcg's phi is mdtraj's (IUPAC) dihedral; sin terms would expose a sign flip."""
    import mdtraj as md
    idx = torch.cat([t.indices for t in oracle_priors.terms_of_kind("dihedral_fourier")])
    phi = compute_torsions(prior_oracle["positions_A"], idx)
    top = md.Topology()
    r = top.add_residue("X", top.add_chain())
    for _ in range(49):
        top.add_atom("C", md.element.carbon, r)
    traj = md.Trajectory(prior_oracle["positions_A"].numpy() / 10.0, top)
    ref = md.compute_dihedrals(traj, idx.numpy())
    assert np.abs(np.angle(np.exp(1j * (ref - phi.numpy())))).max() < 1e-4
    assert (phi < 0).any() and (phi > 0).any()


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


# ------------------------------------------------------------------------------------------------ serialization
@needs_prior_oracle
def test_round_trip(prior_oracle, oracle_priors, tmp_path):
    p = tmp_path / "prior.pt"
    torch.save(oracle_priors.to_dict(), p)
    back = PriorSet.from_dict(torch.load(p, weights_only=True))
    assert back.n_beads == oracle_priors.n_beads and back.fingerprint == oracle_priors.fingerprint
    assert back.units == oracle_priors.units and back.description == oracle_priors.description
    assert [t.name for t in back.terms] == [t.name for t in oracle_priors.terms]
    for a, b in zip(oracle_priors.terms, back.terms):
        assert a.kind == b.kind and torch.equal(a.indices, b.indices)
        assert a.params.keys() == b.params.keys()
        assert all(torch.equal(a.params[k], b.params[k]) and b.params[k].dtype == torch.float64 for k in a.params)
    pos = prior_oracle["positions_A"]
    assert torch.equal(prior_energy(back, pos), prior_energy(oracle_priors, pos))


def test_round_trip_no_fingerprint(tmp_path):
    ps = PriorSet(terms=[PriorTerm("r", "repulsion", [[0, 1]], {"sigma": [3.0]})], n_beads=2, description="x")
    torch.save(ps.to_dict(), tmp_path / "p.pt")
    back = PriorSet.from_dict(torch.load(tmp_path / "p.pt", weights_only=True))
    assert back.fingerprint is None and back.terms[0].params["sigma"].tolist() == [3.0]


# ----------------------------------------------------------------------------------------------------- fitting
def _tuples(t):
    return {tuple(x) for x in t.tolist()}


@needs_prior_oracle
def test_fit_topology_matches_mlcg(prior_oracle):
    mol = _cln_molecule(prior_oracle)
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
    mol = _cln_molecule(prior_oracle)
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
    mol = _cln_molecule(prior_oracle)
    fit = fit_priors_to_structure(mol, k_dihedral=2.0)
    assert fit.term("gamma_1").n_tuples == 9 and fit.term("phi").n_tuples == 9
    assert fit.term("omega").n_tuples == 9 and fit.term("gamma_2").n_tuples == 9
    assert torch.allclose(fit.term("phi").params["v0"], torch.full((9,), 2.0, dtype=torch.float64))


@needs_prior_oracle
def test_check_applies_to(prior_oracle, oracle_priors):
    mol = _cln_molecule(prior_oracle)
    oracle_priors.check_applies_to(mol)  # fine
    types = prior_oracle["bead_types"].tolist()
    types[12] = 4  # ASP CB -> GLU CB
    other = _cln_molecule(prior_oracle, types=types)
    with pytest.raises(InputError) as exc:
        oracle_priors.check_applies_to(other)
    msg = str(exc.value)
    assert "\n" not in msg and "49-bead 5bead molecule (YYDPETGTWY)" in msg and "bead 12" in msg
    # different size
    small = PriorSet(terms=oracle_priors.terms[:1], n_beads=49, fingerprint=("5bead", tuple(types[:10])))
    with pytest.raises(InputError):
        small.check_applies_to(mol)
    # no fingerprint, but indices beyond the molecule
    nofp = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 60]], {"x0": [1.0], "k": [1.0]})], n_beads=61)
    with pytest.raises(InputError, match="bead 60"):
        nofp.check_applies_to(mol)


def test_bad_inputs():
    with pytest.raises(InputError):
        PriorTerm("x", "morse", [[0, 1]], {})
    with pytest.raises(InputError):
        PriorTerm("x", "harmonic_bond", [[0, 1]], {"x0": [1.0]})
    with pytest.raises(InputError):
        PriorSet.from_dict({"format": "something-else"})
    ps = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 1]], {"x0": [1.0], "k": [1.0]})], n_beads=2)
    with pytest.raises(InputError):
        prior_energy(ps, torch.zeros(2, 3))


@needs_prior_oracle
def test_fit_ca_mapping(prior_oracle):
    """CA mapping: bonds CA_i-CA_{i+1}, angles over 3 CAs, dihedrals over 4, repulsion from 5 bonds apart."""
    from flashschnet.cg.molecule import CGMolecule

    five = _cln_molecule(prior_oracle)
    ca = [i for i, n in enumerate(five.bead_names) if n == "CA"]
    nres = len(ca)
    mol = CGMolecule(mapping="ca", bead_names=["CA"] * nres,
                     bead_types=np.array([_ONE.index(r.one_letter) + 1 for r in five.residues]),
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
