"""openmm-torch's kernel libraries when ``openmm`` was imported before ``torch``.

``import openmm`` loads every plugin in OpenMM's plugin directory. openmm-torch's kernel libraries
(``libOpenMMTorchReference.so``, ...) need the shared libraries that ``import torch`` loads, so when a script
imports openmm first (``import openmm; from openmmml import MLPotential``) they fail to load, OpenMM records
the failure, and every TorchForce later fails with "does not support all required kernels". Importing
:mod:`flashschnet.openmm` (which imports torch first) loads those failed libraries again, once.
"""
from __future__ import annotations

import re
from typing import List, Set

_loaded: Set[str] = set()
_FAILED_TORCH_PLUGIN = re.compile(r"Error loading library (.+?OpenMMTorch\w*\.(?:so|dylib|dll))\b")


def load_late_torch_plugins() -> List[str]:
    """Load the openmm-torch plugin libraries that failed because openmm was imported before torch; return
    the paths loaded now (empty when nothing had failed). Call after ``import torch``."""
    import openmm

    done = []
    for failure in openmm.Platform.getPluginLoadFailures():
        m = _FAILED_TORCH_PLUGIN.match(failure)
        if m is None or m.group(1) in _loaded:
            continue
        path = m.group(1)
        _loaded.add(path)
        try:
            openmm.Platform.loadPluginLibrary(path)
        except Exception:   # e.g. the CUDA kernels on a machine without the CUDA driver: as if never there
            continue
        done.append(path)
    return done
