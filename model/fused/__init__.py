"""The fused path of CGSchNet: one package for what the ``"torch"`` and ``"triton"`` backends share.

The packed weights it reads are the network's (:mod:`flashschnet.nn.layout`: named fields and a version, defined
once, packing and unpacking); this package imports :mod:`flashschnet.nn`, never the other way.

* :mod:`~flashschnet.fused.nodes` -- the node-level forward and hand-written backward in PyTorch (the torch
  engine's step, and the plain-PyTorch reference of the triton engine's fused node kernels);
* :mod:`~flashschnet.fused.engine` -- the edge-engine interface, the engine registry, and which engine runs;
* :mod:`~flashschnet.fused.torch_engine` -- the ``"torch"`` edge engine (half pair list, chunks);
* :mod:`~flashschnet.fused.triton_engine` -- the ``"triton"`` edge engine on the Triton kernels of
  :mod:`flashschnet.kernels` (triton is imported only when that engine is first used), built on
  :mod:`~flashschnet.fused.plans` (what a CFConv kernel reads that does not change from step to step),
  :mod:`~flashschnet.fused.node_plans` (the same for the fused node kernels),
  :mod:`~flashschnet.fused.workspace` (persistent buffers), :mod:`~flashschnet.fused.launches` (one launch per
  kernel, and every launch a step can make: what ``tools/device/gpu_fit.py`` compiles) and
  :mod:`~flashschnet.fused.tile_flags` (the tile-pair flags and work lists, by kernel or PyTorch ops);
* :mod:`~flashschnet.fused.graph` -- opt-in CUDA-graph replay of a step;
* :mod:`~flashschnet.fused.op` -- the ``flashschnet::energy_forces`` and ``energy_forces_scaled`` custom ops,
  one call per step;
* :mod:`~flashschnet.fused.emulation` -- the triton kernels' tf32/bf16 filter products emulated on a CPU
  (``tools/device/tf32_accuracy.py``).

Importing this package registers the op, so a TorchScript network calling it (e.g. inside an openmm-torch
``TorchForce``, or a serialized System) can run; ``import flashschnet`` imports it.
"""
from .op import clear_engine_cache, energy_forces, energy_forces_scaled

__all__ = ["clear_engine_cache", "energy_forces", "energy_forces_scaled"]
