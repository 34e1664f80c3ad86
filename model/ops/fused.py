"""``flashschnet::energy_forces``: one custom op per step for the fused backends.

A TorchScript :class:`~flashschnet.nn.schnet.CGSchNet` with ``backend="torch"`` or ``"triton"`` (also the
one inside an openmm-torch ``TorchForce``) calls this op once per step with its weights packed into a list
(:meth:`CGSchNet.fused_params`); the op runs :func:`flashschnet.nn.fused.energy_forces_fused` with the
backend's edge engine and returns energies and exact forces (no autograd). One call per step keeps the
Python-op overhead (tens of microseconds) out of the inner loops.

Engines keep state between calls (the Verlet neighbour list), keyed by the backend, the storage and version
counter of every weight (each TorchForce/Context holds its own copy of the module) and the positions' shape.
An engine also holds the pair list of the call in progress, so calls that share one (several OpenMM Contexts
in separate threads running one model object, e.g. through ``openmm.PythonForce``) take turns on its lock;
calls on different engines run concurrently.

Packed layout of ``params``: ``[embedding, basis_centers, basis_widths]`` + per block
``[L1, L2, b2, L, b, A1, a1, A2]`` + the output MLP's ``[W, c]`` per hidden layer + ``[W_last]``. In a
quantized model (``ints[5] == 1``) every filter- and output-network weight ``W`` is the pair ``q, s``
(16-bit values [out, in], float32 scales [out]; see :mod:`flashschnet.nn.quant`).
``ints = [n_blocks, n_hidden_out_layers, basis_kind (0 gaussian, 1 expnormal), rbf_env, filt_env, quantized]``,
``floats = [alpha, basis_lower, rc_rbf, rc_filt, rc_graph, skin]``.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Tuple

import torch

from ..nn.fused import TorchPairEngine, energy_forces_fused, unpack_params

_ENGINES: Dict[tuple, object] = {}
_MAX_ENGINES = 64
_ENGINES_LOCK = threading.Lock()        # guards _ENGINES (threads may call the op concurrently)


def _engine(backend: str, params, ints, floats, positions):
    # Keyed by the storage and version counter of every weight: an in-place change of any weight gives a new
    # engine, and the engine keeps the weights alive, so their addresses cannot be reused by another model
    # while the entry exists.
    weights_key = tuple((p.data_ptr(), p._version) for p in params)
    key = (backend, params[0].device.type, tuple(positions.shape), positions.dtype, weights_key)
    with _ENGINES_LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            _, basis, filters = unpack_params(params, ints, floats)
            if backend == "torch":
                eng = TorchPairEngine(basis, filters, skin=floats[5])
            else:
                from .triton_engine import TritonTileEngine

                eng = TritonTileEngine(basis, filters, skin=floats[5])
            eng.pinned_weights = list(params)
            eng.lock = threading.Lock()          # one call at a time: the engine holds that call's pair list
            if len(_ENGINES) >= _MAX_ENGINES:
                _ENGINES.pop(next(iter(_ENGINES)))
            _ENGINES[key] = eng
    return eng


@torch.library.custom_op("flashschnet::energy_forces", mutates_args=())
def energy_forces(positions: torch.Tensor, bead_types: torch.Tensor, params: List[torch.Tensor],
                  ints: List[int], floats: List[float], backend: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` of a CGSchNet (model units) for positions ``[R, N, 3]``."""
    with torch.no_grad():
        eng = _engine(backend, params, ints, floats, positions)
        weights, _, _ = unpack_params(params, ints, floats, with_filters=False)
        with eng.lock:
            e, f = energy_forces_fused(weights, positions.contiguous(), bead_types, eng)
    return e, f


@energy_forces.register_fake
def _(positions, bead_types, params, ints, floats, backend):
    R, N = positions.shape[0], positions.shape[1]
    return positions.new_empty((R,)), positions.new_empty((R, N, 3))


def clear_engine_cache() -> None:
    """Forget all neighbour-list state (tests, or after moving a model between devices)."""
    with _ENGINES_LOCK:
        _ENGINES.clear()
