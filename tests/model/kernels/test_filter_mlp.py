"""flashschnet.kernels.filter_mlp: the kernels' radial basis (``_basis``, with its cosine envelope), evaluated on
given bead pairs by a probe kernel (tests/helpers/rbf_probe.py; run on CPU under TRITON_INTERPRET=1), against the
plain-PyTorch reference (gaussian and expnormal, K = 5 and 16, float32/float64) and against the model's own basis
modules through the launchers' convention (flashschnet.fused.plans.basis_coeffs). The filter network's layers and
products run in every CFConv kernel test (test_cfconv.py)."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton  # noqa: E402,F401  (a required dependency: it comes with torch)

from flashschnet.fused.launches import triton_available  # noqa: E402
from flashschnet.fused.plans import basis_coeffs  # noqa: E402
from tests.helpers import cfconv_reference as ref  # noqa: E402
from tests.helpers.rbf_probe import flash_rbf  # noqa: E402
from tests.helpers.kernel_cases import DTYPES, basis_params, chain, close  # noqa: E402

assert triton_available(), "Triton kernels cannot run here (no CUDA and TRITON_INTERPRET unset)"

# numpy deprecation noise from triton's interpreter, not from this package
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.fixture(autouse=True)
def poison(poison_buffers):
    """Every output and partial buffer starts as NaN: a missed element fails the comparison."""


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("basis", ["gaussian", "expnormal"])
@pytest.mark.parametrize("rbf_env", [True, False], ids=["env", "noenv"])
@pytest.mark.parametrize("K", [5, 16])
def test_flash_rbf(dtype, basis, rbf_env, K):
    rc = 6.0
    pos = chain(2, 20, dtype).reshape(-1, 3)
    g = torch.Generator().manual_seed(4)
    src = torch.randint(0, 40, (45,), generator=g)
    dst = torch.randint(0, 40, (45,), generator=g)
    offsets, coeffs, alpha = basis_params(basis, K, rc, dtype)
    d, e = flash_rbf(pos, src, dst, offsets, coeffs, rc, basis, alpha, rbf_env)
    dr, er = ref.flash_rbf_ref(pos, src, dst, offsets, coeffs, rc, basis, alpha, rbf_env)
    assert d.shape == (45,) and e.shape == (45, K) and d.dtype == dtype and e.dtype == dtype
    close(d, dr, dtype)
    close(e, er, dtype)


@pytest.mark.parametrize("kind", ["gaussian", "expnormal"])
@pytest.mark.parametrize("lower", [0.0, 0.5])
def test_flash_rbf_matches_model_basis_modules(kind, lower):
    """The launcher convention (basis_coeffs) reproduces the model's own basis modules, float64."""
    from flashschnet.nn import basis

    rc = 6.0
    spec = {"cutoff_lower": lower, "cutoff_upper": rc, "kind": "identity"}
    mod = basis.GaussianBasis(7, spec) if kind == "gaussian" else basis.ExpNormalBasis(7, spec)
    if kind == "gaussian":
        centers, widths, alpha = mod.offset, mod.coeff, 0.0
    else:
        centers, widths, alpha = mod.means, mod.betas, mod.alpha
    offsets, coeffs = basis_coeffs(kind, centers, widths)
    pos = chain(1, 12, torch.float64).reshape(-1, 3)
    src, dst = torch.arange(0, 11), torch.arange(1, 12)
    d, e = flash_rbf(pos, src, dst, offsets, coeffs, rc, kind, alpha, False, lower)
    close(e, mod(d), torch.float64)
