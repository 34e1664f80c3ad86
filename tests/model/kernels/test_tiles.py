"""flashschnet.kernels.tiles: the tile-pair flag kernel (``_tile_flags_kernel``, run on CPU under
TRITON_INTERPRET=1) equals its plain reference -- bounding spheres of 16-bead tiles -- and culls the far tiles of a
long chain while keeping the diagonal. The slots, pair blocks and the reduce kernel run in every CFConv kernel test
(test_cfconv.py); when the flags are rebuilt: tests/model/fused/test_tile_flags.py."""
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
