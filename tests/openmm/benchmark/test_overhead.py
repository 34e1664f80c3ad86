"""flashschnet.openmm.benchmark.overhead: the do-nothing network force (zero energy, zero forces of the positions'
shape, dtype and device; TorchScript-able) and its OpenMM loop -- the same System shape and loop as a network row,
as a TorchForce and as an openmm.PythonForce -- on the CPU platform."""
from __future__ import annotations

import pytest
import torch

from flashschnet.openmm.benchmark import overhead
from tests.conftest import EXAMPLES


def test_null_force_returns_zeros_of_the_positions_shape():
    pos = torch.randn(2 * 20, 3, dtype=torch.float64)
    for module in (overhead.null_module(), overhead.null_module(python=True)):
        energy, forces = module(pos)
        assert energy.shape == () and float(energy) == 0.0 and energy.dtype == torch.float64
        assert forces.shape == pos.shape and forces.dtype == pos.dtype and not forces.any()
    assert isinstance(overhead.null_module(), torch.jit.ScriptModule)
    assert next(overhead.null_module(python=True).parameters()).device.type == "cpu"


@pytest.mark.parametrize("network_force", ["torch", "python"])
def test_null_loop_is_an_openmm_loop_of_nothing(network_force):
    if network_force == "torch":
        pytest.importorskip("openmmtorch")
    cfg = {"pdb": str(EXAMPLES / "1L2Y_trpcage.pdb"), "device": "cpu", "dtype": "float32", "threads": 1,
           "replicas": 2, "steps": 5, "warmup": 1, "network_force": network_force, "backend": "torch",
           "compress": "float32"}
    threads = torch.get_num_threads()
    try:
        out = overhead.null_loop(cfg)
    finally:
        torch.set_num_threads(threads)
    assert out["platform"] == "CPU" and out["final_potential_kJ_mol"] == 0.0 and out["positions_finite"]
    assert out["ms_per_step"] > 0 and out["ns_per_day_aggregate"] == pytest.approx(2 * out["ns_per_day_per_replica"])
    assert ("PythonForce" if network_force == "python" else "TorchForce") in out["network"]
