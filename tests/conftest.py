"""Shared test helpers and fixtures: where the test data lives, the mlcg oracles, fixtures several test files use.

The mlcg oracle files and the structures are copied into ``tests/data/`` so a fresh clone tests fully;
``../shared/`` (beside the checkout) is the source of truth they were copied from.

The test tree mirrors the source tree (``model/``, ``openmm/``, ``scripts/``, ``tools/``) plus ``integration/`` and
``fuzz/``. Every test folder is a package (``__init__.py``), so a test module's name is its path
(``tests.openmm.benchmark.test_sampling``): two source modules of one name (``openmm/sampling.py``,
``openmm/benchmark/sampling.py``) each get their mirrored test file. Tests import this module as ``tests.conftest``
and the helpers that are not fixtures from ``tests.helpers``; put shared fixtures here.
"""
import os
from pathlib import Path

import pytest

# tests/run.sh runs the suite in several processes (pytest-xdist, one per core): each one computes on one PyTorch
# thread, so the processes do not fight over the cores (set before torch starts its thread pool)
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")

import torch  # noqa: E402,F401  (torch before openmmtorch, everywhere)

if XDIST_WORKER:
    torch.set_num_threads(1)

# Without a GPU the Triton kernels run in Triton's interpreter (on CPU tensors). It must be set before
# triton compiles anything; flashschnet imports its kernels lazily, at the first launch.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Property-based tests (hypothesis) run derandomized by default -- the same examples on every run, so CI's verdict
# never depends on the draw -- and without a database of past failures. ``HYPOTHESIS_PROFILE=explore`` draws new
# examples each run (and remembers failures in .hypothesis/), for looking for new bugs by hand; a failure found
# that way becomes an ``@example`` of its test.
from hypothesis import settings as _hypothesis_settings

_hypothesis_settings.register_profile("ci", derandomize=True, database=None)
_hypothesis_settings.register_profile("explore", derandomize=False)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The filter-table cache (flashschnet.tablecache) of this test process: a fresh folder, never the user's
# ~/.cache/flashschnet (its children, benchmark workers and Dask workers, inherit it); removed at exit
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

CACHE_DIR = tempfile.mkdtemp(prefix="flashschnet-test-cache-")
os.environ["FLASHSCHNET_CACHE_DIR"] = CACHE_DIR
atexit.register(shutil.rmtree, CACHE_DIR, True)

from flashschnet.names import BACKENDS  # noqa: E402

#: backends by kind, from the registry (flashschnet.names.BACKENDS), never a hand list: the fused ones (each is
#: checked against "reference"), and those the CPU suite runs in OpenMM Contexts and end-to-end tests ("triton"
#: runs on a CPU only interpreted: the kernel tests cover it)
FUSED_BACKENDS = [b for b in BACKENDS if b != "reference"]
CPU_BACKENDS = [b for b in BACKENDS if b != "triton" or torch.cuda.is_available()]

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = ROOT.parent / "shared"
STRUCTURES = DATA / "structures"
EXAMPLES = ROOT / "examples"
PRIOR_ORACLE = next((p for p in (DATA / "oracles" / "mlcg_prior_cln.pt",
                                 SHARED / "oracles" / "mlcg" / "mlcg_prior_cln.pt") if p.exists()),
                    DATA / "oracles" / "mlcg_prior_cln.pt")
needs_prior_oracle = pytest.mark.skipif(not PRIOR_ORACLE.exists(),
                                        reason=f"mlcg prior oracle not found at {PRIOR_ORACLE}")


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
def tiny_run(tmp_path_factory):
    """A tiny flashschnet-simulate run of trp-cage (placeholder model): one replica, 20 steps, a frame every 10.
    Shared by the tests that read one (analysis write faults, backmapping): do not write into it (copy it first)."""
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path_factory.mktemp("tiny") / "run"
    assert simulate([str(EXAMPLES / "1L2Y_trpcage.pdb"), "--model", str(EXAMPLES / "trpcage_placeholder.pt"),
                     "--steps", "20", "--report-interval", "10", "--out", str(out), "--seed", "3", "--quiet",
                     "--threads", "1"]) == 0
    return out


@pytest.fixture(scope="session")
def tempering_run(tmp_path_factory):
    """A tiny parallel-tempering run of trp-cage (placeholder model): 3 temperatures 300-400 K, 40 steps, an
    exchange and a frame every 10 steps. Shared by the tests that read one (thermodynamics, backmapping): do not
    write into it (copy it first)."""
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path_factory.mktemp("tempering") / "run"
    assert simulate([str(EXAMPLES / "1L2Y_trpcage.pdb"), "--model", str(EXAMPLES / "trpcage_placeholder.pt"),
                     "--steps", "40", "--temperatures", "300:400:3", "--exchange-interval", "10", "--report-interval",
                     "10", "--out", str(out), "--seed", "3", "--quiet", "--threads", "1"]) == 0
    return out


@pytest.fixture
def write_faults(monkeypatch):
    """Fault injection for writes (:class:`helpers.faults.WriteFaults`): e.g.
    ``write_faults.fail("checkpoint.chk.tmp", module=flashschnet.atomic, nth=2)`` makes the second checkpoint save
    fail with ENOSPC; undone after the test."""
    from tests.helpers.faults import WriteFaults

    return WriteFaults(monkeypatch)


@pytest.fixture
def poison_buffers(monkeypatch):
    """The Triton launchers' output and partial buffers start as NaN (instead of uninitialised memory), so a
    kernel that misses an element fails the comparison with its reference."""
    from flashschnet.fused import workspace

    def poisoned(shape, like, dtype=None):
        out = torch.empty(shape, dtype=dtype or like.dtype, device=like.device)
        return out.fill_(float("nan")) if out.is_floating_point() else out

    monkeypatch.setattr(workspace, "_empty", poisoned)


@pytest.fixture(scope="session")
def fixture_a():
    """mlcg oracle fixture A (StandardSchNet on chignolin; see tests/data/oracles/README.txt)."""
    return torch.load(oracle_path("mlcg_schnet_A.pt"), weights_only=True)


@pytest.fixture(scope="module")
def model64():
    """The network with the reference (mlcg-style autograd) backend: the tests using it check it against mlcg itself."""
    from flashschnet import load_model

    return load_model(oracle_path("mlcg_schnet_A.pt"), dtype=torch.float64, backend="reference").network


@pytest.fixture(scope="module")
def prior_oracle():
    """mlcg's prior oracle for chignolin (``mlcg_prior_cln.pt``: per-term energies and forces)."""
    return torch.load(PRIOR_ORACLE, weights_only=True)


@pytest.fixture(scope="module")
def oracle_priors(prior_oracle):
    """The PriorSet read from the prior oracle."""
    from flashschnet.priors import PriorSet

    return PriorSet.from_mlcg_oracle(prior_oracle)


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a whole test module (the CI machine is shared); restored afterwards. A module
    uses it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def rel_error(a, b) -> float:
    """max |a - b| / max |b|, in float64 (tensors or arrays)."""
    a = torch.as_tensor(a).detach().double()
    b = torch.as_tensor(b).detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def assert_forces_match_finite_differences(model, pos, bead_types, points, h: float = 1e-5, tol: float = 1e-7):
    """Central differences of ``model.energy_forces`` energies (one replica, float64) at ``points`` =
    [(bead, axis)] against its forces: |fd - f| < tol * max(1, |f|)."""
    _, f = model.energy_forces(pos, bead_types)
    for i, a in points:
        p, q = pos.clone(), pos.clone()
        p[0, i, a] += h
        q[0, i, a] -= h
        fd = -(model.energy_forces(p, bead_types)[0] - model.energy_forces(q, bead_types)[0]) / (2 * h)
        assert abs(float(fd) - float(f[0, i, a])) < tol * max(1.0, abs(float(f[0, i, a]))), (i, a)


def torchforce_energy_forces(model, pos_angstrom, bead_types, platform: str = "Reference"):
    """Energy (kcal/mol, all replicas) and forces [R*N, 3] (kcal/mol/A) of ``model`` as an OpenMM TorchForce
    (packed replicas, masses 12) at positions [R, N, 3] in Angstrom (an mlcg-unit model)."""
    import openmm
    import openmm.unit as u

    from flashschnet.openmm.force import make_network_force

    R = pos_angstrom.shape[0]
    system = openmm.System()
    for _ in range(R * len(bead_types)):
        system.addParticle(12.0)
    system.addForce(make_network_force("torch", model, bead_types, R))
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))
    ctx.setPositions((pos_angstrom.reshape(-1, 3) * 0.1).numpy())
    st = ctx.getState(getEnergy=True, getForces=True)
    energy = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole) / 4.184
    forces = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer) / 41.84
    return energy, forces
