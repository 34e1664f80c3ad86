"""Which OpenMM platforms load here, and, for one that does not, why and what to install, in one line.

OpenMM loads every plugin library of its plugin folder at ``import openmm`` and records each failure
(``openmm.Platform.getPluginLoadFailures()``). A platform is absent either because its package is not installed
(no plugin library: the CUDA platform comes with ``pip install 'flashschnet[cuda13]'``, which brings OpenMM's
``OpenMM-CUDA-13`` and openmm-torch's CUDA plugin) or because its library failed to load (usually the NVIDIA
driver or an OpenCL loader missing on this machine), which :mod:`flashschnet.openmm.doctor` explains; this module
gives the one line a command prints when ``--platform`` names a platform that is not here.
"""
from __future__ import annotations

import re
from typing import List

from ..backends import cuda_extra

_LIBRARY = {"CUDA": "libOpenMMCUDA", "OpenCL": "libOpenMMOpenCL", "HIP": "libOpenMMHIP"}


def loaded_platforms() -> List[str]:
    """The names of the OpenMM platforms that loaded, in OpenMM's order."""
    import openmm

    return [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]


def load_failure(name: str) -> str:
    """OpenMM's own message for the main plugin library of platform ``name`` ("" if none failed)."""
    import openmm

    lib = _LIBRARY.get(name)
    if lib is None:
        return ""
    pattern = re.compile(rf"/{lib}\.(so|dylib|dll)\b")
    return next((f for f in openmm.Platform.getPluginLoadFailures() if pattern.search(f)), "")


def missing_platform(name: str) -> str:
    """One line: platform ``name`` is not available here, why, and what to do (a plugin that failed to load is
    explained as ``flashschnet-doctor`` explains it: :func:`flashschnet.openmm.doctor.explain_failure`)."""
    head = f"OpenMM platform {name!r} is not available here (available: {', '.join(loaded_platforms())})"
    failure = load_failure(name)
    if failure:
        from .doctor import Env, explain_failure

        return f"{head}: {explain_failure(failure, Env.current())['line']}"
    if name == "CUDA":
        from ..doctor import nvidia_driver_present

        if not nvidia_driver_present():       # the extra would install a platform that cannot load here
            return (f"{head}: this machine has no NVIDIA driver (libcuda.so.1 does not load), so no CUDA platform "
                    "can run here, installed or not; use --platform CPU or Reference here, CUDA on a GPU machine "
                    "(flashschnet-doctor says what a machine has)")
        return f"{head}: the CUDA platform is not installed; pip install 'flashschnet[{cuda_extra()}]'"
    return head


def checked_platform(name: str) -> str:
    """OpenMM's spelling of platform ``name`` (:func:`platform_name`), or InputError in one line
    (:func:`missing_platform`) when it is not available here."""
    from ..errors import InputError

    name = platform_name(name)
    if name not in loaded_platforms():
        raise InputError(missing_platform(name))
    return name


def platform_name(name: str) -> str:
    """OpenMM's spelling of a platform named in any case (``cuda`` -> ``CUDA``, ``reference`` -> ``Reference``),
    among the platforms loaded here and those OpenMM can have; another name is returned as given."""
    known = dict.fromkeys(loaded_platforms() + ["Reference", "CPU", "CUDA", "OpenCL", "HIP", "Metal"])
    return next((k for k in known if k.lower() == str(name).lower()), name)
