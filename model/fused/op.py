"""``flashschnet::energy_forces`` and ``flashschnet::energy_forces_scaled``: one custom op call per step for the
fused backends.

A TorchScript :class:`~flashschnet.nn.schnet.CGSchNet` with ``backend="torch"`` or ``"triton"`` (also the
one inside an openmm-torch ``TorchForce``) calls one of these ops once per step with its weights in the packed
layout (:mod:`flashschnet.nn.layout`); the op runs the step of the edge engine
:func:`flashschnet.fused.engine.engine_for` names for the backend, device, dtype and precision (made by the engine
registry, :func:`flashschnet.fused.engine.make_engine`): the triton engine's fused kernels, or the node-level pass
of :mod:`flashschnet.fused.nodes` around the torch engine. It returns energies and exact forces (no autograd).
``energy_forces`` works in the model's units; ``energy_forces_scaled`` takes positions in a caller's length unit
and returns energies, forces and their total in the caller's units (the factors come from the caller's one
place of unit conversion, e.g. :func:`flashschnet.openmm.units.conversion_factors`; the triton engine applies
them inside its first and last kernels). One call per step keeps the Python-op overhead (tens of microseconds)
out of the inner loops. The ops are registered when the package :mod:`flashschnet.fused` is imported
(``import flashschnet`` does it).

Engines keep state between calls (the Verlet neighbour list), keyed by the backend, the storage and version
counter of every weight (each TorchForce/Context holds its own copy of the module) and the positions' shape.
An engine also holds the pair list of the call in progress, so calls that share one (several OpenMM Contexts
in separate threads running one model object, e.g. through ``openmm.PythonForce``) take turns on its lock;
calls on different engines run concurrently.
"""
from __future__ import annotations

import logging
import threading
from typing import Dict, List, Tuple

import torch

from ..nn.layout import FloatField, step_options, unpack_params
from .engine import engine_of_filters, make_engine
from .graph import GraphedStep

_log = logging.getLogger("flashschnet")
_NOTED: set = set()

_ENGINES: Dict[tuple, object] = {}
_MAX_ENGINES = 64
_ENGINES_LOCK = threading.Lock()        # guards _ENGINES (threads may call the op concurrently)


def _engine(backend: str, params, ints, floats, positions):
    # Keyed by the storage and version counter of every weight: an in-place change of any weight gives a new
    # engine, and the engine keeps the weights alive, so their addresses cannot be reused by another model
    # while the entry exists.
    weights_key = tuple((p.data_ptr(), p._version) for p in params)
    matmul, cuda_graph = step_options(ints)
    key = (backend, params[0].device.type, tuple(positions.shape), positions.dtype, matmul, cuda_graph, weights_key)
    with _ENGINES_LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            weights, basis, filters = unpack_params(params, ints, floats)
            name = engine_of_filters(backend, positions.device.type, positions.dtype, matmul, filters, note=True)
            eng = make_engine(name, basis, filters, skin=floats[FloatField.SKIN], matmul=matmul)
            eng.engine_name = name
            eng.node_weights = weights       # cached: the output network is dequantized once, not per step
            eng.graphed = _graphed(eng, cuda_graph and positions.is_cuda)
            eng.pinned_weights = list(params)
            eng.lock = threading.Lock()          # one call at a time: the engine holds that call's pair list
            if len(_ENGINES) >= _MAX_ENGINES:
                _ENGINES.pop(next(iter(_ENGINES)))
            _ENGINES[key] = eng
    return eng


def _graphed(eng, wanted: bool):
    """A :class:`GraphedStep` around ``eng``'s step when a CUDA graph is ``wanted`` and the engine's step never
    synchronises (``eng.graphable``: the triton engine); else None -- with a one-line note when it was wanted: the
    torch engine reads its pair-list sizes back to the host, which a graph cannot capture."""
    if not wanted:
        return None
    if not getattr(eng, "graphable", False):
        if "graph" not in _NOTED:
            _NOTED.add("graph")
            _log.warning("flashschnet: cuda_graph is ignored by the torch engine (its step reads pair-list sizes "
                         "back to the host); it applies to the triton engine's tensor-core kernels")
        return None
    return GraphedStep(lambda p, t, s, e=eng: e.energy_forces(e.node_weights, p, t, s))


#: the scales of a step in the model's own units
_UNIT = (1.0, 1.0, 1.0)


def _step(positions: torch.Tensor, bead_types: torch.Tensor, params: List[torch.Tensor], ints: List[int],
          floats: List[float], backend: str, scales) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        eng = _engine(backend, params, ints, floats, positions)
        with eng.lock:
            if eng.graphed is not None:
                return eng.graphed(positions.contiguous(), bead_types, scales)
            return eng.energy_forces(eng.node_weights, positions.contiguous(), bead_types, scales)


#: the ops' schemas, defined with ``torch.library.Library`` rather than ``torch.library.custom_op``: its Python
#: wrapper (argument checks, autograd registration) cost ~35 us more per call, measured on a 97-bead step, and
#: these ops have no autograd of their own (forces are computed, not differentiated)
_LIB = torch.library.Library("flashschnet", "FRAGMENT")
_LIB.define("energy_forces(Tensor positions, Tensor bead_types, Tensor[] params, int[] ints, float[] floats, "
            "str backend) -> (Tensor, Tensor)")
_LIB.define("energy_forces_scaled(Tensor positions, Tensor bead_types, Tensor[] params, int[] ints, "
            "float[] floats, str backend, float[] scales) -> (Tensor, Tensor, Tensor)")


def energy_forces(positions: torch.Tensor, bead_types: torch.Tensor, params: List[torch.Tensor],
                  ints: List[int], floats: List[float], backend: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` of a CGSchNet (model units) for positions ``[R, N, 3]``."""
    e, f, _ = _step(positions, bead_types, params, ints, floats, backend, _UNIT)
    return e, f


def energy_forces_scaled(positions: torch.Tensor, bead_types: torch.Tensor, params: List[torch.Tensor],
                         ints: List[int], floats: List[float], backend: str,
                         scales: List[float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For positions ``[R, N, 3]`` in a unit of ``scales[0]`` model lengths: energies ``[R]`` x ``scales[1]``,
    forces ``[R, N, 3]`` x ``scales[2]`` and the energies' total ``[]``."""
    if len(scales) != 3:
        raise ValueError(f"flashschnet: scales must be [length, energy, force] factors, got {list(scales)}")
    return _step(positions, bead_types, params, ints, floats, backend, tuple(float(s) for s in scales))


_LIB.impl("energy_forces", energy_forces, "CompositeExplicitAutograd")
_LIB.impl("energy_forces_scaled", energy_forces_scaled, "CompositeExplicitAutograd")


@torch.library.register_fake("flashschnet::energy_forces")
def _(positions, bead_types, params, ints, floats, backend):
    R, N = positions.shape[0], positions.shape[1]
    return positions.new_empty((R,)), positions.new_empty((R, N, 3))


@torch.library.register_fake("flashschnet::energy_forces_scaled")
def _(positions, bead_types, params, ints, floats, backend, scales):
    R, N = positions.shape[0], positions.shape[1]
    return positions.new_empty((R,)), positions.new_empty((R, N, 3)), positions.new_empty(())


def clear_engine_cache() -> None:
    """Forget all neighbour-list state (tests, or after moving a model between devices)."""
    with _ENGINES_LOCK:
        _ENGINES.clear()
