"""flashschnet.kernels.tiles: the tile-pair flag kernel (``_tile_flags_kernel``, run on CPU under
TRITON_INTERPRET=1) equals its plain reference -- bounding spheres of 16-bead tiles -- and culls the far tiles of a
long chain while keeping the diagonal; its work list is the active slots compacted in slot order with their count
(1, 2, 3 beads; NaN positions keep every slot), and it writes the positions in the model's unit. The slots, items,
partials and the reduce kernel run in every CFConv kernel test (test_cfconv.py, test_filter_table.py); when the
flags are rebuilt: tests/model/fused/test_tile_flags.py."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.fused.workspace import BLOCK  # noqa: E402
from tests.helpers import standalone_ops as ops  # noqa: E402
from tests.helpers import cfconv_reference as ref  # noqa: E402
from tests.helpers.kernel_cases import chain  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


def test_tile_flags_match_reference_and_cull():
    """The flag kernel (bounding spheres of 16-bead tiles) equals its plain reference, and far tiles of a
    long chain are culled."""
    pos = chain(2, 100, torch.float64, seed=7)
    for radius in (4.0, 9.0, 30.0):
        got = ops.tile_flags(pos, radius)
        assert torch.equal(got, ref.tile_flags_ref(pos, radius, BLOCK)), radius
    flags = ops.tile_flags(pos, 7.0)
    T = 7
    assert flags.shape == (2, T * (T + 1) // 2)
    assert 0 < int(flags.sum()) < flags.numel()          # some tile pairs culled, the diagonal kept
    assert all(int(flags[r, I * T - I * (I - 1) // 2]) == 1 for r in range(2) for I in range(T))


@pytest.mark.parametrize("R, N, radius", [(2, 100, 7.0), (1, 1, 5.0), (2, 2, 5.0), (3, 3, 0.5), (2, 40, 30.0)])
def test_work_list_is_the_active_slots_in_slot_order(R, N, radius):
    """list[r*S + k] = I * 65536 + J of the k-th active slot (slot order), counts[r] = the active slots; entries
    past the count are never written (they keep the workspace's initial zeros)."""
    pos = chain(R, N, torch.float64, seed=N)
    flags, lst, counts = ops.work_list(pos, radius)
    T = (N + BLOCK - 1) // BLOCK
    want, want_counts = ref.work_list_ref(flags, T)
    assert counts.tolist() == want_counts
    assert torch.equal(flags, ref.tile_flags_ref(pos, radius, BLOCK))
    for r in range(R):
        assert lst[r, :counts[r]].tolist() == want[r]
        assert not lst[r, counts[r]:].any()


def test_nan_positions_keep_every_slot_and_positions_are_scaled():
    """A NaN bead makes every slot of its replica active (the work list then covers the whole replica), and the
    flag kernel writes the step's positions times the length scale into the workspace."""
    from flashschnet.fused.tile_flags import update_tiles
    from flashschnet.fused.workspace import Workspace

    pos = chain(2, 40, torch.float64, seed=1)
    pos[1, 7, 2] = float("nan")
    ws = Workspace(2, 40, 32, torch.float64, pos.device)
    update_tiles(ws, pos * 0.1, 1.0, 0.0, length_scale=10.0)
    T, S = 3, 6
    assert ws.counts.tolist()[1] == S and ws.worklist[S:2 * S].tolist() == [I * 65536 + J for I in range(T)
                                                                            for J in range(I, T)]
    assert torch.allclose(ws.pos[0], pos[0], rtol=1e-15, atol=0) and torch.isnan(ws.pos[1, 7, 2])
    assert 0 < ws.counts.tolist()[0] < S                                       # a clean replica culls
