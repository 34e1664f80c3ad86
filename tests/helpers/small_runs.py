"""Small run directories written with the run's own writers, for the tests of the run-directory readers."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import openmm.app as app
import openmm.unit as u

from flashschnet.openmm.dcd import DCDWriter

RESIDUES = ("MET", "GLY", "LYS", "TRP", "SER", "LEU")
LOG_HEADER = ["step", "time_ps", "replica", "potential_energy_kJ_mol", "temperature_K", "ns_per_day"]


def write_run(path, replicas=2, frames=3, interval=10, dt_fs=4.0, kind="flashschnet", seed=0, cfg=None):
    """A run directory as flashschnet-simulate (``kind="flashschnet"``: ``replica_WWW.dcd``, beads CA and CB of each
    residue) or flashschnet-martini (``trajectory.dcd``, beads BB and SC1) writes it: topology.pdb, the trajectories
    (frames at steps 0, interval, ...), log.csv (a row per replica and frame, ns_per_day 50) and run.json (``cfg``
    updates it). Returns the frames written, [replicas, frames, atoms, 3] nm."""
    os.makedirs(path)
    names = ("CA", "CB") if kind == "flashschnet" else ("BB", "SC1")
    top = app.Topology()
    chain = top.addChain("A")
    for name in RESIDUES:
        res = top.addResidue(name, chain)
        for bead in names:
            top.addAtom(bead, app.Element.getBySymbol("C"), res)
    rng = np.random.default_rng(seed)
    native = np.cumsum(rng.normal(0.0, 0.2, (top.getNumAtoms(), 3)) + [0.15, 0.0, 0.0], axis=0) + 1.0
    with open(os.path.join(path, "topology.pdb"), "w") as f:
        app.PDBFile.writeFile(top, native * u.nanometer, f)
    xyz = native + rng.normal(0.0, 0.03, (replicas, frames) + native.shape)
    files = [f"replica_{r:03d}.dcd" for r in range(replicas)] if kind == "flashschnet" else ["trajectory.dcd"]
    for name, frames_r in zip(files, xyz):
        writer = DCDWriter(os.path.join(path, name), top, dt_fs * 1e-3, first_step=0, interval=interval)
        for x in frames_r:
            writer.write(x)
        writer.close()
    with open(os.path.join(path, "log.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(LOG_HEADER)
        for k in range(frames):
            for r in range(len(files)):
                step = k * interval
                w.writerow([step, step * dt_fs * 1e-3, r, -100.0 - step - r, 300.0 + r, 50.0])
    run = ({"model": "m.pt", "replicas": replicas, "temperature_K": 300.0} if kind == "flashschnet"
           else {"forcefield_dir": "ff", "temperature_K": 300.0})
    run.update({"dt_fs": dt_fs, "report_interval": interval, "steps": (frames - 1) * interval}, **(cfg or {}))
    with open(os.path.join(path, "run.json"), "w") as f:
        json.dump(run, f)
    return xyz
