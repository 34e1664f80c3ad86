"""flashschnet.openmm._plugins: openmm-torch's kernel libraries that failed to load because openmm was imported
before torch are loaded again (once each, the others left alone); end to end, a script importing openmm and openmmml
first still gets its TorchForce kernels."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import openmm
import pytest

from tests.conftest import EXAMPLES, ROOT
from flashschnet.openmm import _plugins

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
LIBS = "/opt/openmm/lib/plugins"


def test_only_the_failed_torch_plugins_are_loaded_again_and_each_once(monkeypatch):
    """The loader's failures name three libraries: the two openmm-torch ones are tried (the CUDA one fails again,
    as without a driver: skipped, not raised), OpenMM's own CUDA platform is not; a second call tries nothing."""
    failures = [f"Error loading library {LIBS}/libOpenMMTorchReference.so: libtorch_cpu.so: cannot open shared "
                "object file: No such file or directory",
                f"Error loading library {LIBS}/libOpenMMCUDA.so: libcuda.so.1: cannot open shared object file: No "
                "such file or directory",
                f"Error loading library {LIBS}/libOpenMMTorchCUDA.so: libc10_cuda.so: cannot open shared object "
                "file: No such file or directory"]
    tried = []

    def load(path):
        tried.append(path)
        if "CUDA" in path:
            raise openmm.OpenMMException(f"Error loading library {path}: libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(_plugins, "_loaded", set())
    monkeypatch.setattr(openmm.Platform, "getPluginLoadFailures", staticmethod(lambda: failures))
    monkeypatch.setattr(openmm.Platform, "loadPluginLibrary", staticmethod(load))
    assert _plugins.load_late_torch_plugins() == [f"{LIBS}/libOpenMMTorchReference.so"]
    assert tried == [f"{LIBS}/libOpenMMTorchReference.so", f"{LIBS}/libOpenMMTorchCUDA.so"]
    assert _plugins.load_late_torch_plugins() == [] and len(tried) == 2


@pytest.mark.skipif(importlib.util.find_spec("openmmml") is None, reason="openmmml is not installed")
def test_openmm_imported_before_torch_still_runs_the_torch_force(tmp_path):
    """A user script that imports openmm (and openmmml) first: openmm-torch's kernel libraries failed to load
    then; importing the potential loads them again, so the Context gets its TorchForce kernels."""
    script = textwrap.dedent(f"""
        import openmm, openmm.app as app
        from openmmml import MLPotential
        from flashschnet.cg import map_pdb
        from flashschnet.openmm import cg_topology, replica_positions_nm
        mol = map_pdb({PDB!r})
        system = MLPotential("flashschnet", modelPath={MODEL!r}).createSystem(cg_topology(mol))
        ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
        ctx.setPositions(replica_positions_nm(mol, 1))
        print("energy", ctx.getState(getEnergy=True).getPotentialEnergy())
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "energy" in res.stdout
