"""flashschnet.fused.tile_flags: the triton engine's tile-pair flags rebuilt on the device, per replica, only when
one of its beads moved more than half the skin (or is NaN), counted per replica; above MAX_FLAG_KERNEL_TILES the
same decisions by PyTorch ops (update_tiles_torch), equal to the flag kernel's and the reference's (run on CPU
under TRITON_INTERPRET=1). The flag kernel itself: tests/model/kernels/test_tiles.py."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.fused.tile_flags import MAX_FLAG_KERNEL_TILES, update_tiles, update_tiles_torch  # noqa: E402
from flashschnet.fused.workspace import BLOCK, Workspace  # noqa: E402
from tests.helpers import standalone_ops as ops  # noqa: E402
from tests.helpers import cfconv_reference as ref  # noqa: E402
from tests.helpers.kernel_cases import chain  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def test_tile_flags_rebuilt_per_replica_only_past_half_skin():
    """update_tiles rebuilds a replica's flags (counted on the device) only when one of its beads moved more
    than half the skin, or is NaN; the other replicas keep theirs."""
    pos = chain(2, 40, torch.float64)
    ws = Workspace(2, 40, 4, torch.float64, pos.device)
    update_tiles(ws, pos, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 1]
    moved = pos.clone()
    moved[0, :, 0] += 0.9                                # < skin/2: no rebuild
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 1]
    moved[1, 5, 0] += 1.2                                # replica 1 now moved > skin/2
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [1, 2]
    moved[0, 3, 1] = float("nan")
    update_tiles(ws, moved, 6.0, 2.0)
    update_tiles(ws, moved, 6.0, 2.0)
    assert ws.builds.tolist() == [3, 2]                   # NaN: rebuilt every call, never frozen


def test_flags_of_many_tiles_by_torch_ops_equal_the_kernel():
    """Above MAX_FLAG_KERNEL_TILES the flags are built by PyTorch ops with the same decisions: same flags as the
    kernel and the reference, the same per-replica staleness (NaN included), the same build counts."""
    pos = chain(2, 70, torch.float64, step=3.0, seed=9)
    ws_k = Workspace(2, 70, 4, torch.float64, pos.device)
    ws_t = Workspace(2, 70, 4, torch.float64, pos.device)
    moved = pos.clone()
    moved[1, 4, 2] += 1.3
    nan = moved.clone()
    nan[0, 9, 0] = float("nan")
    for p in (pos, pos + 0.2, moved, nan):
        update_tiles(ws_k, p, 6.0, 2.0)
        update_tiles_torch(ws_t, p, 6.0, 2.0)
        assert torch.equal(ws_k.flags, ws_t.flags)
        assert torch.equal(ws_k.builds, ws_t.builds)
    assert ws_t.builds.tolist() == [2, 2]
    big = chain(1, 16 * (MAX_FLAG_KERNEL_TILES + 2) - 5, torch.float64, seed=3)
    got = ops.tile_flags(big, 10.0)                     # takes the torch path (more tiles than the kernel's cap)
    T = MAX_FLAG_KERNEL_TILES + 2
    assert got.shape == (1, T * (T + 1) // 2) and 0 < int(got.sum()) < got.numel()
    assert torch.equal(got, ref.tile_flags_ref(big, 10.0, BLOCK))
