"""The edge-engine interface of the fused path, the registry of engines, and which engine a step runs.

An *edge engine* runs a CGSchNet step for the custom op (:class:`EdgeEngine`): ``energy_forces(weights, positions,
bead_types, scales)`` -- the whole step, the triton engine's fused kernels or the node-level PyTorch pass of
:func:`flashschnet.fused.nodes.energy_forces_fused` around the engine -- and, for that pass, the edge-level part,
two calls per interaction block ``t`` after one ``prepare(positions)`` per step:

* ``aggregate(t, h) -> m``: ``m_i = sum_j W^t_ij * h_j`` over the pairs within the graph cutoff;
* ``backward(t, h, gm) -> (gh, grad_pos)``: ``gh_j = sum_i W^t_ij * gm_i`` (the same aggregation, the filter
  being symmetric) and ``dE/dr`` through the distance dependence of ``W^t`` (both cosine envelopes included),
  given ``gm = dE/dm``. The filters are recomputed, never stored.

``h``, ``gm``, ``m`` and ``gh`` are ``[R*N, F]``, ``grad_pos`` ``[R*N, 3]``, in the positions' dtype. A block's
filter ``W^t`` is a strategy each engine takes from the block's weights: the exact filter network
(:class:`~flashschnet.nn.layout.FilterWeights`) or a table of the distance
(:class:`~flashschnet.nn.layout.TableWeights`, a compressed model).

Engines (:func:`make_engine`, by name; :func:`register_engine` adds one): ``"torch"``
(:class:`~flashschnet.fused.torch_engine.TorchPairEngine`: half pair list, chunks; any device) and ``"triton"``
(:class:`~flashschnet.fused.triton_engine.TritonTileEngine`: the Triton kernels; triton is imported only when this
engine is made). A fused backend asks for the engine of its name; :func:`engine_for` says which one runs: the
triton backend's exact products (float64, or ``matmul="ieee"``) are not launched on a GPU, so there the torch
engine runs them.
"""
from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Protocol, Tuple

import torch

from ..nn.layout import BasisSpec, is_table
from .plans import exact_on_cuda, resolve_dot

_log = logging.getLogger("flashschnet")
_NOTED: set = set()


class EdgeEngine(Protocol):
    """What the op and :func:`~flashschnet.fused.nodes.energy_forces_fused` call (module docstring).
    ``graphable``: a step allocates nothing but its outputs and never reads the device back to the host, so the
    op may capture it in a CUDA graph (:mod:`flashschnet.fused.graph`)."""

    graphable: bool

    def energy_forces(self, weights, positions: torch.Tensor, bead_types: torch.Tensor,
                      scales: Tuple[float, float, float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(energies [R], forces [R, N, 3], total [])`` of a step, positions in units of ``scales[0]`` model
        lengths, outputs times ``scales[1]`` / ``scales[2]``."""

    def prepare(self, positions: torch.Tensor) -> None:
        """Take this step's positions ``[R, N, 3]`` (neighbour list or tile flags brought up to date)."""

    def aggregate(self, t: int, h: torch.Tensor) -> torch.Tensor:
        """``m = sum_j W^t_ij h_j`` of block ``t``."""

    def backward(self, t: int, h: torch.Tensor, gm: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(gh, dE/dpos)`` of block ``t`` given ``gm = dE/dm``."""


#: ``factory(basis, filters, skin, matmul) -> EdgeEngine``
EngineFactory = Callable[[BasisSpec, List, float, str], EdgeEngine]
_REGISTRY: Dict[str, EngineFactory] = {}


def register_engine(name: str, factory: EngineFactory) -> None:
    """Make ``factory`` the engine ``name`` (replacing any engine of that name)."""
    _REGISTRY[str(name)] = factory


def engine_names() -> List[str]:
    """The registered engines' names."""
    return list(_REGISTRY)


def make_engine(name: str, basis: BasisSpec, filters: List, skin: float, matmul: str = "auto") -> EdgeEngine:
    """A new engine ``name`` for these weights (:mod:`flashschnet.nn.layout`), Verlet ``skin`` (model length
    unit) and matrix-product precision ``matmul``."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ValueError(f"flashschnet: unknown edge engine {name!r} (known: {', '.join(_REGISTRY)})")
    return factory(basis, filters, float(skin), matmul)


def _torch_engine(basis: BasisSpec, filters: List, skin: float, matmul: str) -> EdgeEngine:
    from .torch_engine import TorchPairEngine

    return TorchPairEngine(basis, filters, skin=skin)


def _triton_engine(basis: BasisSpec, filters: List, skin: float, matmul: str) -> EdgeEngine:
    from .triton_engine import TritonTileEngine      # imports triton: only when asked for

    return TritonTileEngine(basis, filters, skin=skin, dot=matmul)


register_engine("torch", _torch_engine)
register_engine("triton", _triton_engine)


def engine_for(backend: str, device_type: str, dtype: torch.dtype, matmul: str, tables: bool,
               weight_dtype: Optional[torch.dtype] = None, note: bool = False) -> str:
    """The engine that runs a step of the fused ``backend`` on ``device_type`` ("cpu", "cuda") in ``dtype``.

    Parameters
    ----------
    backend : str
        "torch" or "triton" (any other name is returned as it is: the reference backend runs no edge engine).
    matmul : str
        The requested matrix-product precision (:data:`flashschnet.names.MATMULS`).
    tables : bool
        The filters are tables (a compressed model: no matrix products, run by the triton engine in float32 and
        float64 alike).
    weight_dtype : torch.dtype or None
        The storage dtype of channel-wise 16-bit filter weights (None: unquantized).
    note : bool
        Log a one-line note (once per case) when the engine is not the backend's.

    Returns
    -------
    str
        ``backend``, except ``"torch"`` for backend "triton" asked for exact products (float64, or
        ``matmul="ieee"``) on CUDA, which its kernels do not run there.
    """
    if backend != "triton" or device_type != "cuda" or tables:
        return backend
    if not exact_on_cuda(resolve_dot(matmul, dtype, weight_dtype)):
        return backend
    why = "float64" if dtype == torch.float64 else "matmul='ieee'"
    if note and why not in _NOTED:
        _NOTED.add(why)
        _log.warning(f"flashschnet: backend 'triton' with {why} on CUDA runs the torch engine (exact products; "
                     f"the tensor-core kernels take float32 with matmul auto/tf32/bf16/fp16)")
    return "torch"


def engine_of_filters(backend: str, device_type: str, dtype: torch.dtype, matmul: str, filters: List,
                      note: bool = False) -> str:
    """:func:`engine_for` of unpacked filter weights (:func:`flashschnet.nn.layout.unpack_params`)."""
    tables = bool(filters) and is_table(filters[0])
    weight_dtype = filters[0].A1q.dtype if filters and not tables and filters[0].A1q is not None else None
    return engine_for(backend, device_type, dtype, matmul, tables, weight_dtype, note)


def running_engine(model, device=None) -> str:
    """The engine a step of ``model`` (a :class:`~flashschnet.nn.schnet.CGSchNet` or a
    :class:`~flashschnet.loaded.LoadedModel`) runs on ``device`` (default: where its weights are) in its dtype:
    ``"torch"`` or ``"triton"`` by :func:`engine_for` (backend "triton" with exact products on CUDA: ``"torch"``),
    or ``"reference"`` for the reference backend (no edge engine). ``model.backend`` stays what was asked for."""
    net = getattr(model, "network", model)
    weight = net.embedding_layer.weight
    device_type = torch.device(device).type if device is not None else weight.device.type
    cfg = net.config
    quant = cfg.get("quantization")
    weight_dtype = getattr(torch, str(quant["dtype"])) if quant is not None else None
    return engine_for(net.backend, device_type, weight.dtype, net.matmul, cfg.get("compression") is not None,
                      weight_dtype)
