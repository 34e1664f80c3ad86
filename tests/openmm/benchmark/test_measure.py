"""flashschnet.openmm.benchmark.measure (one benchmark configuration, measured in this process): ns/day at 4 fs,
the displaced replica positions, a configuration's model options, a tiny ``energy_forces`` measurement (its times,
ns/day and outputs), and the TorchForce properties of the CUDA-graph rows (``torch_cuda_graph``)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.conftest import EXAMPLES, ROOT
from flashschnet.openmm.benchmark import measure


def test_ns_per_day_is_four_femtoseconds_per_step():
    assert measure.ns_per_day(0.3456) == pytest.approx(1.0)          # 4 fs a step, 86,400 / 0.3456 steps a day
    assert measure.ns_per_day(0.01) == pytest.approx(4e-6 * 86400 / 0.01)
    assert measure.ns_per_day(0.005) == pytest.approx(2 * measure.ns_per_day(0.01))


def test_positions_are_seeded_displaced_copies():
    base = np.arange(30, dtype=float).reshape(10, 3)
    mol = SimpleNamespace(positions=base)
    pos = measure.positions(mol, 4, torch.float32, "cpu")
    assert pos.shape == (4, 10, 3) and pos.dtype == torch.float32 and pos.is_contiguous()
    assert torch.equal(pos, measure.positions(mol, 4, torch.float32, "cpu"))          # the fixed seed
    shift = pos.double() - torch.as_tensor(base)
    assert 0.05 < float(shift.std()) < 0.2 and float(shift.abs().max()) < 1.0      # DISPLACEMENT_A = 0.1 A
    assert not torch.equal(pos[0], pos[1])                                           # each copy its own noise


def test_model_options_of_a_configuration():
    opts = measure.model_options({"backend": "torch", "dtype": "float64", "quantize": "fp16"})
    assert (opts.backend, opts.precision, opts.quantize, opts.compress, opts.compress_knots, opts.matmul,
            opts.cuda_graph) == ("torch", "double", "fp16", "none", None, "auto", False)
    assert opts.dtype == torch.float64
    opts = measure.model_options({"backend": "reference", "dtype": "float32", "compress": "float16",
                                  "compress_knots": 64, "matmul": "ieee", "cuda_graph": 1})
    assert (opts.precision, opts.quantize, opts.compress, opts.compress_knots, opts.matmul, opts.cuda_graph) == (
        "single", "none", "float16", 64, "ieee", True)
    opts.validate()


def test_energy_forces_of_a_tiny_configuration():
    """Two replicas of trp-cage through the example model (the reference backend: no warm-up to pay): its beads, two
    timed calls, ns/day from the median."""
    import flashschnet

    cfg = {"kind": "energy_forces", "pdb": str(EXAMPLES / "1L2Y_trpcage.pdb"),
           "model": str(EXAMPLES / "trpcage_trained.pt"), "backend": "reference", "device": "cpu",
           "dtype": "float32", "threads": 1, "replicas": 2, "warmup": 0, "repeats": 2}
    threads = torch.get_num_threads()            # the measurement sets the configuration's threads
    try:
        out = measure.KINDS["energy_forces"](cfg)
    finally:
        torch.set_num_threads(threads)
    assert out["n_beads"] == flashschnet.map_pdb(cfg["pdb"]).n_beads
    assert len(out["times_ms"]) == 2 and 0 < out["min_ms"] <= out["median_ms"] <= max(out["times_ms"])
    assert out["ns_per_day_per_replica"] == pytest.approx(measure.ns_per_day(out["median_ms"] / 1e3))
    assert out["ns_per_day_aggregate"] == pytest.approx(2 * out["ns_per_day_per_replica"])
    assert out["outputs_finite"] is True and out["memory_method"].startswith("ru_maxrss after")
    assert out["weights_kb"] == pytest.approx(measure.weights_kb(measure.load(cfg, "cpu")))


def test_torch_force_properties():
    """build_system(torch_properties=CUDA_GRAPH_PROPERTIES) sets openmm-torch's CUDA-graph properties on the
    TorchForce (the device's TorchForce+CUDA graph rows); the default sets none; a PythonForce refuses them."""
    import torch

    import flashschnet
    from flashschnet.errors import InputError
    from flashschnet.openmm import build_system
    from flashschnet.openmm.benchmark.defaults import default_model
    from flashschnet.openmm.force import CUDA_GRAPH_PROPERTIES

    openmmtorch = pytest.importorskip("openmmtorch")
    mol = flashschnet.map_pdb(str(ROOT / "tests" / "data" / "structures" / "1L2Y_trpcage.pdb"))
    model = default_model(backend="reference", dtype=torch.float32, device="cpu")
    graph = build_system(mol, model, replicas=1, priors=None, torch_properties=CUDA_GRAPH_PROPERTIES)
    plain = build_system(mol, model, replicas=1, priors=None)
    props = dict(openmmtorch.TorchForce.cast(graph.getForce(0)).getProperties())
    assert props["useCUDAGraphs"] == "true" and props["CUDAGraphWarmupSteps"] == "3"
    assert dict(openmmtorch.TorchForce.cast(plain.getForce(0)).getProperties()).get("useCUDAGraphs",
                                                                                   "false") == "false"
    with pytest.raises(InputError, match="TorchForce only"):
        build_system(mol, model, replicas=1, priors=None, network_force="python", torch_properties={"a": "b"})


def test_openmm_loop_runs_a_given_module_in_the_networks_place():
    """``openmm_loop(cfg, module=...)``: the same System and loop with a ready module as the TorchForce (here the
    do-nothing force of flashschnet.openmm.benchmark.overhead: the energy is exactly zero); without it, the
    configuration's network (a nonzero energy)."""
    pytest.importorskip("openmmtorch")
    from flashschnet.openmm.benchmark.overhead import null_module

    cfg = {"pdb": str(EXAMPLES / "1L2Y_trpcage.pdb"), "model": None, "backend": "reference", "device": "cpu",
           "dtype": "float32", "threads": 1, "replicas": 1, "steps": 2, "warmup": 1}
    threads = torch.get_num_threads()
    try:
        null = measure.openmm_loop(cfg, module=null_module())
        net = measure.openmm_loop(cfg)
    finally:
        torch.set_num_threads(threads)
    assert null["final_potential_kJ_mol"] == 0.0 and net["final_potential_kJ_mol"] != 0.0
    assert null["platform"] == net["platform"] == "CPU" and null["positions_finite"]
