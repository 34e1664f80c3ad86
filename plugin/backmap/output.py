"""The files a backmapping writes into its ``--out`` folder, all or none (:func:`flashschnet.atomic.staged_files`):

* ``backmapped.pdb`` -- one MODEL per frame;
* ``backmapped.dcd`` -- the same frames (Angstrom, as every DCD), with ``topology_allatom.pdb`` (the first frame)
  as its topology;
* ``backmap.json`` -- what was backmapped, the settings, and per frame its checks and notes.

Without hydrogens the hydrogens the minimisation used are dropped from all of them.
"""
from __future__ import annotations

import json
import os
from typing import Dict

import numpy as np

FILES = ("backmapped.pdb", "backmapped.dcd", "topology_allatom.pdb", "backmap.json")


def drop_hydrogens(topology, positions_nm: np.ndarray):
    """(topology without hydrogens, positions [F, n_heavy, 3]) of a topology and its frames [F, n, 3] (nm)."""
    import openmm.app as app
    import openmm.unit as unit

    hydrogens = [a for a in topology.atoms() if a.element is not None and a.element.symbol in ("H", "D")]
    keep = np.array([a.index for a in topology.atoms() if a.element is None or a.element.symbol not in ("H", "D")],
                    dtype=np.int64)
    modeller = app.Modeller(topology, positions_nm[0] * unit.nanometer)
    modeller.delete(hydrogens)
    return modeller.topology, positions_nm[:, keep]


def write_backmapped(out: str, topology, positions_nm: np.ndarray, summary: Dict, first_step: int = 0,
                     interval: int = 1, dt_ps: float = 0.0) -> Dict[str, str]:
    """Write the four files (see the module docstring) into the existing folder ``out``; returns ``{name: path}``.

    Parameters
    ----------
    out : str
        Output folder (it exists).
    topology : openmm.app.Topology
        The atoms of ``positions_nm``.
    positions_nm : numpy.ndarray [F, n_atoms, 3]
    summary : dict
        JSON-able content of ``backmap.json``.
    first_step, interval, dt_ps : int, int, float
        The DCD header: the step of the first frame, steps between frames, the time step (ps; 0: unknown).

    Raises
    ------
    OutputError
        The files could not be written (none of them then replaces what ``out`` held).
    """
    import openmm.app as app
    import openmm.unit as unit

    from ...atomic import staged_files

    with staged_files(out, what="writing the backmapped structures") as stage:
        with open(os.path.join(stage, "backmapped.pdb"), "w") as f:
            app.PDBFile.writeHeader(topology, f)
            for k, pos in enumerate(positions_nm):
                app.PDBFile.writeModel(topology, pos * unit.nanometer, f, modelIndex=k + 1, keepIds=True)
            app.PDBFile.writeFooter(topology, f)
        with open(os.path.join(stage, "topology_allatom.pdb"), "w") as f:
            app.PDBFile.writeFile(topology, positions_nm[0] * unit.nanometer, f, keepIds=True)
        with open(os.path.join(stage, "backmapped.dcd"), "wb") as f:
            dcd = app.DCDFile(f, topology, dt_ps * unit.picosecond, int(first_step), max(int(interval), 1))
            for pos in positions_nm:
                dcd.writeModel(pos * unit.nanometer)
        with open(os.path.join(stage, "backmap.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    return {name: os.path.join(out, name) for name in FILES}
