"""flashschnet.openmm.ensemble.demux: the per-temperature trajectories of a parallel-tempering run, demultiplexed
from the per-walker files and walkers.csv, frame (step - first) // interval of the walker at each rung, whatever
first step the walker files start at."""
from __future__ import annotations

import numpy as np
import pytest

from flashschnet.openmm.dcd import read_dcd
from tests.helpers.ensemble_systems import _topology

P = 8          # particles per walker


@pytest.mark.parametrize("first", [0, 50])
def test_demultiplex_follows_the_walker_files_first_step(tmp_path, first):
    """The per-temperature files pick frame (step - first) // interval of the walker at each rung: first 0 in a new
    run (step 0 recorded), one interval in run directories written before step 0 was (they keep it on resume)."""
    from flashschnet.openmm.dcd import DCDWriter, read_header
    from flashschnet.openmm.ensemble.demux import demultiplex, rung_trajectory

    temps, steps = [300.0, 400.0], [first + 50 * k for k in range(3)]
    xyz = {w: np.arange(3 * P * 3, dtype=float).reshape(3, P, 3) * 0.01 + w for w in range(2)}
    for w in range(2):
        writer = DCDWriter(str(tmp_path / f"replica_{w:03d}.dcd"), _topology(P), 0.004, first, 50)
        for frame in xyz[w]:
            writer.write(frame)
        writer.close()
    at = [[0, 1], [1, 0], [1, 0]]                                  # walker at each rung, per report step
    (tmp_path / "walkers.csv").write_text("step,T300.0,T400.0\n" + "".join(
        f"{s},{a[0]},{a[1]}\n" for s, a in zip(steps, at)))
    assert demultiplex(str(tmp_path), temps, 50, _topology(P), 0.004, 2) == [3, 3]
    for k, t in enumerate(temps):
        path = rung_trajectory(str(tmp_path), t)
        assert read_header(path).first_step == first
        want = np.stack([xyz[a[k]][i] for i, a in enumerate(at)])
        assert np.abs(read_dcd(path) - want).max() < 1e-6
