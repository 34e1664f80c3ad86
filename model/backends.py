"""The one place where the implementation of the network's energies and forces is chosen.

``"reference"``
    mlcg-style plain PyTorch (:class:`flashschnet.nn.schnet.CGSchNet`): per-edge basis and filter tensors
    materialised, scatter-add aggregation, autograd forces, neighbour list rebuilt every call. The oracle the
    other backends are tested against.
``"torch"``
    The fused algorithm in plain PyTorch for CPUs (:mod:`flashschnet.fused.torch_engine`): a half neighbour
    list with a Verlet skin (each filter evaluated once per unordered pair), edges in chunks (bounded peak
    memory), deterministic reductions, exact forces from a hand-written backward that recomputes the filters.
``"triton"``
    The fused Triton kernels (:mod:`flashschnet.fused.triton_engine`, :mod:`flashschnet.kernels`): tiled half
    lists, the basis and filter network in registers, CSR segment reductions without atomics, forward and
    backward. Runs on CUDA, and on CPU tensors under ``TRITON_INTERPRET=1`` (tests only: slow).

Default: ``"triton"`` on CUDA, ``"torch"`` elsewhere. Both fused backends run through one custom op per step,
``flashschnet::energy_forces`` (:mod:`flashschnet.fused`).
"""
from __future__ import annotations

import os
from typing import Optional

from .errors import InputError
from .names import BACKENDS


def default_backend(device: Optional[str] = None) -> str:
    """``"triton"`` for CUDA devices, ``"torch"`` otherwise."""
    return "triton" if device is not None and str(device).startswith("cuda") else "torch"


def resolve_backend(name: Optional[str] = None, device: Optional[str] = None) -> str:
    """Return the backend to use.

    Parameters
    ----------
    name : str or None
        A key of :data:`flashschnet.names.BACKENDS`, or None for :func:`default_backend` of ``device``.
    device : str or None
        Where the model will run (``"cpu"``, ``"cuda"``, ``"cuda:1"``); only used to choose the default and
        to check that ``"triton"`` can run there.
    """
    if name is None:
        return default_backend(device)
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
    if name == "triton" and device is not None and not str(device).startswith("cuda") \
            and os.environ.get("TRITON_INTERPRET") != "1":
        raise InputError(f"backend 'triton' needs a CUDA device (or TRITON_INTERPRET=1 for testing); "
                         f"{gpu_hint()}; use backend='torch' on CPU")
    return name


#: the CUDA major versions with an extra of this package (``cuda12``, ``cuda13``), by torch's CUDA build
CUDA_MAJORS = ("12", "13")


def cuda_extra(torch_cuda: Optional[str] = "installed") -> str:
    """The extra of this package that brings the OpenMM CUDA platform and openmm-torch's CUDA plugin for a torch
    built with CUDA ``torch_cuda`` (``torch.version.cuda``; default: the installed torch's): ``"cuda12"`` or
    ``"cuda13"`` by its major version (``"cuda13"`` for a CPU build or another version: the PyPI default of torch
    2.11 on Linux is CUDA 13)."""
    if torch_cuda == "installed":
        import torch

        torch_cuda = torch.version.cuda
    major = (torch_cuda or "13").split(".")[0]
    return f"cuda{major}" if major in CUDA_MAJORS else "cuda13"


def gpu_hint() -> str:
    """Why no CUDA device is usable here, and what to install, in one clause."""
    import torch

    if torch.version.cuda is None:
        return (f"this torch {torch.__version__} is a CPU build: on a GPU machine install torch with CUDA, then "
                f"pip install 'flashschnet[{cuda_extra()}]' (flashschnet-doctor checks the set-up)")
    if not torch.cuda.is_available():
        return (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU here (no NVIDIA driver or "
                f"device); on a GPU machine: pip install 'flashschnet[{cuda_extra()}]' (flashschnet-doctor "
                f"checks the set-up)")
    return f"pip install 'flashschnet[{cuda_extra()}]' for the OpenMM CUDA platform"
