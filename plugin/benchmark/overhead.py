"""OpenMM's share of a step: the same ``Simulation`` loop as the network rows with a network force that does
nothing.

:class:`NullForce` is a TorchScript-able module of the network module's shape -- OpenMM's positions ``[R*N, 3]`` in,
a zero energy and zero forces ``[R*N, 3]`` out -- that :func:`null_loop` puts into the System in the network's
place (an openmm-torch ``TorchForce`` with ``setOutputsForces(True)``, with or without openmm-torch's CUDA graphs,
or an ``openmm.PythonForce``) and times with :func:`.measure.openmm_loop` (LangevinMiddle 4 fs, the same
particles, masses, platform, warm-up and steps). Its ms per step is what OpenMM and openmm-torch cost per step
(the integrator, the force's hand-over of positions and forces, the launches); a network row's ms per step minus
it is the network's part.

    from flashschnet.openmm.benchmark.overhead import null_loop
    null_loop({"pdb": "bpti.pdb", "device": "cuda", "replicas": 64, "steps": 50, "warmup": 3, "threads": 1,
               "dtype": "float32", "network_force": "torch", "torch_cuda_graph": True})
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
from torch import nn

__all__ = ["NullForce", "null_module", "null_loop"]


class NullForce(nn.Module):
    """TorchScript-able: positions ``[R*N, 3]`` -> (a zero energy ``[]``, zero forces ``[R*N, 3]``), in the
    positions' dtype and device.

    Parameters
    ----------
    device : str or torch.device
        Where the module lives: the device a PythonForce copies OpenMM's positions to (its one parameter, an
        unused zero, says where; openmm-torch moves a TorchForce's module to the Context's device itself).
    """

    def __init__(self, device="cpu"):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(1, device=device), requires_grad=False)

    def forward(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        energy = torch.zeros((), dtype=positions.dtype, device=positions.device)
        return energy, torch.zeros_like(positions)


def null_module(device="cpu", python: bool = False):
    """A :class:`NullForce` on ``device``: eager for a PythonForce (``python``), else scripted for a TorchForce."""
    module = NullForce(device).eval()
    return module if python else torch.jit.script(module)


def null_loop(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`.measure.openmm_loop` of configuration ``cfg`` with the do-nothing force in the network's place
    (its ``network_force`` and ``torch_cuda_graph`` decide how OpenMM calls it; the model loaded for the System's
    checks is the reference backend's, exact: nothing of it runs). The measurement gets ``network`` saying so."""
    from .measure import openmm_loop

    python = cfg.get("network_force", "torch") == "python"
    base = dict(cfg, backend="reference", compress="none", quantize="none", matmul="auto", cuda_graph=False)
    out = openmm_loop(base, module=null_module(cfg["device"], python))
    out["network"] = ("none: a do-nothing " + ("openmm.PythonForce" if python else "TorchForce")
                      + " (zero energy, zero forces)")
    return out
