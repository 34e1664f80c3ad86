"""flashschnet.openmm.cg_setup: a CG run's inputs loaded and checked once, Systems built from them for any replica
count, and the ensemble's builder (what a block gets) building the same System as a plain run."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.cg_setup import CGBuilder, build, load_inputs
from flashschnet.openmm.dynamics import NETWORK_GROUP, PRIOR_GROUP
from flashschnet.openmm.simulate import RunSettings


def _settings(tmp_path, **kw) -> RunSettings:
    s = RunSettings(pdb=str(EXAMPLES / "1L2Y_trpcage.pdb"), model=str(EXAMPLES / "trpcage_placeholder.pt"),
                    out=str(tmp_path / "run"), steps=10, threads=1, **kw)
    s.validate()
    return s


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    s = _settings(tmp_path_factory.mktemp("cg"))
    said = []
    return s, load_inputs(s, said.append), said


def test_inputs_are_loaded_once_with_their_notes_and_build_any_replica_count(loaded):
    s, inputs, said = loaded
    assert s.mapping == "5bead" and s.compress == "float32"          # what ran is recorded in the settings
    assert any(line.startswith("note: network backend torch") for line in said)
    assert inputs.engine == "torch" and inputs.compress_default and inputs.priors is not None
    assert inputs.topology(3) is inputs.topology(3)                      # made once per count
    assert inputs.topology(3).getNumAtoms() == 3 * inputs.mol.n_beads
    for replicas in (1, 2):
        cg = build(inputs, s, replicas)
        assert cg.system.getNumParticles() == replicas * inputs.mol.n_beads
        groups = {f.getName(): f.getForceGroup() for f in cg.system.getForces()}
        assert groups.pop("CGSchNet") == NETWORK_GROUP and set(groups.values()) == {PRIOR_GROUP}


def test_the_ensemble_builder_builds_a_plain_runs_system_and_travels(loaded):
    s, inputs, _ = loaded
    builder = pickle.loads(pickle.dumps(CGBuilder(s, None)))            # a Dask worker gets it pickled
    block = builder(2)
    plain = build(inputs, s, 2)
    assert block.particles == inputs.mol.n_beads
    assert block.system.getNumParticles() == plain.system.getNumParticles()
    assert [f.getName() for f in block.system.getForces()] == [f.getName() for f in plain.system.getForces()]
    assert np.array_equal(block.masses_amu, np.asarray(inputs.mol.masses, dtype=float))


def test_a_replica_count_too_large_is_refused_before_anything_is_built(loaded):
    s, inputs, _ = loaded
    with pytest.raises(InputError, match="replicas"):
        build(inputs, s, 10**9)
