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

from ...atomic import remove_quietly
from ..dcd import DCDWriter, read_dcd, read_header
from ..ladder import rung_name


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
    paths = [os.path.join(out, f"replica_{w:03d}.dcd") for w in range(walkers)]
    frames = [read_dcd(p) for p in paths]
    # frame k of a walker is step first + k * report_interval: first is 0 (step 0 recorded), or one report interval
    # in run directories written before step 0 was
    first = read_header(paths[0]).first_step if paths else 0
    with open(os.path.join(out, "walkers.csv"), newline="") as f:
        rows = [r for r in csv.reader(f)][1:]
    counts = []
    for k, t in enumerate(temperatures_K):
        path = rung_trajectory(out, t)
        tmp = path + ".tmp"
        writer = DCDWriter(tmp, topology, dt_ps, first, report_interval)
        try:
            for row in rows:
                if len(row) != len(temperatures_K) + 1:
                    break
                index = (int(row[0]) - first) // int(report_interval)
                walker = int(row[1 + k])
                if not 0 <= index < len(frames[walker]):
                    break                     # the walker at this rung was dropped (or the file ends here)
                writer.write(np.asarray(frames[walker][index]))
            counts.append(writer.frames)
            writer.sync()
            writer.close()
            os.replace(tmp, path)
        except BaseException:                 # e.g. a full disk: no half-written T<K>.dcd, no stale .tmp
            writer.close()
            remove_quietly(tmp)
            raise
    return counts
