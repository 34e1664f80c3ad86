"""Several OpenMM Contexts in separate Python threads, all running ONE model, give bitwise the same results as
the same Contexts run one after the other.

Three ways of sharing the model: one-replica :func:`build_system` Systems sharing one scripted network module
(``module=``, openmm-torch TorchForce), plain :func:`build_system` Systems built from one model
object (TorchForce), and ``network_force="python"`` (``openmm.PythonForce`` Systems calling the one model
object from Python). Both network backends that run on CPU ('torch', 'reference'); Reference and CPU
platforms (CUDA and OpenCL when present). K threads create their Contexts, meet at a barrier so the steps
really overlap, and run M steps, fetching positions, energy and forces every few steps; each thread starts from
its own positions (the PDB, shifted by its thread number) with its own integrator seed, so results crossing
between threads would show. Every join has a timeout (a deadlock fails the test instead of hanging it).

The Reference platform runs a VerletIntegrator: its Langevin integrators draw from one process-wide random
number generator (``SimTKOpenMMUtilities``), shared by all Reference Contexts, so concurrent Reference Langevin
runs cannot repeat sequential ones whatever the force does. The CPU platform keeps a generator per Context and
runs LangevinMiddleIntegrator with a seed.

The bug this found: the fused backends' custom op keeps its pair list in an engine cached per weight storage;
Contexts sharing one model object (PythonForce) shared the engine, and concurrent calls overwrote each other's
pair list (forces off by up to ~600 kJ/mol/nm). Fixed in :mod:`flashschnet.fused.op` with a lock per force field.
"""
from __future__ import annotations

import threading

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from tests.conftest import EXAMPLES, platforms

import flashschnet
from flashschnet.openmm import build_system, network_module
from flashschnet.openmm.system import replica_positions_nm
from flashschnet.options import default_network

PDB = EXAMPLES / "1L2Y_trpcage.pdb"
MODEL = EXAMPLES / "trpcage_placeholder.pt"
K = 3                 # threads (Contexts)
M = 6                 # steps per run, state fetched every STRIDE steps
STRIDE = 3
REPEATS = 2
JOIN_TIMEOUT_S = 300
AVAILABLE = platforms()
GPU = ("CUDA", "OpenCL")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def mol():
    return flashschnet.map_pdb(str(PDB))


def _platform(name: str):
    if name not in AVAILABLE:
        pytest.skip(f"OpenMM platform {name} is not available here (available: {', '.join(AVAILABLE)})")
    return openmm.Platform.getPlatformByName(name)


def _systems(kind: str, mol, model):
    """K Systems sharing one model object: the default network (float32 filter tables for the torch backend) made
    once, then each System built from it as given (``compress="none"``: build_system would make its own copy)."""
    model = default_network(model)
    if kind == "replica_systems":
        module = network_module(model, torch.as_tensor(mol.bead_types, dtype=torch.long), 1)
        return [build_system(mol, model, 1, module=module) for _ in range(K)]
    return [build_system(mol, model, 1, network_force="python" if kind == "python" else "torch", compress="none")
            for _ in range(K)]


def _start(mol, k: int) -> np.ndarray:
    """Thread k's start: the PDB shifted by 0.01 nm * k along a thread-specific direction (and so its own
    neighbour list and forces)."""
    pos = replica_positions_nm(mol, 1)
    rng = np.random.default_rng(100 + k)
    return pos + 0.01 * k * rng.normal(size=pos.shape)


class Run:
    """One Context of one System: create, optionally wait at a barrier, step and record."""

    def __init__(self, system, platform_name: str, start: np.ndarray, seed: int):
        self.system, self.platform_name, self.start, self.seed = system, platform_name, start, seed

    def _context(self):
        if self.platform_name == "Reference":
            integrator = openmm.VerletIntegrator(0.002 * u.picosecond)
        else:
            integrator = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.004 * u.picosecond)
            integrator.setRandomNumberSeed(self.seed)
        props = {"Threads": "1"} if self.platform_name == "CPU" else {}
        context = openmm.Context(self.system, integrator, openmm.Platform.getPlatformByName(self.platform_name),
                                 props)
        context.setPositions(self.start)
        context.setVelocitiesToTemperature(300 * u.kelvin, self.seed)
        return context, integrator

    @staticmethod
    def _record(context):
        st = context.getState(getPositions=True, getEnergy=True, getForces=True)
        return (st.getPositions(asNumpy=True).value_in_unit(u.nanometer).copy(),
                st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole),
                st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer).copy())

    def steps(self, barrier=None):
        context, integrator = self._context()
        if barrier is not None:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
        out = [self._record(context)]
        for _ in range(M // STRIDE):
            integrator.step(STRIDE)
            out.append(self._record(context))
        return out

    def states(self, barrier=None, calls: int = 5):
        """Repeated getState(energy, forces) at the start, no stepping."""
        context, _ = self._context()
        if barrier is not None:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
        return [self._record(context) for _ in range(calls)]


def _concurrently(runs, method: str):
    """Call ``getattr(run, method)(barrier)`` for every run in its own thread; results in run order."""
    barrier = threading.Barrier(len(runs))
    results, errors = [None] * len(runs), []

    def work(i):
        try:
            results[i] = getattr(runs[i], method)(barrier)
        except BaseException as exc:      # reported by the main thread
            errors.append((i, repr(exc)))
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"threads {hung} did not finish within {JOIN_TIMEOUT_S} s (deadlock?)"
    assert not errors, errors
    return results


def _assert_same(seq, par, what: str):
    for k, (a_run, b_run) in enumerate(zip(seq, par)):
        assert len(a_run) == len(b_run)
        for j, ((pa, ea, fa), (pb, eb, fb)) in enumerate(zip(a_run, b_run)):
            where = f"{what}, thread {k}, record {j}"
            assert ea == eb, f"{where}: energy {ea!r} vs {eb!r}"
            assert np.array_equal(fa, fb), f"{where}: forces differ by up to {np.abs(fa - fb).max():.3g} kJ/mol/nm"
            assert np.array_equal(pa, pb), f"{where}: positions differ by up to {np.abs(pa - pb).max():.3g} nm"


def _runs(kind, backend, platform_name, mol):
    _platform(platform_name)
    device = "cuda" if platform_name == "CUDA" else "cpu"
    model = flashschnet.load_model(str(MODEL), backend=backend, device=device)
    systems = _systems(kind, mol, model)
    return [Run(s, platform_name, _start(mol, k), seed=11 + k) for k, s in enumerate(systems)], model


#: every sharing kind with both backends on the CPU platform; on the others each kind once (the OpenMM side)
CASES = ([(kind, backend, "CPU") for kind in ("replica_systems", "build_system", "python")
          for backend in ("torch", "reference")]
         + [("replica_systems", "reference", p) for p in ("Reference", "CUDA", "OpenCL")]
         + [("build_system", "torch", p) for p in ("Reference", "CUDA", "OpenCL")]
         + [("python", "torch", p) for p in ("Reference", "CUDA", "OpenCL")])


@pytest.mark.parametrize("kind, backend, platform_name", CASES)
def test_threads_repeat_sequential_runs_bitwise(kind, backend, platform_name, mol):
    runs, model = _runs(kind, backend, platform_name, mol)
    assert model.backend == backend
    sequential = [r.steps() for r in runs]
    assert not np.array_equal(sequential[0][-1][0], sequential[1][-1][0])   # the threads' runs differ
    if platform_name in GPU:                         # GPU platforms: only as deterministic as they are alone
        again = [r.steps() for r in runs]
        try:
            _assert_same(sequential, again, "sequential repeat")
        except AssertionError as exc:
            pytest.skip(f"{platform_name} does not repeat a run bitwise even sequentially here ({exc})")
    for rep in range(REPEATS):
        _assert_same(sequential, _concurrently(runs, "steps"), f"{kind}/{backend}/{platform_name}, repeat {rep}")


@pytest.mark.parametrize("kind, backend", [("replica_systems", "reference"), ("python", "torch")])
def test_concurrent_get_state_calls(kind, backend, mol):
    """getState(getEnergy, getForces) hammered from K threads at once (CPU platform, different positions per
    Context) returns what each Context returns alone."""
    runs, _ = _runs(kind, backend, "CPU", mol)
    sequential = [r.states() for r in runs]
    for rep in range(REPEATS):
        _assert_same(sequential, _concurrently(runs, "states"), f"getState {kind}/{backend}, repeat {rep}")


def test_shared_model_engine_is_used_by_one_call_at_a_time(mol):
    """The fused op directly from threads on one model object (no OpenMM): every thread's energies and forces
    equal the single-threaded ones for its own positions -- the regression test of the engine lock."""
    model = flashschnet.load_model(str(MODEL), backend="torch")
    types = torch.as_tensor(mol.bead_types)
    starts = [torch.as_tensor(_start(mol, k) * 10.0, dtype=torch.float32)[None] for k in range(K + 1)]
    alone = [model.energy_forces(p, types) for p in starts]
    barrier = threading.Barrier(len(starts))
    got, errors = [None] * len(starts), []

    def work(i):
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            got[i] = [model.energy_forces(starts[i], types) for _ in range(10)]
        except BaseException as exc:
            errors.append((i, repr(exc)))

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(starts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
    for i, calls in enumerate(got):
        for e, f in calls:
            assert torch.equal(e, alone[i][0]) and torch.equal(f, alone[i][1]), f"thread {i}"


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="triton runs only in its CPU interpreter here (about 10 s per force evaluation); the "
                           "engine lock it relies on is the torch backend's code path, tested above")
def test_triton_backend_threads_on_gpu(mol):
    model = flashschnet.load_model(str(MODEL), backend="triton", device="cuda")
    types = torch.as_tensor(mol.bead_types, device="cuda")
    starts = [torch.as_tensor(_start(mol, k) * 10.0, dtype=torch.float32, device="cuda")[None] for k in range(K)]
    alone = [model.energy_forces(p, types) for p in starts]
    barrier = threading.Barrier(K)
    got = [None] * K

    def work(i):
        barrier.wait(timeout=JOIN_TIMEOUT_S)
        got[i] = [model.energy_forces(starts[i], types) for _ in range(5)]
        torch.cuda.synchronize()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(K)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "deadlock"
    for i, calls in enumerate(got):
        for e, f in calls:
            assert torch.equal(e, alone[i][0]) and torch.equal(f, alone[i][1]), f"thread {i}"
