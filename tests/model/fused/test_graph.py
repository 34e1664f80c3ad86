"""flashschnet.fused.graph: GraphedStep, the opt-in CUDA-graph replay of a fused step, runs the step eagerly on a
CPU (nothing captured)."""
from __future__ import annotations

import torch

from flashschnet.fused.graph import GraphedStep


def test_graphed_step_runs_eagerly_on_cpu():
    """CUDA graphs need CUDA: on a CPU the opt-in wrapper calls the step eagerly every time (the capture
    itself is exercised only by tools/device/device_benchmark.sh on a GPU)."""
    calls = []
    step = GraphedStep(lambda p, t, s: (calls.append(s), (p.sum(), p))[1], warmup=1)
    for _ in range(3):
        step(torch.zeros(1, 2, 3), torch.zeros(2, dtype=torch.long))
    assert calls == [(1.0, 1.0, 1.0)] * 3 and step.graph is None and step.captures == 0
