"""flashschnet.openmm.force: the network as an OpenMM force (TorchForce of the scripted module) against the model
itself on every OpenMM platform this build has (Reference, CPU; CUDA/OpenCL where present), packed replicas and
float32 networks; the scripted module's per-replica energies; the bead types following the network's device."""
from __future__ import annotations

import numpy as np
import openmm
import pytest
import torch

from tests.conftest import CPU_BACKENDS, EXAMPLES, oracle_path, platforms
from flashschnet import load_model, map_pdb
from flashschnet.openmm.force import OpenMMNetwork, make_network_force, network_module
from tests.helpers.openmm_state import energy_forces, verlet_context

@pytest.mark.parametrize("platform", platforms())
@pytest.mark.parametrize("replicas", [1, 3])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_torchforce_equals_model(fixture_a, platform, replicas, backend):
    """getState energies/forces == model.energy_forces (float64 network), packed replicas."""
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend=backend)
    types = fixture_a["bead_types"]
    pos = fixture_a["positions_A"][:replicas]
    e_ref, f_ref = model.energy_forces(pos, types)
    system = openmm.System()
    for _ in range(replicas * len(types)):
        system.addParticle(12.0)
    system.addForce(make_network_force("torch", model, types, replicas))
    ctx = verlet_context(system, platform)
    ctx.setPositions((pos.reshape(-1, 3) * 0.1).numpy())
    e, f = energy_forces(ctx)
    # Reference keeps double precision end to end; the CPU platform accumulates forces in single precision
    tol = 1e-10 if platform == "Reference" else 1e-5
    assert abs(e / 4.184 - float(e_ref.sum())) <= tol * abs(float(e_ref.sum()))
    f_model = (f_ref.reshape(-1, 3) * 41.84).numpy()
    assert np.abs(f - f_model).max() <= tol * np.abs(f_model).max()


@pytest.mark.parametrize("platform", platforms())
def test_torchforce_float32_network(fixture_a, platform):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float32)
    types = fixture_a["bead_types"]
    pos = fixture_a["positions_A"][:2]
    system = openmm.System()
    for _ in range(2 * len(types)):
        system.addParticle(12.0)
    system.addForce(make_network_force("torch", model, types, 2))
    ctx = verlet_context(system, platform)
    ctx.setPositions((pos.reshape(-1, 3) * 0.1).numpy())
    e, f = energy_forces(ctx)
    want_e = float(fixture_a["energies_kcal_mol"][:2].sum()) * 4.184
    want_f = (fixture_a["forces_kcal_mol_A"][:2].reshape(-1, 3) * 41.84).numpy()
    assert abs(e - want_e) <= 1e-5 * abs(want_e)
    assert np.abs(f - want_f).max() <= 1e-4 * np.abs(want_f).max()


def test_network_module_replica_energies(fixture_a):
    model = load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64)
    mod = network_module(model, fixture_a["bead_types"], 3)
    pos_nm = fixture_a["positions_A"][:3].reshape(-1, 3) * 0.1
    e = mod.replica_energies(pos_nm)
    assert torch.allclose(e / 4.184, fixture_a["energies_kcal_mol"][:3], rtol=1e-12, atol=0)


def test_network_module_keeps_bead_types_on_the_networks_device():
    # a PythonForce and the log's energies call the module where it was made (openmm-torch moves a TorchForce's
    # module itself): bead types on another device than the weights failed on the first GPU run. The meta device
    # stands in for CUDA here: the buffer must follow the weights
    model = load_model(EXAMPLES / "trpcage_trained.pt", backend="torch")
    mol = map_pdb(EXAMPLES / "1L2Y_trpcage.pdb")
    model.network.to("meta")
    module = OpenMMNetwork(model, torch.as_tensor(mol.bead_types), 2)
    assert module.bead_types.device.type == "meta"
    assert module.bead_types.shape == (mol.n_beads,)
