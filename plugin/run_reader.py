"""A run directory, read: what flashschnet-analyze, flashschnet-compare and ``flashschnet-train validate`` load.

Two kinds are understood:

* ``flashschnet``: written by ``flashschnet-simulate``: ``topology.pdb`` (the CG beads of ONE replica),
  ``replica_000.dcd`` ..., ``log.csv``, ``run.json``; the backbone is the ``CA`` bead of each residue.
* ``martini``: written by ``flashschnet-martini``: ``topology.pdb`` (every MARTINI particle, solvent
  included), ``trajectory.dcd``, ``log.csv``, ``run.json``, ``system/cg.pdb`` (martinize2's protein); the
  backbone is the ``BB`` bead of each residue.

A parallel-tempering run (``flashschnet-simulate --temperatures``) is of the first kind; its walkers'
``replica_WWW.dcd`` each visit many temperatures, and :meth:`RunDir.ladder` names its per-temperature files
(``T300.0.dcd`` ..., demultiplexed at the end of the run).

PDB files are read with mdtraj, DCD files with :func:`flashschnet.openmm.dcd.read_dcd` (the frames the
header counts that are complete). Bad input raises :class:`~flashschnet.errors.InputError` (one line: the
file and what to do).
"""
from __future__ import annotations

import csv
import glob
import json
import os
import re
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ..errors import InputError
from .dcd import DCDHeader, read_dcd, read_header

BACKBONE_BEAD = {"flashschnet": "CA", "martini": "BB"}
#: a parallel-tempering run's per-temperature trajectory (:func:`flashschnet.openmm.ensemble.ladder.rung_name`)
RUNG_FILE = re.compile(r"T(\d+\.\d)\.dcd")
LOG_COLUMNS = ("step", "replica", "potential_energy_kJ_mol", "temperature_K")


def step_fs(cfg: Dict) -> Optional[float]:
    """The time one step of a run advances, fs, from its ``run.json`` ``cfg``: ``dt_fs``, or with multiple time
    stepping (``mts`` set) the outer step ``outer_dt_fs`` (default twice ``dt_fs``); None if not recorded."""
    dt = cfg.get("dt_fs")
    if not isinstance(dt, (int, float)) or isinstance(dt, bool):
        return None
    if cfg.get("mts"):
        outer = cfg.get("outer_dt_fs")
        return float(outer) if isinstance(outer, (int, float)) and not isinstance(outer, bool) else 2.0 * float(dt)
    return float(dt)


def read_pdb(path: str):
    """The first model of a PDB file as a one-frame ``mdtraj.Trajectory`` (names as in the file)."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file; give the PDB file of the structure")
    import warnings

    import mdtraj as md

    try:
        with warnings.catch_warnings():          # e.g. "dummy CRYST1 record": irrelevant here
            warnings.simplefilter("ignore")
            pdb = md.load_pdb(path, frame=0, standard_names=False)
    except Exception as exc:                     # mdtraj raises whatever its parser hits
        raise InputError(f"{path}: not a readable PDB file ({type(exc).__name__}: {exc}); fix or regenerate "
                         "the PDB file") from None
    if pdb.n_atoms == 0:
        raise InputError(f"{path}: no ATOM/HETATM records; give a PDB file with coordinates")
    return pdb


def pdb_positions(pdb, atoms: Optional[Sequence[int]] = None) -> np.ndarray:
    """Positions [N, 3] in nm (float64) of a :func:`read_pdb` structure; ``atoms`` selects atoms. A PDB file
    holds 0.001 Angstrom, which rounding mdtraj's float32 nm to 4 decimals restores exactly."""
    xyz = pdb.xyz[0] if atoms is None else pdb.xyz[0, np.asarray(atoms, dtype=int)]
    return np.round(xyz.astype(np.float64), 4)


def backbone_beads(topology, name: str) -> np.ndarray:
    """Indices of the first atom called ``name`` in each residue of an mdtraj topology, in residue order
    (ions such as calcium, whose residue carries the atom's name, are skipped)."""
    idx = []
    for res in topology.residues:
        if res.name == name:
            continue
        atom = next((a for a in res.atoms if a.name == name), None)
        if atom is not None:
            idx.append(atom.index)
    return np.array(idx, dtype=int)


def read_log(path: str, echo: Callable[[str], None] = print,
             extra: Sequence[str] = ()) -> Dict[int, Dict[str, np.ndarray]]:
    """Per-replica columns of a run's ``log.csv``: ``{replica: {"step", "time_ps", "potential_energy_kJ_mol",
    "temperature_K", *extra}}`` (arrays; ``extra``: more numeric columns, NaN where the file has none). A
    partial last row (a run killed mid-write) is dropped with a note; any other unreadable row, a missing
    column or a file that is not CSV text is an :class:`InputError`."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable log ({exc}); it should be the log.csv the run wrote "
                         "(step,time_ps,replica,potential_energy_kJ_mol,temperature_K,ns_per_day)") from None
    if not rows:
        raise InputError(f"{path}: empty, not even a header; it should be the log.csv the run wrote")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in LOG_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: no column {', '.join(missing)} in the header {','.join(header)!r}; it should "
                         "be the log.csv of flashschnet-simulate or flashschnet-martini")
    col = {c: header.index(c) for c in header}
    floats = ["time_ps", "potential_energy_kJ_mol", "temperature_K", *extra]
    data = {}
    body = [(n, r) for n, r in enumerate(rows[1:], 2) if r]
    for k, (lineno, r) in enumerate(body):
        try:
            if len(r) != len(header):
                raise ValueError("wrong number of fields")
            step, rep = int(r[col["step"]]), int(r[col["replica"]])
            vals = tuple(float(r[col[c]]) if c in col else float("nan") for c in floats)
        except ValueError:
            if k == len(body) - 1:
                echo(f"note: {path}: the last row (line {lineno}) is incomplete and was skipped (a run cut short?)")
                break
            raise InputError(f"{path}, line {lineno}: unreadable row {','.join(r)!r}; repair or delete the line "
                             "(or the file, to analyse the trajectories only)") from None
        data.setdefault(rep, []).append((step,) + vals)
    out = {}
    for rep, vals in sorted(data.items()):
        a = np.array(vals, dtype=float)
        out[rep] = {"step": a[:, 0].astype(int), **{c: a[:, 1 + i] for i, c in enumerate(floats)}}
    return out


def interval_walls(log: Dict[int, Dict[str, np.ndarray]], dt_fs: float) -> Dict[int, float]:
    """Wall-clock seconds of each report interval of a run's step loop, from its log.

    A row's ``ns_per_day`` (6 significant digits) is the speed over the interval that ends at its step (since the
    previous row; the clock restarts at each row and at the start of the loop), so that interval took
    ``(step - previous step) * dt / ns_per_day`` days: the integration loop with its reporters, not set-up,
    minimisation or the step-0 check. Every replica's row of a step carries the same speed (the replicas share
    the loop); the first logged replica's rows are read at each step (a dropped replica's rows stop).

    Parameters
    ----------
    log : dict
        :func:`read_log` with ``extra=("ns_per_day",)``.
    dt_fs : float
        Time step, fs.

    Returns
    -------
    dict {step: seconds}
        The intervals with a finite positive speed (none for a log without the column, or for step 0).
    """
    speed: Dict[int, float] = {}
    for cols in log.values():
        for step, v in zip(cols["step"], cols.get("ns_per_day", np.full(len(cols["step"]), np.nan))):
            speed.setdefault(int(step), float(v))
    walls, last = {}, 0
    for step in sorted(speed):
        v = speed[step]
        if np.isfinite(v) and v > 0 and step > last:
            walls[step] = (step - last) * dt_fs * 1e-6 / v * 86400.0
        last = step
    return walls


class RunDir:
    """A run directory of ``flashschnet-simulate`` or ``flashschnet-martini`` (see the module docstring).

    Attributes
    ----------
    path : str
        Absolute path.
    kind : {"flashschnet", "martini"}
    bead : {"CA", "BB"}
        The backbone bead, one per residue.
    trajectories : dict {replica: DCD path}
        In replica order (``{0: trajectory.dcd}`` for MARTINI).
    """

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        if not os.path.isdir(self.path):
            raise InputError(f"{path}: no such directory; give the --out directory of flashschnet-simulate or "
                             "flashschnet-martini")
        replicas = {}
        for p in glob.glob(os.path.join(self.path, "replica_*.dcd")):
            m = re.fullmatch(r"replica_(\d+)\.dcd", os.path.basename(p))
            if m:
                replicas[int(m.group(1))] = p
        single = os.path.join(self.path, "trajectory.dcd")
        if replicas:
            self.kind, self.trajectories = "flashschnet", dict(sorted(replicas.items()))
        elif os.path.isfile(single):
            self.kind, self.trajectories = "martini", {0: single}
        else:
            raise InputError(f"{path}: no trajectories (replica_NNN.dcd of flashschnet-simulate or trajectory.dcd "
                             "of flashschnet-martini); give a run directory those commands wrote")
        self.bead = BACKBONE_BEAD[self.kind]
        self._topology = None

    @property
    def command(self) -> str:
        """The command that wrote the run."""
        return "flashschnet-simulate" if self.kind == "flashschnet" else "flashschnet-martini"

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def topology_path(self) -> str:
        return self.file("topology.pdb")

    @property
    def log_path(self) -> str:
        return self.file("log.csv")

    def topology(self):
        """``topology.pdb`` as a one-frame ``mdtraj.Trajectory`` (read once)."""
        if self._topology is None:
            if not os.path.isfile(self.topology_path):
                raise InputError(f"{self.topology_path}: missing; the run directory needs the topology.pdb the run "
                                 "wrote")
            self._topology = read_pdb(self.topology_path)
        return self._topology

    def backbone(self) -> np.ndarray:
        """Indices of the backbone beads (one per residue) in the topology."""
        return backbone_beads(self.topology().topology, self.bead)

    def run_json(self) -> Optional[dict]:
        """``run.json`` (None when there is none; ValueError/OSError when it cannot be read)."""
        if not os.path.isfile(self.file("run.json")):
            return None
        with open(self.file("run.json")) as f:
            return json.load(f)

    def ladder(self) -> Optional[Dict[float, str]]:
        """The per-temperature trajectories of a parallel-tempering run, ``{T_K: path of T<K>.dcd}`` in ladder
        order; None for any other run.

        The ladder is run.json's ``temperatures`` (exact kelvin; the ``temperature_K`` that old run.json files
        of such runs carry as well is not the run's temperature and is ignored). Without a readable run.json,
        the ``T<K>.dcd`` files in the directory (kelvin to 0.1 K, from their names). Raises
        :class:`InputError` when run.json's ladder is unreadable or one of its files is missing (a run killed
        before it wrote them).
        """
        if self.kind != "flashschnet":
            return None
        from .ensemble.ladder import check_ladder, parse_temperatures, rung_name

        try:
            cfg = self.run_json() or {}
        except (OSError, ValueError):
            cfg = {}
        text = cfg.get("temperatures") if isinstance(cfg, dict) else None
        if not text:
            found = {}
            for p in glob.glob(os.path.join(self.path, "T*.dcd")):
                m = RUNG_FILE.fullmatch(os.path.basename(p))
                if m:
                    found[float(m.group(1))] = p
            return dict(sorted(found.items())) or None
        try:
            temps = check_ladder(text) if isinstance(text, list) else parse_temperatures(str(text))
        except (InputError, TypeError, ValueError) as exc:
            raise InputError(f"{self.file('run.json')}: unreadable \"temperatures\" {text!r} ({exc}); it should "
                             "be the run.json flashschnet-simulate --temperatures wrote") from None
        ladder = {t: self.file(rung_name(t) + ".dcd") for t in temps}
        for t, p in ladder.items():
            if not os.path.isfile(p):
                raise InputError(f"{p}: missing; a parallel-tempering run writes its per-temperature files when it "
                                 "ends: finish it with flashschnet-simulate --resume (until then replica_WWW.dcd "
                                 "and walkers.csv hold the frames)")
        return ladder

    def header(self, replica: int) -> DCDHeader:
        return read_header(self.trajectories[replica])

    def frames(self, replica: int, atoms: Optional[Sequence[int]] = None) -> np.ndarray:
        """Positions [T, N, 3] (nm) of one replica's trajectory; ``atoms`` selects particles."""
        return read_dcd(self.trajectories[replica], atoms)

    def read_log(self, echo: Callable[[str], None] = print, extra: Sequence[str] = ()):
        """:func:`read_log` of ``log.csv`` (None when there is none)."""
        return read_log(self.log_path, echo, extra) if os.path.isfile(self.log_path) else None
