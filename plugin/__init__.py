"""flashschnet.openmm: the OpenMM glue (TorchForce wrapper, units, System building, prior forces,
reporters, the simulation driver). ``import torch`` happens before openmm/openmmtorch here."""
import torch  # noqa: F401  (torch must be imported before openmmtorch)

from ._plugins import load_late_torch_plugins

load_late_torch_plugins()

from .force import add_network_force, create_torch_force, network_module
from .system import add_model_forces, build_replica_systems, build_system, replica_positions_nm
from .topology import cg_molecule_from_topology, cg_topology, write_cg_pdb
from .units import conversion_factors

__all__ = ["add_model_forces", "add_network_force", "build_replica_systems", "build_system",
           "cg_molecule_from_topology", "cg_topology", "conversion_factors",
           "create_torch_force", "network_module", "replica_positions_nm", "write_cg_pdb"]
