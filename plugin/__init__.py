"""flashschnet.openmm: the OpenMM glue (TorchForce wrapper, units, System building, prior forces,
reporters, the simulation driver). ``import torch`` happens before openmm/openmmtorch here."""
import torch  # noqa: F401  (torch must be imported before openmmtorch)

from .force import add_network_force, create_torch_force, network_module
from .system import build_replica_systems, build_system, replica_positions_nm
from .topology import cg_topology, write_cg_pdb
from .units import conversion_factors

__all__ = ["add_network_force", "build_replica_systems", "build_system", "cg_topology", "conversion_factors",
           "create_torch_force", "network_module", "replica_positions_nm", "write_cg_pdb"]
