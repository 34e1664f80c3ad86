"""Opt-in CUDA-graph replay of a fused step (``CGSchNet(..., cuda_graph=True)``).

A step of the triton engine allocates nothing of its own and never reads the device back to the host (tile
flags rebuilt on the device, persistent buffers, cached weights), so the whole ``energy_forces`` call -- the
node-level PyTorch work and every kernel launch -- can be captured once and replayed: one launch of a graph
instead of ~40 kernel launches and their Python overhead per step.

:class:`GraphedStep` runs the first ``warmup`` calls eagerly (Triton compiles its kernels then), captures the
next one on a side stream into a ``torch.cuda.CUDAGraph`` with static input and output tensors, and replays
it from then on: the positions are copied into the static input, the graph is replayed and clones of the
static outputs are returned. A call with other bead types (another tensor or an in-place change) captures
again. Graphs need CUDA: on a CPU nothing is captured and every call runs eagerly.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch


class GraphedStep:
    """Capture-and-replay wrapper of ``step(positions, bead_types) -> (energies, forces)``.

    Parameters
    ----------
    step : callable
        The eager step; it must allocate its outputs afresh or in a buffer it owns, and not synchronise.
    warmup : int
        Eager calls before the capture (default 2).
    """

    def __init__(self, step: Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]],
                 warmup: int = 2):
        self.step, self.warmup = step, int(warmup)
        self.calls = 0
        self.graph: Optional["torch.cuda.CUDAGraph"] = None
        self.captures = 0
        self._types_key = None

    def __call__(self, positions: torch.Tensor, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        if not positions.is_cuda or self.calls <= self.warmup:
            return self.step(positions, bead_types)
        key = (bead_types.data_ptr(), bead_types._version, tuple(positions.shape))
        if self.graph is None or key != self._types_key:
            self._capture(positions, bead_types)
            self._types_key = key
        self.static_pos.copy_(positions)
        self.graph.replay()
        return self.out_e.clone(), self.out_f.clone()

    def _capture(self, positions: torch.Tensor, bead_types: torch.Tensor) -> None:
        self.static_pos = positions.detach().clone().contiguous()
        self.static_types = bead_types
        side = torch.cuda.Stream(device=positions.device)
        side.wait_stream(torch.cuda.current_stream(positions.device))
        with torch.cuda.stream(side):
            self.step(self.static_pos, self.static_types)           # one more eager call on the capture stream
        torch.cuda.current_stream(positions.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out_e, self.out_f = self.step(self.static_pos, self.static_types)
        self.graph = graph
        self.captures += 1
