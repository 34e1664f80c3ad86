"""Backends: the one place where the implementation of the network's energy/forces is chosen.

``"reference"``
    mlcg-style plain PyTorch: per-edge basis and filter tensors materialised, scatter-add aggregation,
    autograd forces, neighbour list rebuilt every call. It is the oracle the fused backends are tested
    against, and runs anywhere PyTorch runs.

The fused Triton path (``"triton"``) and the memory-bounded CPU path (``"torch"``) are added here, behind
this same function, by the flash-path work; asking for them now raises a clear error.
"""
from __future__ import annotations

from typing import Optional

from ..errors import InputError

#: name -> one-line description of every backend this version provides
BACKENDS = {
    "reference": "mlcg-style PyTorch: materialised edge tensors, scatter-add, autograd forces",
}

#: backends that later versions add (named here so the error message can say so)
PLANNED_BACKENDS = ("torch", "triton")


def resolve_backend(name: Optional[str] = None, device: Optional[str] = None) -> str:
    """Return the backend to use.

    Parameters
    ----------
    name : str or None
        A key of :data:`BACKENDS`, or None for the default for ``device``.
    device : str or None
        ``"cpu"`` or ``"cuda"``; only used to choose the default.
    """
    if name is None:
        return "reference"
    if name in BACKENDS:
        return name
    if name in PLANNED_BACKENDS:
        raise InputError(
            f"backend {name!r} is not available in this version of flashschnet; use one of: {', '.join(BACKENDS)}"
        )
    raise InputError(f"unknown backend {name!r}; use one of: {', '.join(BACKENDS)}")
