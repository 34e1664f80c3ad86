"""MARTINI 3 in OpenMM: reading the GROMACS topologies that martinize2 and insane write (more to come: the
System builder and the comparison with FlashSchNet)."""
from .topology import TopologyError, read_topology

__all__ = ["TopologyError", "read_topology"]
