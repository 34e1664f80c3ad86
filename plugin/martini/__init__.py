"""MARTINI 3 in OpenMM: reading the GROMACS topologies that martinize2 and insane write, and an OpenMM
System with MARTINI's non-bonded scheme whose energies equal GROMACS's term by term."""
from .system import GROUPS, build_system, read_gro
from .topology import TopologyError, read_topology

__all__ = ["GROUPS", "TopologyError", "build_system", "read_gro", "read_topology"]
