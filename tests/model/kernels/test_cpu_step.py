"""flashschnet.kernels.cpu_step: the library builds here and its C structs are the size of their ctypes mirrors
(a field added to one and not the other would shift every pointer after it). What the step computes is tested
against the kernels called one at a time in tests/model/fused/test_cpu_step.py."""
from __future__ import annotations

import ctypes

from flashschnet.kernels.cpu_step import StepModel, StepWork, library


def test_the_step_builds_and_its_structs_match_their_mirrors():
    lib = library()
    assert lib is not None
    sizes = (ctypes.c_int64 * 2)()
    assert lib.step_struct_sizes(sizes) == 2
    assert (sizes[0], sizes[1]) == (ctypes.sizeof(StepModel), ctypes.sizeof(StepWork))


def test_the_verlet_check_rebuilds_past_half_the_skin_and_on_nan():
    import torch

    lib = library()
    ref = torch.zeros(5, 3)
    moved = lambda p: lib.moved_f32(5, p.data_ptr(), ref.data_ptr(), 0.25)    # noqa: E731 (half skin 0.5)
    p = ref.clone()
    p[3] = torch.tensor([0.3, 0.3, 0.0])                                      # 0.42 from where it was: kept
    assert moved(p) == 0
    p[4, 2] = 0.51                                                            # past half the skin
    assert moved(p) == 1
    p[4, 2] = float("nan")
    assert moved(p) == 1
