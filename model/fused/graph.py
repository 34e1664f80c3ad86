"""Opt-in CUDA-graph replay of a fused step (``CGSchNet(..., cuda_graph=True)``).

A step of the triton engine allocates nothing but its outputs and never reads the device back to the host (tile
flags and work lists rebuilt on the device, persistent buffers, cached weights), so the whole ``energy_forces``
call -- every kernel launch -- can be captured once and replayed: one launch of a graph instead of the step's
kernel launches and their Python overhead.

:class:`GraphedStep` runs the first ``warmup`` calls eagerly (Triton compiles its kernels then), captures the
next one on a side stream into a ``torch.cuda.CUDAGraph`` with static input and output tensors, and replays
it from then on: the positions are copied into the static input, the graph is replayed and clones of the
static outputs are returned. A call with other bead types (another tensor or an in-place change) or other unit
scales captures again. Graphs need CUDA: on a CPU nothing is captured and every call runs eagerly.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import torch


class GraphedStep:
    """Capture-and-replay wrapper of ``step(positions, bead_types) -> (energies, forces)``.

    Parameters
    ----------
    step : callable
        The eager step ``step(positions, bead_types, scales) -> tuple of tensors``; it must allocate its outputs
        afresh or in a buffer it owns, and not synchronise.
    warmup : int
        Eager calls before the capture (default 2).
    """

    def __init__(self, step: Callable[..., Tuple[torch.Tensor, ...]], warmup: int = 2):
        self.step, self.warmup = step, int(warmup)
        self.calls = 0
        self.graph: Optional["torch.cuda.CUDAGraph"] = None
        self.captures = 0
        self._types_key = None

    def __call__(self, positions: torch.Tensor, bead_types: torch.Tensor,
                 scales: Sequence[float] = (1.0, 1.0, 1.0)) -> Tuple[torch.Tensor, ...]:
        self.calls += 1
        scales = tuple(float(s) for s in scales)
        if not positions.is_cuda or self.calls <= self.warmup:
            return self.step(positions, bead_types, scales)
        key = (bead_types.data_ptr(), bead_types._version, tuple(positions.shape), scales)
        if self.graph is None or key != self._types_key:
            self._capture(positions, bead_types, scales)
            self._types_key = key
        self.static_pos.copy_(positions)
        self.graph.replay()
        return tuple(o.clone() for o in self.outputs)

    def _capture(self, positions: torch.Tensor, bead_types: torch.Tensor, scales: Tuple[float, ...]) -> None:
        self.static_pos = positions.detach().clone().contiguous()
        self.static_types = bead_types
        side = torch.cuda.Stream(device=positions.device)
        side.wait_stream(torch.cuda.current_stream(positions.device))
        with torch.cuda.stream(side):
            self.step(self.static_pos, self.static_types, scales)   # one more eager call on the capture stream
        torch.cuda.current_stream(positions.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.outputs = tuple(self.step(self.static_pos, self.static_types, scales))
        self.graph = graph
        self.captures += 1
