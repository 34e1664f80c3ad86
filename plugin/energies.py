"""Per-replica potential energies of a packed System, from the code that drives its dynamics.

OpenMM reports one potential energy per Context: the sum over the R packed replicas. The run's log wants one
per replica; :class:`ReplicaEnergies` computes them with the same code the dynamics uses:

* the network: the module the System's network force runs (:class:`~flashschnet.openmm.force.OpenMMNetwork`,
  scripted for a TorchForce), through its exported ``replica_energies``;
* the priors: OpenMM's own prior forces, built by the same function as the System's
  (:func:`~flashschnet.openmm.system.build_system` for one replica), in a one-replica Context on the run's
  platform, evaluated at each replica's positions (replicas do not interact, so the prior energy of the packed
  System is the sum of these).

The sum over replicas therefore equals the Context's potential energy up to the rounding of the summation.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import openmm
import openmm.unit as u
import torch

from .system import build_system


class ReplicaEnergies:
    """``energies(positions_nm [R*N, 3]) -> [R]`` potential energies in kJ/mol (network + priors).

    Parameters
    ----------
    network : torch.nn.Module or None
        The module the System's network force runs (:func:`~flashschnet.openmm.force.network_module`, or the
        eager :class:`~flashschnet.openmm.force.OpenMMNetwork` of a PythonForce); None: no network.
    mol : flashschnet.cg.CGMolecule
        One replica's CG molecule (masses, bead count).
    priors : PriorSet or None
        The priors the System holds (None: none).
    replicas : int
    platform : str
        The run's OpenMM platform name (the prior Context runs there; on CPU with one thread, so its energies
        do not depend on the machine's core count).
    """

    def __init__(self, network: Optional[torch.nn.Module], mol, priors, replicas: int, platform: str = "Reference"):
        self.network, self.replicas, self.n_beads = network, int(replicas), int(mol.n_beads)
        self._device = None if network is None else next(network.parameters()).device
        self._context = None
        if priors is not None:
            system = build_system(mol, None, replicas=1, priors=priors)
            plat = openmm.Platform.getPlatformByName(platform)
            props = {"Threads": "1"} if platform == "CPU" else {}
            self._context = openmm.Context(system, openmm.VerletIntegrator(0.001), plat, props)

    def __call__(self, positions_nm: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions_nm, dtype=np.float64).reshape(self.replicas * self.n_beads, 3)
        energies = np.zeros(self.replicas)
        if self.network is not None:      # (not under no_grad: the reference backend's forces need autograd)
            e = self.network.replica_energies(torch.as_tensor(pos).to(self._device))
            energies += e.detach().double().cpu().numpy()
        if self._context is not None:
            for r in range(self.replicas):
                self._context.setPositions(pos[r * self.n_beads:(r + 1) * self.n_beads])
                state = self._context.getState(getEnergy=True)
                energies[r] += state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        return energies
