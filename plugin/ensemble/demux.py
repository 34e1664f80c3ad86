"""Per-temperature trajectories of a parallel-tempering run, demultiplexed from the per-walker ones.

Walkers keep their coordinates and swap temperatures, so ``replica_WWW.dcd`` is one continuous trajectory
that visits many temperatures; ``walkers.csv`` says which walker was at which rung at every report step.
:func:`demultiplex` writes ``T300.0.dcd`` etc.: rung ``k``'s frame of a report step is the frame of the walker
that was at rung ``k`` then. It runs in the driving process at the end of a run (and of every resumed one),
from the final files, and rewrites the rung files whole, so it is idempotent. A rung whose walker was dropped
has no frames from then on.
"""
from __future__ import annotations

import csv
import os
from typing import List, Sequence

import numpy as np

from ..dcd import DCDWriter, read_dcd
from .ladder import rung_name


def rung_trajectory(out: str, t_kelvin: float) -> str:
    return os.path.join(out, rung_name(t_kelvin) + ".dcd")


def demultiplex(out: str, temperatures_K: Sequence[float], report_interval: int, topology, dt_ps: float,
                walkers: int) -> List[int]:
    """Write one DCD per rung; return the frames written per rung.

    Parameters
    ----------
    out : str
        The run directory (``replica_WWW.dcd``, ``walkers.csv``).
    temperatures_K : sequence of float
        The ladder.
    report_interval : int
    topology : openmm.app.Topology
        One walker's topology.
    dt_ps : float
    walkers : int
    """
    frames = [read_dcd(os.path.join(out, f"replica_{w:03d}.dcd")) for w in range(walkers)]
    with open(os.path.join(out, "walkers.csv"), newline="") as f:
        rows = [r for r in csv.reader(f)][1:]
    counts = []
    for k, t in enumerate(temperatures_K):
        path = rung_trajectory(out, t)
        tmp = path + ".tmp"
        writer = DCDWriter(tmp, topology, dt_ps, report_interval, report_interval)
        try:
            for row in rows:
                if len(row) != len(temperatures_K) + 1:
                    break
                index = int(row[0]) // int(report_interval) - 1
                walker = int(row[1 + k])
                if not 0 <= index < len(frames[walker]):
                    break                     # the walker at this rung was dropped (or the file ends here)
                writer.write(np.asarray(frames[walker][index]))
            counts.append(writer.frames)
        finally:
            writer.close()
        os.replace(tmp, path)
    return counts
