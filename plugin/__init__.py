"""flashschnet.openmm: the OpenMM glue (TorchForce wrapper, units, System building, prior forces,
reporters, the simulation driver). ``import torch`` happens before openmm/openmmtorch here.

The names below are imported on first use (PEP 562), so that importing this package, or a module of it that needs
no OpenMM (the device checks' plan, :mod:`.benchmark.device_checks`), does not import OpenMM: a process that only
plans or records keeps working where OpenMM is missing or broken, and says so per stage.
"""
import sys
from importlib import import_module

import torch  # noqa: F401  (torch must be imported before openmmtorch)

from ._plugins import load_late_torch_plugins

if "openmm" in sys.modules:     # openmm came before torch: its openmm-torch plugins failed to load (see _plugins)
    load_late_torch_plugins()

#: the package's names and the module of each
_EXPORTS = {"create_torch_force": "force", "make_network_force": "force", "network_module": "force",
            "add_model_forces": "system", "build_system": "system",
            "replica_positions_nm": "system", "cg_molecule_from_topology": "topology", "cg_topology": "topology",
            "write_cg_pdb": "topology", "conversion_factors": "units"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
