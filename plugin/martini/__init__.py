"""MARTINI 3 in OpenMM: reading the GROMACS topologies that martinize2 and insane write, an OpenMM System with
MARTINI's non-bonded scheme whose energies equal GROMACS's term by term, the PDB -> martinize2 -> insane
preparation and the run behind ``flashschnet-martini``."""
from .prepare import FORCEFIELD_FILES, PreparedSystem, prepare_system
from .run import MartiniSettings, run_martini
from .system import GROUPS, build_system, read_gro
from .topology import TopologyError, read_topology

__all__ = ["FORCEFIELD_FILES", "GROUPS", "MartiniSettings", "PreparedSystem", "TopologyError", "build_system",
           "prepare_system", "read_gro", "read_topology", "run_martini"]
