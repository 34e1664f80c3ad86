"""The fused path of CGSchNet: one package for what the ``"torch"`` and ``"triton"`` backends share.

* :mod:`~flashschnet.fused.layout` -- the packed weight layout, defined once (packing and unpacking);
* :mod:`~flashschnet.fused.driver` -- the node-level forward and hand-written backward;
* :mod:`~flashschnet.fused.torch_engine` -- the edge engine in PyTorch (half pair list, chunks);
* :mod:`~flashschnet.fused.triton_engine` and :mod:`~flashschnet.fused.triton_ops` -- the edge engine on the
  Triton kernels of :mod:`flashschnet.kernels` (triton is imported only when that engine is first used);
* :mod:`~flashschnet.fused.op` -- the ``flashschnet::energy_forces`` custom op, one call per step.

Importing this package registers the op, so a TorchScript network calling it (e.g. inside an openmm-torch
``TorchForce``, or a serialized System) can run; ``import flashschnet`` imports it.
"""
from .op import clear_engine_cache, energy_forces

__all__ = ["clear_engine_cache", "energy_forces"]
