"""Shared test helpers: where the test data lives.

The mlcg oracle files and the structures are copied into ``tests/data/`` so a fresh clone tests fully;
``../shared/`` (beside the checkout) is the source of truth they were copied from.
"""
import os
from pathlib import Path

import pytest

import torch  # noqa: F401  (torch before openmmtorch, everywhere)

# Without a GPU the Triton kernels run in Triton's interpreter (on CPU tensors). It must be set before
# triton compiles anything; flashschnet imports its kernels lazily, at the first launch.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = ROOT.parent / "shared"
STRUCTURES = DATA / "structures"
EXAMPLES = ROOT / "examples"


def oracle_path(name: str) -> Path:
    """Path of an mlcg oracle file: ``tests/data/oracles/NAME``, else ``../shared/oracles/mlcg/NAME``;
    skips the test with the reason when neither exists."""
    for p in (DATA / "oracles" / name, SHARED / "oracles" / "mlcg" / name):
        if p.exists():
            return p
    pytest.skip(f"mlcg oracle {name} not found in tests/data/oracles/ nor in {SHARED}/oracles/mlcg/")


def platforms():
    """Names of the OpenMM platforms to test on: every one that this OpenMM build has."""
    import openmm

    return [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]


@pytest.fixture(scope="session")
def fixture_a():
    """mlcg oracle fixture A (StandardSchNet on chignolin; see tests/data/oracles/README.txt)."""
    return torch.load(oracle_path("mlcg_schnet_A.pt"), weights_only=True)


def rel_error(a, b) -> float:
    """max |a - b| / max |b|, in float64 (tensors or arrays)."""
    a = torch.as_tensor(a).detach().double()
    b = torch.as_tensor(b).detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))
