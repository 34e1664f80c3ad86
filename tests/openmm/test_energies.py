"""Per-replica potential energies of a packed System (the run log's column) from the code that drives the
dynamics: their sum is the Context's potential energy, on every platform, with both network forces."""
from __future__ import annotations

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from tests.conftest import CPU_BACKENDS, EXAMPLES, platforms
from flashschnet import load_model, map_pdb
from flashschnet.openmm.energies import ReplicaEnergies
from flashschnet.openmm.force import OpenMMNetwork, network_module
from flashschnet.openmm.system import build_system, replica_positions_nm


def _state_energy(system, platform, pos_nm):
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(pos_nm)
    return ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)


@pytest.mark.parametrize("platform", platforms())
@pytest.mark.parametrize("network_force", ["torch", "python"])
@pytest.mark.parametrize("replicas", [1, 3])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_replica_energies_sum_to_the_contexts_energy(platform, network_force, replicas, backend):
    model = load_model(EXAMPLES / "trpcage_trained.pt", dtype=torch.float64, backend=backend)
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    priors = model.priors_for(mol)
    types = torch.as_tensor(mol.bead_types)
    module = network_module(model, types, replicas) if network_force == "torch" else OpenMMNetwork(model, types,
                                                                                                  replicas)
    system = build_system(mol, model, replicas=replicas, priors=priors, module=module, network_force=network_force)
    rng = np.random.default_rng(replicas)
    pos = replica_positions_nm(mol, replicas) + rng.normal(scale=0.01, size=(replicas * mol.n_beads, 3))
    energies = ReplicaEnergies(module, mol, priors, replicas, platform)(pos)
    assert energies.shape == (replicas,) and energies.dtype == np.float64
    total = _state_energy(system, platform, pos)
    tol = 1e-9 if platform == "Reference" else 1e-5       # CPU/CUDA: single-precision force kernels
    assert abs(energies.sum() - total) <= tol * abs(total)
    if replicas > 1:                                      # the replicas really differ, and each is its own
        one = build_system(mol, model, replicas=1, priors=priors)
        for r in range(replicas):
            alone = _state_energy(one, platform, pos[r * mol.n_beads:(r + 1) * mol.n_beads])
            assert abs(energies[r] - alone) <= tol * abs(alone)
        assert len(set(np.round(energies, 6))) == replicas


def test_replica_energies_without_priors_or_network():
    model = load_model(EXAMPLES / "trpcage_trained.pt", dtype=torch.float64, backend="torch")
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    pos = replica_positions_nm(mol, 2)
    module = network_module(model, torch.as_tensor(mol.bead_types), 2)
    net_only = ReplicaEnergies(module, mol, None, 2, "Reference")(pos)
    priors_only = ReplicaEnergies(None, mol, model.priors_for(mol), 2, "Reference")(pos)
    both = ReplicaEnergies(module, mol, model.priors_for(mol), 2, "Reference")(pos)
    assert np.allclose(net_only + priors_only, both, rtol=1e-14, atol=0)
    assert np.all(priors_only != 0) and np.all(net_only != 0)
