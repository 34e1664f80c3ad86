"""The bundled placeholder model runs the bundled example stably: 10,000 steps at 4 fs, 300 K (minutes)."""
from __future__ import annotations

import csv

import mdtraj as md
import numpy as np
import pytest

from conftest import EXAMPLES
from flashschnet.openmm.simulate import RunSettings, run


@pytest.mark.slow
def test_placeholder_model_is_stable_for_10000_steps(tmp_path):
    out = tmp_path / "long"
    res = run(RunSettings(pdb=str(EXAMPLES / "1L2Y_trpcage.pdb"), model=str(EXAMPLES / "trpcage_placeholder.pt"),
                          out=str(out), steps=10_000, replicas=1, seed=3, report_interval=500, threads=1),
              progress=False, echo=lambda msg: None)
    assert res.steps_done == 10_000
    top = md.load(str(out / "topology.pdb"))
    traj = md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb"))
    assert traj.n_frames == 20 and np.isfinite(traj.xyz).all()
    bonds = np.array([[a.index, b.index] for a, b in top.topology.bonds])
    native = md.compute_distances(top, bonds)[0]
    lengths = md.compute_distances(traj, bonds)
    assert (np.abs(lengths / native - 1.0) < 0.25).all(), "a CG bond stretched or compressed by more than 25%"
    with open(out / "log.csv") as f:
        rows = list(csv.DictReader(f))
    temps = np.array([float(r["temperature_K"]) for r in rows])
    energies = np.array([float(r["potential_energy_kJ_mol"]) for r in rows])
    assert np.isfinite(energies).all() and np.isfinite(temps).all()
    assert 240.0 < temps[4:].mean() < 360.0
