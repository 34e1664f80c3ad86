"""Tests of the mlcg prior terms: torch reference, OpenMM forces, serialization and the placeholder fit."""

import numpy as np
import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.priors import (
    DEFAULT_SIGMA,
    REPULSION_MIN_GRAPH_DISTANCE,
    PriorSet,
    PriorTerm,
    compute_torsions,
    fit_priors_to_structure,
    per_term_energy,
    prior_energy,
    prior_energy_forces,
)

from conftest import DATA, SHARED, rel_error

ORACLE = next((p for p in (DATA / "oracles" / "mlcg_prior_cln.pt", SHARED / "oracles" / "mlcg" / "mlcg_prior_cln.pt")
               if p.exists()), DATA / "oracles" / "mlcg_prior_cln.pt")

needs_oracle = pytest.mark.skipif(not ORACLE.exists(), reason=f"mlcg prior oracle not found at {ORACLE}")

KCAL = 4.184  # kJ per kcal
ANGSTROM = 0.1  # nm per Angstrom




@pytest.fixture(scope="module")
def oracle():
    return torch.load(ORACLE, weights_only=True)


@pytest.fixture(scope="module")
def prior(oracle):
    return PriorSet.from_mlcg_oracle(oracle)


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
@needs_oracle
def test_from_oracle_skips_empty_terms(oracle, prior):
    names = [t.name for t in prior.terms]
    assert not set(names) & set(oracle["empty_terms"])
    assert set(names) == {n for n, t in oracle["terms"].items() if t["atom_indices"].numel()}
    assert prior.n_beads == 49 and prior.fingerprint[0] == "5bead"


@needs_oracle
def test_torch_reference_matches_mlcg(oracle, prior):
    pos = oracle["positions_A"]
    pt = per_term_energy(prior, pos)
    for name, e in pt.items():
        ref = oracle["terms"][name]
        assert rel_error(e, ref["energies_kcal_mol"]) < 1e-6, name
        t = PriorSet(terms=[prior.term(name)], n_beads=49)
        _, f = prior_energy_forces(t, pos)
        assert rel_error(f, ref["forces_kcal_mol_A"]) < 1e-6, name
    e, f = prior_energy_forces(prior, pos)
    assert e.shape == (7,) and f.shape == (7, 49, 3)
    assert rel_error(e, oracle["energies_kcal_mol"]) < 1e-10
    assert rel_error(f, oracle["forces_kcal_mol_A"]) < 1e-10
    assert rel_error(prior_energy(prior, pos), oracle["energies_kcal_mol"]) < 1e-10


@needs_oracle
def test_torch_reference_float32(oracle, prior):
    e, f = prior_energy_forces(prior, oracle["positions_A"].float())
    assert e.dtype == torch.float32 and f.dtype == torch.float32
    assert rel_error(e, oracle["energies_kcal_mol"]) < 1e-4
    assert rel_error(f, oracle["forces_kcal_mol_A"]) < 1e-3


@needs_oracle
def test_dihedral_sign_convention(oracle, prior):
    """mlcg's phi is mdtraj's (IUPAC) dihedral; sin terms would expose a sign flip."""
    import mdtraj as md
    idx = torch.cat([t.indices for t in prior.terms_of_kind("dihedral_fourier")])
    phi = compute_torsions(oracle["positions_A"], idx)
    top = md.Topology()
    r = top.add_residue("X", top.add_chain())
    for _ in range(49):
        top.add_atom("C", md.element.carbon, r)
    traj = md.Trajectory(oracle["positions_A"].numpy() / 10.0, top)
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


# ------------------------------------------------------------------------------------------------------ OpenMM
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


@needs_oracle
@pytest.mark.parametrize("platform", ["Reference", "CPU"])
def test_openmm_matches_mlcg(oracle, prior, platform):
    if platform not in _platforms():
        pytest.skip(f"OpenMM platform {platform} not available")
    tol = 1e-6 if platform == "Reference" else 1e-4
    for fr in range(oracle["positions_A"].shape[0]):
        e, f, (system, forces) = _openmm_eval(prior, oracle["positions_A"][fr].numpy(), platform)
        assert abs(e - float(oracle["energies_kcal_mol"][fr])) <= tol * abs(float(oracle["energies_kcal_mol"][fr]))
        assert rel_error(f, oracle["forces_kcal_mol_A"][fr]) < tol, (platform, fr)
    assert len(forces) == 4
    assert all(not fo.usesPeriodicBoundaryConditions() and fo.getForceGroup() == 1 for fo in forces)
    assert len({fo.getName() for fo in forces}) == 4


@needs_oracle
def test_openmm_per_term_matches_mlcg(oracle, prior):
    """Each term alone (catches a dihedral sign flip hidden by other terms)."""
    for t in prior.terms:
        one = PriorSet(terms=[t], n_beads=49)
        e, f, _ = _openmm_eval(one, oracle["positions_A"][1].numpy(), "Reference")
        ref = oracle["terms"][t.name]
        assert abs(e - float(ref["energies_kcal_mol"][1])) <= 1e-6 * max(1.0, abs(float(ref["energies_kcal_mol"][1]))), t.name
        assert rel_error(f, ref["forces_kcal_mol_A"][1]) < 1e-6, t.name


@needs_oracle
def test_openmm_replicas(oracle, prior):
    pos = oracle["positions_A"][:3].numpy()
    e, f, _ = _openmm_eval(prior, pos, "Reference", replicas=3)
    assert abs(e - float(oracle["energies_kcal_mol"][:3].sum())) < 1e-6 * abs(e)
    f = f.reshape(3, 49, 3)
    for r in range(3):
        assert rel_error(f[r], oracle["forces_kcal_mol_A"][r]) < 1e-6


def test_openmm_requires_units():
    import openmm as mm
    from flashschnet.openmm.priors import add_prior_forces

    ps = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 1]], {"x0": [1.0], "k": [1.0]})], n_beads=2)
    system = mm.System()
    system.addParticle(1.0)
    system.addParticle(1.0)
    with pytest.raises(ValueError):
        add_prior_forces(system, ps)


# ------------------------------------------------------------------------------------------------ serialization
@needs_oracle
def test_round_trip(oracle, prior, tmp_path):
    p = tmp_path / "prior.pt"
    torch.save(prior.to_dict(), p)
    back = PriorSet.from_dict(torch.load(p, weights_only=True))
    assert back.n_beads == prior.n_beads and back.fingerprint == prior.fingerprint
    assert back.units == prior.units and back.description == prior.description
    assert [t.name for t in back.terms] == [t.name for t in prior.terms]
    for a, b in zip(prior.terms, back.terms):
        assert a.kind == b.kind and torch.equal(a.indices, b.indices)
        assert a.params.keys() == b.params.keys()
        assert all(torch.equal(a.params[k], b.params[k]) and b.params[k].dtype == torch.float64 for k in a.params)
    pos = oracle["positions_A"]
    assert torch.equal(prior_energy(back, pos), prior_energy(prior, pos))


def test_round_trip_no_fingerprint(tmp_path):
    ps = PriorSet(terms=[PriorTerm("r", "repulsion", [[0, 1]], {"sigma": [3.0]})], n_beads=2, description="x")
    torch.save(ps.to_dict(), tmp_path / "p.pt")
    back = PriorSet.from_dict(torch.load(tmp_path / "p.pt", weights_only=True))
    assert back.fingerprint is None and back.terms[0].params["sigma"].tolist() == [3.0]


# ----------------------------------------------------------------------------------------------------- fitting
def _tuples(t):
    return {tuple(x) for x in t.tolist()}


@needs_oracle
def test_fit_topology_matches_mlcg(oracle):
    mol = _cln_molecule(oracle)
    fit = fit_priors_to_structure(mol)
    T = oracle["terms"]

    def union(names):
        return set().union(*[_tuples(T[n]["atom_indices"]) for n in names if n in T])

    assert _tuples(fit.term("bonds").indices) == union([n for n in T if T[n]["kind"] == "harmonic_bond"])
    assert _tuples(fit.term("angles").indices) == union([n for n in T if T[n]["kind"] == "harmonic_angle_cos"])
    assert _tuples(fit.term("phi").indices) == union([n for n in T if n.endswith("_phi")])
    assert _tuples(fit.term("psi").indices) == union([n for n in T if n.endswith("_psi")])
    assert _tuples(fit.term("omega").indices) == union(["pro_omega", "non_pro_omega"])
    assert _tuples(fit.term("gamma_1").indices) == union(["gamma_1"])
    assert _tuples(fit.term("gamma_2").indices) == union(["gamma_2"])
    assert REPULSION_MIN_GRAPH_DISTANCE == 5
    assert _tuples(fit.term("non_bonded").indices) == union(["non_bonded"])
    assert fit.term("non_bonded").n_tuples == 924
    assert fit.fingerprint == mol.fingerprint()


@needs_oracle
def test_fit_native_is_minimum(oracle):
    mol = _cln_molecule(oracle)
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


@needs_oracle
def test_fit_glycine_and_chain_ends(oracle):
    """Gly (residue 7) has no gamma_1; no phi for the first residue, no psi/omega/gamma_2 for the last."""
    mol = _cln_molecule(oracle)
    fit = fit_priors_to_structure(mol, k_dihedral=2.0)
    assert fit.term("gamma_1").n_tuples == 9 and fit.term("phi").n_tuples == 9
    assert fit.term("omega").n_tuples == 9 and fit.term("gamma_2").n_tuples == 9
    assert torch.allclose(fit.term("phi").params["v0"], torch.full((9,), 2.0, dtype=torch.float64))


@needs_oracle
def test_check_applies_to(oracle, prior):
    mol = _cln_molecule(oracle)
    prior.check_applies_to(mol)  # fine
    types = oracle["bead_types"].tolist()
    types[12] = 4  # ASP CB -> GLU CB
    other = _cln_molecule(oracle, types=types)
    with pytest.raises(InputError) as exc:
        prior.check_applies_to(other)
    msg = str(exc.value)
    assert "\n" not in msg and "49-bead 5bead molecule (YYDPETGTWY)" in msg and "bead 12" in msg
    # different size
    small = PriorSet(terms=prior.terms[:1], n_beads=49, fingerprint=("5bead", tuple(types[:10])))
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


@needs_oracle
def test_fit_ca_mapping(oracle):
    """CA mapping: bonds CA_i-CA_{i+1}, angles over 3 CAs, dihedrals over 4, repulsion from 5 bonds apart."""
    from flashschnet.cg.molecule import CGMolecule

    five = _cln_molecule(oracle)
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
