"""flashschnet.openmm.system: the System builder (network and priors in their force groups, packed replicas, one
scripted module shared by separate Contexts, the XML round trip, the PythonForce option, the default float32 filter
tables) against the model itself, on every OpenMM platform this build has (Reference, CPU; CUDA/OpenCL where present),
and the inputs it refuses."""
from __future__ import annotations

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from tests.conftest import EXAMPLES, oracle_path, platforms
from flashschnet import load_model, map_pdb
from flashschnet.errors import InputError
from flashschnet.openmm.doctor import known_xml_crash_here
from flashschnet.openmm.force import network_module
from flashschnet.openmm.system import (NETWORK_GROUP, PRIOR_GROUP, build_system,
                                       replica_positions_nm)
from flashschnet.priors import PriorSet, prior_energy_forces
from tests.helpers.openmm_state import energy_forces, verlet_context

@pytest.mark.parametrize("platform", platforms())
def test_separate_contexts_share_one_model(fixture_a, platform):
    """R one-replica Contexts running one scripted module give each replica's own numbers."""
    mol = _chignolin(fixture_a)
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64)
    module = network_module(model, torch.as_tensor(mol.bead_types, dtype=torch.long), 1)
    systems = [build_system(mol, model, 1, priors=None, module=module, compress="none") for _ in range(3)]
    e_ref, f_ref = model.energy_forces(fixture_a["positions_A"][:3], fixture_a["bead_types"])
    tol = 1e-10 if platform == "Reference" else 1e-5
    for r, system in enumerate(systems):
        ctx = verlet_context(system, platform)
        ctx.setPositions((fixture_a["positions_A"][r] * 0.1).numpy())
        e, f = energy_forces(ctx)
        assert abs(e / 4.184 - float(e_ref[r])) <= tol * abs(float(e_ref[r]))
        assert np.abs(f / 41.84 - f_ref[r].numpy()).max() <= tol * float(f_ref[r].abs().max())


def _chignolin(fixture_a):
    """A CGMolecule for the fixture's chignolin (bead types and masses from the fixture)."""
    from flashschnet.cg.molecule import CGMolecule, CGResidue

    names = list(fixture_a["bead_names"])
    res_labels = list(dict.fromkeys(n.split(":")[0] for n in names))
    residues = [CGResidue("A", int(lbl[3:]), "", lbl[:3], "X") for lbl in res_labels]
    bead_residue = np.array([res_labels.index(n.split(":")[0]) for n in names])
    prior = torch.load(oracle_path("mlcg_prior_cln.pt"), weights_only=True)
    bonds = np.concatenate([prior["terms"][t]["atom_indices"].numpy() for t in ("n_term_bonds", "bulk_bonds", "c_term_bonds")])
    return CGMolecule(mapping="5bead", bead_names=[n.split(":")[1] for n in names],
                      bead_types=fixture_a["bead_types"].numpy(), masses=(fixture_a["masses"] * 418.4).numpy(),
                      positions=fixture_a["positions_A"][0].numpy(), bead_residue=bead_residue, residues=residues,
                      chain_of_residue=np.zeros(len(residues), dtype=np.int64), bonds=np.sort(bonds, axis=1),
                      source="chignolin fixture")


@pytest.mark.parametrize("platform", platforms())
def test_system_with_priors_matches_model_plus_priors(fixture_a, platform):
    """Network (group 0) + mlcg prior (group 1), 3 packed replicas, vs model.energy_forces + the mlcg prior
    oracle's own energies/forces."""
    mol = _chignolin(fixture_a)
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64)
    prior_oracle = torch.load(oracle_path("mlcg_prior_cln.pt"), weights_only=True)
    priors = PriorSet.from_mlcg_oracle(prior_oracle)
    R = 3
    system = build_system(mol, model, replicas=R, priors=priors)
    assert system.getNumParticles() == R * 49
    assert system.getParticleMass(50).value_in_unit(u.dalton) == pytest.approx(float(fixture_a["masses"][1] * 418.4))
    ctx = verlet_context(system, platform)
    pos = fixture_a["positions_A"][:R]
    ctx.setPositions(replica_positions_nm(mol, R, pos.numpy()))
    tol = 1e-9 if platform == "Reference" else 1e-5
    e_net, f_net = energy_forces(ctx, {NETWORK_GROUP})
    e_pri, f_pri = energy_forces(ctx, {PRIOR_GROUP})
    e_ref, f_ref = model.energy_forces(pos, fixture_a["bead_types"])
    assert abs(e_net / 4.184 - float(e_ref.sum())) <= tol * abs(float(e_ref.sum()))
    want_pe = float(prior_oracle["energies_kcal_mol"][:R].sum())
    assert abs(e_pri / 4.184 - want_pe) <= tol * abs(want_pe)
    want_pf = prior_oracle["forces_kcal_mol_A"][:R].reshape(-1, 3).numpy()
    assert np.abs(f_pri / 41.84 - want_pf).max() <= tol * np.abs(want_pf).max()
    # and the total is the sum
    e_all, f_all = energy_forces(ctx)
    assert e_all == pytest.approx(e_net + e_pri, rel=1e-12)
    assert np.allclose(f_all, f_net + f_pri, rtol=0, atol=1e-6 * np.abs(f_all).max())


@pytest.mark.skipif(known_xml_crash_here(), reason="openmm 8.6 with openmm-torch 1.10: reading back a TorchForce's "
                                                   "XML segfaults (the doctor's warning; docs/install.md)")
def test_system_xml_round_trip(fixture_a):
    """A System with the network survives XmlSerializer (flashschnet is imported, as it must be)."""
    mol = _chignolin(fixture_a)
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64)
    system = build_system(mol, model, replicas=2, priors=None)
    clone = openmm.XmlSerializer.deserialize(openmm.XmlSerializer.serialize(system))
    pos = replica_positions_nm(mol, 2, fixture_a["positions_A"][:2].numpy())
    e1, f1 = energy_forces(_ctx_at(system, pos))
    e2, f2 = energy_forces(_ctx_at(clone, pos))
    assert e1 == e2 and np.array_equal(f1, f2)


def _ctx_at(system, pos):
    ctx = verlet_context(system, "Reference")
    ctx.setPositions(pos)
    return ctx


def test_placeholder_model_on_trpcage():
    """The bundled example: 5-bead trp-cage, the placeholder model with its priors, 2 replicas."""
    model = load_model(EXAMPLES / "trpcage_placeholder.pt", dtype=torch.float64)
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    system = build_system(mol, model, replicas=2)
    assert system.getNumForces() >= 2
    ctx = _ctx_at(system, replica_positions_nm(mol, 2))
    e, f = energy_forces(ctx)
    e_net, f_net = model.energy_forces(torch.as_tensor(mol.positions)[None].repeat(2, 1, 1),
                                       torch.as_tensor(mol.bead_types))
    e_pri, f_pri = prior_energy_forces(model.priors, torch.as_tensor(mol.positions)[None].repeat(2, 1, 1))
    want = float((e_net + e_pri).sum()) * 4.184
    assert e == pytest.approx(want, rel=1e-10)
    want_f = ((f_net + f_pri) * 41.84).reshape(-1, 3).numpy()
    assert np.abs(f - want_f).max() <= 1e-9 * np.abs(want_f).max()


def test_priors_for_another_protein_are_refused():
    model = load_model(EXAMPLES / "trpcage_placeholder.pt")
    mol = map_pdb(EXAMPLES / "4PTI_bpti.pdb")
    with pytest.raises(InputError, match="priors were made for"):
        build_system(mol, model)


def test_mapping_mismatch_is_refused():
    model = load_model(EXAMPLES / "trpcage_placeholder.pt")
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb", mapping="ca")
    with pytest.raises(InputError, match="--mapping 5bead"):
        build_system(mol, model, priors=None)


@pytest.mark.parametrize("platform", platforms())
def test_python_force_equals_torch_force(fixture_a, platform):
    """openmm.PythonForce (no openmm-torch) gives the TorchForce's numbers."""
    mol = _chignolin(fixture_a)
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64)
    pos = replica_positions_nm(mol, 2, fixture_a["positions_A"][:2].numpy())
    out = []
    for kind in ("torch", "python"):
        system = build_system(mol, model, replicas=2, priors=None, network_force=kind)
        ctx = verlet_context(system, platform)
        ctx.setPositions(pos)
        out.append(energy_forces(ctx))
    tol = 1e-12 if platform == "Reference" else 1e-5
    assert out[1][0] == pytest.approx(out[0][0], rel=tol)
    assert np.abs(out[1][1] - out[0][1]).max() <= tol * np.abs(out[0][1]).max()


def test_the_default_system_runs_float32_filter_tables_and_none_opts_out():
    """build_system of an exact float32 model runs the default path (float32 filter tables, as flashschnet-simulate):
    not the exact network's forces, but as close to the float64 network's as the exact float32 network is (within
    3x of its rounding error; measured: max 1.5e-5 vs 1.0e-5 of the largest force); compress="none" runs the model
    as given, and the model passed in is not changed."""
    mol = map_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"))
    model = load_model(EXAMPLES / "trpcage_trained.pt")
    out = {}
    for compress in ("auto", "none"):
        ctx = verlet_context(build_system(mol, model, replicas=1, compress=compress), "Reference")
        ctx.setPositions(replica_positions_nm(mol, 1))
        out[compress] = energy_forces(ctx, groups={NETWORK_GROUP})[1]
    assert model.config.get("compression") is None
    exact64 = load_model(EXAMPLES / "trpcage_trained.pt", dtype=torch.float64)
    _, f64 = exact64.energy_forces(torch.as_tensor(mol.positions, dtype=torch.float64)[None],
                                   torch.as_tensor(mol.bead_types))
    f64 = f64[0].numpy() * 41.84                                   # kcal/mol/A -> kJ/mol/nm
    err_tab, err_exact = (np.abs(out[k] - f64).max() for k in ("auto", "none"))
    assert np.abs(out["auto"] - out["none"]).max() > 0.0           # the tables ran, not the exact filters
    assert err_exact < 1e-4 * np.abs(f64).max() and err_tab <= 3.0 * err_exact, (err_tab, err_exact)
