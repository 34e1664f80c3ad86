"""A run directory, read: the one reader of what flashschnet-analyze, flashschnet-backmap, flashschnet-compare
--analyse-only, ``--resume`` (flashschnet-simulate, flashschnet-martini) and ``flashschnet-train validate`` load.

Two kinds are understood:

* ``flashschnet``: written by ``flashschnet-simulate``: ``topology.pdb`` (the CG beads of ONE replica),
  ``replica_000.dcd`` ..., ``log.csv``, ``run.json``, ``checkpoint.chk``; the backbone is the ``CA`` bead of each
  residue.
* ``martini``: written by ``flashschnet-martini``: ``topology.pdb`` (every MARTINI particle, solvent
  included), ``trajectory.dcd``, ``log.csv``, ``run.json``, ``checkpoint.chk``, ``system/cg.pdb`` (martinize2's
  protein); the backbone is the ``BB`` bead of each residue.

A parallel-tempering run (``flashschnet-simulate --temperatures``) is of the first kind; its walkers'
``replica_WWW.dcd`` each visit many temperatures, and :meth:`RunDir.ladder` names its per-temperature files
(``T300.0.dcd`` ..., demultiplexed at the end of the run).

One set of answers to damaged files, whichever command reads them (docs/reliability.md, "Run directories under
damage"): a file that is missing, empty, cut short, overwritten or another run's is an
:class:`~flashschnet.errors.InputError` (one line: the file and what to do), or, where the rest of the run is usable,
a note in :attr:`RunDir.notes` (the commands print it as a ``note:`` line and keep it in their JSON report's
``input_warnings``) and the part that is whole: never a silent fallback. A ``strict`` reader (``--resume``, which
appends to the files) gets an error for those too. The files are checked against each other by
:mod:`flashschnet.openmm.run_checks` (run.json, the trajectories' headers, the checkpoint's counts, the log's rows,
walkers.csv), the commands' options against the run by :mod:`flashschnet.openmm.run_options`.

PDB files are read with mdtraj, DCD files with :func:`flashschnet.openmm.dcd.read_dcd` (the frames the header counts
that are complete and whole). Nothing is ever written: readers leave the run directory as it is.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..safeload import read_json_object
from .dcd import DCDHeader, read_dcd, read_header
from .run_checks import step_fs  # noqa: F401  (its home for its users: analyze, compare)

BACKBONE_BEAD = {"flashschnet": "CA", "martini": "BB"}
#: a parallel-tempering run's per-temperature trajectory (:func:`flashschnet.openmm.ladder.rung_name`)
RUNG_FILE = re.compile(r"T(\d+\.\d)\.dcd")
LOG_COLUMNS = ("step", "replica", "potential_energy_kJ_mol", "temperature_K")
_UNREAD = object()


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


def whole_pdb(path: str, fix: str) -> None:
    """Raise :class:`InputError` (``fix``: what to do) when the PDB file a run wrote (``topology.pdb``,
    ``cleaned.pdb``, martinize2's ``cg.pdb``: each ends with an END record) is missing or cut short."""
    try:
        with open(path, "rb") as f:
            f.seek(max(os.path.getsize(path) - 512, 0))
            tail = f.read().rstrip().rsplit(b"\n", 1)[-1]
    except OSError as exc:
        raise InputError(f"{path}: {'missing' if not os.path.exists(path) else exc.strerror}; {fix}") from None
    if tail.strip() != b"END":
        raise InputError(f"{path}: cut short (it does not end with its END record); {fix}")


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
    "temperature_K", *extra}}`` (arrays; ``extra``: more numeric columns, NaN where the file has none).

    A file cut short (a run killed mid-write, a truncated copy): a partial last row (past the last line end, or
    one that does not read) is dropped, and a file with no whole line (empty, or cut inside its header) has no rows
    (``{}``), each with a note to ``echo``. Any other unreadable row, a missing column or a file that is not CSV
    text is an :class:`InputError`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8")
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable log ({exc}); it should be the log.csv the run wrote "
                         "(step,time_ps,replica,potential_energy_kJ_mol,temperature_K,ns_per_day)") from None
    if not text.endswith(("\n", "\r")) and rows:
        if len(rows) == 1:
            rows = []
        else:
            echo(f"note: {path}: the last row (line {len(rows)}) is incomplete (cut short); it is left out, the rows "
                 "before it are used")
            rows = rows[:-1]
    if not rows:
        echo(f"note: {path}: {'empty' if not data else 'cut short inside its header'}; it has no rows")
        return {}
    header = [h.strip() for h in rows[0]]
    missing = [c for c in LOG_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: no column {', '.join(missing)} in the header {','.join(header)!r}; it should "
                         "be the log.csv of flashschnet-simulate or flashschnet-martini")
    col = {c: header.index(c) for c in header}
    floats = ["time_ps", "potential_energy_kJ_mol", "temperature_K", *extra]
    data_rows: Dict[int, list] = {}
    body = [(n, r) for n, r in enumerate(rows[1:], 2) if r]
    for k, (lineno, r) in enumerate(body):
        try:
            if len(r) != len(header):
                raise ValueError("wrong number of fields")
            step, rep = int(r[col["step"]]), int(r[col["replica"]])
            vals = tuple(float(r[col[c]]) if c in col else float("nan") for c in floats)
        except ValueError:
            if k == len(body) - 1:
                echo(f"note: {path}: the last row (line {lineno}) is incomplete; it is left out, the rows before it "
                     "are used")
                break
            raise InputError(f"{path}, line {lineno}: unreadable row {','.join(r)!r}; restore the log.csv the run "
                             "wrote, or move it away to go on without it") from None
        data_rows.setdefault(rep, []).append((step,) + vals)
    out = {}
    for rep, vals in sorted(data_rows.items()):
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
    """A run directory of ``flashschnet-simulate`` or ``flashschnet-martini`` (see the module docstring): the one
    reader of its files, for every command that consumes one.

    Attributes
    ----------
    path : str
        Absolute path.
    kind : {"flashschnet", "martini"}
    bead : {"CA", "BB"}
        The backbone bead, one per residue.
    trajectories : dict {replica: DCD path}
        In replica order (``{0: trajectory.dcd}`` for MARTINI).
    strict : bool
        Damage that a reader could go on past (a trajectory or log cut short, a damaged frame, a missing replica)
        is an :class:`InputError` too: what ``--resume`` needs, which appends to the files.
    notes : list of str
        What was found damaged and what was done about it, one line each naming the file (the readers print them
        as ``note:`` lines and keep them in their JSON report as ``input_warnings``).
    """

    def __init__(self, path: str, strict: bool = False):
        self.path = os.path.abspath(path)
        self.strict = strict
        self.notes: List[str] = []
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
            raise InputError(self._no_trajectory(path))
        self.bead = BACKBONE_BEAD[self.kind]
        self._topology = None
        self._cfg: Optional[dict] = None
        self._ckpt: object = _UNREAD
        self._headers: Dict[str, DCDHeader] = {}

    def _no_trajectory(self, path: str) -> str:
        """The message for a directory without a trajectory: naming the one its run.json says it had, if any."""
        try:
            with open(self.file("run.json"), encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError):
            cfg = None
        if isinstance(cfg, dict) and ("forcefield_dir" in cfg or "model" in cfg):
            name = "trajectory.dcd" if "forcefield_dir" in cfg else "replica_000.dcd"
            return f"{self.file(name)}: missing; the run directory needs the trajectory the run wrote: restore it"
        return (f"{path}: no trajectories (replica_NNN.dcd of flashschnet-simulate or trajectory.dcd of "
                "flashschnet-martini); give a run directory those commands wrote")

    # -- what a reader does with damage -------------------------------------------------------------------------
    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def problem(self, path: str, what: str, goes_on: str, fix: str) -> None:
        """Damage a reader can go on past: a note (``FILE: what; goes_on``), or with :attr:`strict` an
        :class:`InputError` (``PATH: what; fix``)."""
        if self.strict:
            raise InputError(f"{path}: {what}; {fix}")
        self.note(f"{os.path.relpath(path, self.path)}: {what}; {goes_on}")

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

    # -- the files ------------------------------------------------------------------------------------------------
    def settings(self, required: bool = False) -> dict:
        """``run.json`` (read once), checked against the trajectories (:func:`~.run_checks.check_settings`).

        Missing: ``{}`` with a note (the settings then come from the trajectory headers), or with ``required``
        an :class:`InputError`. Unreadable, not a JSON object, or another run's: an :class:`InputError` saying to
        restore it (or to move it away, where the reader can go on without it)."""
        if self._cfg is not None:
            return self._cfg
        path = self.file("run.json")
        restore = "restore the run.json the run wrote" + ("" if required or self.strict else
                                                          ", or move it away to go on without it (the settings then "
                                                          "come from the trajectory headers)")
        if not os.path.isfile(path):
            if required or self.strict:
                raise InputError(f"{path}: missing; it holds the run's settings: {restore}")
            self.note("run.json: missing; the settings come from the trajectory headers")
            self._cfg = {}
            return self._cfg
        cfg = read_json_object(path, restore)
        from .run_checks import check_settings

        check_settings(self, cfg)
        self._cfg = cfg
        return cfg

    def run_json(self) -> Optional[dict]:
        """:meth:`settings`, or None when there is no run.json."""
        cfg = self.settings()
        return cfg or None

    def checkpoint(self) -> Optional[dict]:
        """The header of ``checkpoint.chk`` (read once), for checking the other files against: None when there
        is none, or (a note; :attr:`strict`: an error) when it is unreadable or not this run's
        (:func:`~.run_checks.check_checkpoint`)."""
        if self._ckpt is _UNREAD:
            from .reporters.files import read_checkpoint
            from .run_checks import check_checkpoint

            self._ckpt = None
            path = self.file("checkpoint.chk")
            if os.path.isfile(path):
                try:
                    meta, _ = read_checkpoint(path)
                except (InputError, OSError) as exc:
                    self.problem(path, (str(exc).split(": ", 1)[-1].split("; ")[0] if isinstance(exc, InputError)
                                        else f"cannot be read ({exc.strerror or type(exc).__name__})"),
                                 "the run cannot be resumed from it, and the other files are not checked against it",
                                 "the run cannot be resumed from it; start a new run")
                else:
                    self._ckpt = check_checkpoint(self, meta)
        return self._ckpt

    def topology(self):
        """``topology.pdb`` as a one-frame ``mdtraj.Trajectory`` (read once); it must end with its END record
        and have the trajectories' atoms."""
        if self._topology is None:
            path = self.topology_path
            if not os.path.isfile(path):
                raise InputError(f"{path}: missing; the run directory needs the topology.pdb the run wrote "
                                 "(restore it)")
            whole_pdb(path, "restore the topology.pdb the run wrote")
            pdb = read_pdb(path)
            for p in self.trajectories.values():
                atoms = self.header(p).atoms
                if atoms != pdb.n_atoms:
                    raise InputError(f"{p}: {atoms} atoms per frame but {path} has {pdb.n_atoms}; they are not "
                                     "from the same run (restore the files the run wrote)")
            self._topology = pdb
        return self._topology

    def backbone(self) -> np.ndarray:
        """Indices of the backbone beads (one per residue) in the topology."""
        return backbone_beads(self.topology().topology, self.bead)

    def ladder(self) -> Optional[Dict[float, str]]:
        """The per-temperature trajectories of a parallel-tempering run, ``{T_K: path of T<K>.dcd}`` in ladder
        order; None for any other run.

        The ladder is run.json's ``temperatures`` (exact kelvin; the ``temperature_K`` that old run.json files
        of such runs carry as well is not the run's temperature and is ignored); without run.json, the ``T<K>.dcd``
        files in the directory (kelvin to 0.1 K, from their names). Raises :class:`InputError` when run.json's
        ladder is unreadable, one of its files is missing (a run killed before it wrote them), or the directory
        holds a tempering run's files (walkers.csv, exchanges.csv) but no ladder."""
        if self.kind != "flashschnet":
            return None
        from .ladder import check_ladder, parse_temperatures, rung_name

        cfg = self.settings()
        text = cfg.get("temperatures")
        if not text:
            found = {}
            for p in glob.glob(os.path.join(self.path, "T*.dcd")):
                m = RUNG_FILE.fullmatch(os.path.basename(p))
                if m:
                    found[float(m.group(1))] = p
            marks = [n for n in ("walkers.csv", "exchanges.csv") if os.path.isfile(self.file(n))]
            if marks and not found:
                raise InputError(f"{self.file(marks[0])}: a parallel-tempering run's file, but "
                                 + ("run.json has no temperatures" if cfg else "there is no run.json")
                                 + " and no T<K>.dcd file: restore the run's run.json and finish the run with "
                                   "flashschnet-simulate --resume")
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
                                 "ends: write them with flashschnet-simulate --resume (from replica_WWW.dcd and "
                                 "walkers.csv)")
        return ladder

    def header(self, which) -> DCDHeader:
        """The DCD header of a replica (an int) or a trajectory file (a path), read once."""
        path = self.trajectories[which] if isinstance(which, int) else which
        if path not in self._headers:
            self._headers[path] = read_header(path, strict=True)
        return self._headers[path]

    def frames(self, which, atoms: Optional[Sequence[int]] = None) -> np.ndarray:
        """Positions [T, N, 3] (nm) of a replica's (an int) or a trajectory file's (a path) complete frames;
        ``atoms`` selects particles. A trajectory cut short or with a damaged frame gives the frames before the
        cut (or damage) with a note (:attr:`strict`: an error); none at all is an error."""
        path = self.trajectories[which] if isinstance(which, int) else which
        head = self.header(path)
        found: List[str] = []
        xyz = read_dcd(path, atoms, notes=None if self.strict else found, strict=True)
        if found and not len(xyz):
            raise InputError(f"{path}: {found[0].split(': ', 1)[1].split('; ')[0]}, with no whole frame before it; "
                             "restore the file the run wrote")
        for line in found:
            self.note(line)
        if not found and len(xyz) < head.frames:
            self.problem(path, f"the header counts {head.frames} frames, {len(xyz)} are complete (cut short)",
                         "the complete ones are used", "restore the file the run wrote")
        return xyz

    def read_log(self, echo: Optional[Callable[[str], None]] = None, extra: Sequence[str] = ()):
        """:func:`read_log` of ``log.csv`` (None when there is none), checked against the run
        (:func:`~.run_checks.check_log`); its notes go to :attr:`notes` (and ``echo``, if given)."""
        if not os.path.isfile(self.log_path):
            if self.strict:
                raise InputError(f"{self.log_path}: missing; restore the log.csv the run wrote")
            self.note("log.csv: missing; no energy or temperature is read")
            return None

        def say(line: str) -> None:          # a file cut short: its whole rows are read (check_log: enough?)
            self.note("log.csv: " + line.removeprefix("note: ").split(": ", 1)[-1])
            if echo is not None:
                echo(line)

        log = read_log(self.log_path, say, extra)
        from .run_checks import check_log

        check_log(self, log)
        return log
