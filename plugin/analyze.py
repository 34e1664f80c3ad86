"""The report behind ``flashschnet-analyze``: a run directory in, ``report.md`` + PNG figures + ``report.json`` out.

Run directories understood (read by :class:`flashschnet.openmm.rundir.RunDir`):

* ``flashschnet-simulate``: ``topology.pdb`` (the CG beads of ONE replica), ``replica_000.dcd`` ...,
  ``log.csv``, ``run.json``; the backbone is the ``CA`` bead of each residue.
* ``flashschnet-martini``: ``topology.pdb`` (every MARTINI particle, solvent included), ``trajectory.dcd``,
  ``log.csv``, ``run.json``; the backbone is the ``BB`` bead of each residue.

One bead per residue, all lengths in nm (as :mod:`flashschnet.openmm.compare`):

* traces per replica of the potential energy (kJ/mol) and temperature (K) from ``log.csv``;
* backbone RMSD to the reference after Kabsch superposition (reference: the run's ``topology.pdb``, i.e. the
  starting structure, or ``--reference PDB``: its beads of the same name, or for a MARTINI run an all-atom
  PDB's CA atoms), radius of gyration, per-residue RMSF about each replica's mean, fraction of native contacts
  Q (reference pairs closer than 0.8 nm, >= 3 residues apart, within 1.2 x their native distance);
* a contact map: the fraction of frames (all replicas) with bead-bead distance < 0.8 nm for residues >= 3
  apart (upper triangle), the reference's contacts in the lower triangle;
* a free-energy surface F(RMSD, Rg) = -kT ln p(RMSD, Rg) in kJ/mol from a 2-D histogram of all replicas'
  frames, T from ``--temperature``, else ``run.json``, else 300 K; F = 0 at the most populated bin,
  unsampled bins are left empty (NaN in the figure, null in the JSON).

A parallel-tempering run (``flashschnet-simulate --temperatures``; :meth:`RunDir.ladder`) is analysed per
temperature, never per walker and never pooled: each ``T<K>.dcd`` (the demultiplexed frames at that
temperature) gets its traces, RMSF, contact map and F(RMSD, Rg) with its own kT = R T; ``log.csv`` rows go to the
temperature their walker was at (its ``thermostat_K``, else ``walkers.csv``). ``--temperature`` and
``--replicas`` are refused there. Nothing is reweighted between temperatures.

Too little data: a figure whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES`` is still drawn,
and :func:`too_little_data` says (report.json ``too_little_data``, report.md, a ``warning:`` line) how many more
frames and steps it needs.

DCD files are read with :func:`flashschnet.openmm.dcd.read_dcd`, which ignores a partial last frame
(a run killed mid-write). Bad input raises :class:`~flashschnet.errors.InputError` (one line: the file and
what to do).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..atomic import staged_files
from ..errors import InputError
from .analysis import (MOLAR_GAS_CONSTANT_KJ_MOL_K, contact_map, fraction_native_contacts, free_energy_surface,
                       kabsch_align, native_contacts, radius_of_gyration, rmsf)
from .analyze_report import markdown, plot_report
from .dcd import read_dcd, read_header
from .rundir import RunDir, backbone_beads, pdb_positions, read_pdb
from .runner.directory import make_run_dir

REPORT_FILES = ("report.md", "report.json")
FIGURES = ("energy.png", "structure.png", "contacts.png", "fes.png")
CONTACT_CUTOFF_NM = 0.8
CONTACT_MIN_SEPARATION = 3
DEFAULT_TEMPERATURE_K = 300.0

# The fewest frames (log rows, for energy.png) a figure needs to mean something; below them the report says so
# and how many more are needed (docs/analysis.md, "Too little data"):
#: a time trace (RMSD, Rg, Q; energy and temperature): fewer points cannot tell a drift from a fluctuation
MIN_TRACE_POINTS = 10
#: an RMSF (a standard deviation per residue): from n independent frames it is uncertain by ~1/sqrt(2(n - 1)),
#: 16 % at 20 frames, and successive frames are not independent
MIN_RMSF_FRAMES = 20
#: a contact map: its fractions come in steps of 1/frames
MIN_CONTACT_FRAMES = 10
#: F(RMSD, Rg): F of a bin of n samples is uncertain by ~kT/sqrt(n); only from ~100 frames up do the populated
#: bins of even the coarsest default grid (5 x 5 .. 10 x 10) hold ~10 samples, F known there to ~0.3 kT
MIN_FES_FRAMES = 100
#: a log row's thermostat temperature is its rung's when within this (K): rung names are 0.1 K apart at least
RUNG_MATCH_K = 0.051


@dataclass
class AnalyzeSettings:
    """What ``flashschnet-analyze`` does (see the module docstring)."""

    run_dir: str
    out: Optional[str] = None             # default RUN_DIR/analysis
    reference: Optional[str] = None       # PDB; default RUN_DIR/topology.pdb
    temperature_K: Optional[float] = None  # default run.json's, else 300 K
    stride: int = 1                       # use every stride-th frame
    replicas: Optional[Sequence[int]] = None  # default all
    force: bool = False                   # overwrite an existing report
    bins: Optional[int] = None            # FES bins per axis (default from the number of frames)


# -- output helpers -------------------------------------------------------------------------------------

def _json_safe(x):
    """NaN/inf -> None, numpy -> Python, recursively (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return _json_safe(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


# -- the analysis --------------------------------------------------------------------------------------------

def analyze(settings: AnalyzeSettings, progress: bool = True, echo: Callable[[str], None] = print) -> Dict[str, object]:
    """Analyse a run directory and write the report; returns the ``report.json`` content (a dict)."""
    s = settings
    run_dir = os.path.abspath(s.run_dir)
    rd = RunDir(run_dir)
    kind, bead, paths = rd.kind, rd.bead, rd.trajectories
    out = os.path.abspath(s.out) if s.out else os.path.join(run_dir, "analysis")
    if s.stride < 1:
        raise InputError(f"--stride must be >= 1, got {s.stride}")
    if s.temperature_K is not None and not s.temperature_K > 0:
        raise InputError(f"--temperature must be positive (K), got {s.temperature_K}")
    ladder = rd.ladder()                 # {T_K: T<K>.dcd} of a parallel-tempering run, else None
    if ladder is not None:
        span = f"{len(ladder)} temperatures, {min(ladder):.1f}-{max(ladder):.1f} K"
        if s.temperature_K is not None:
            raise InputError(f"--temperature {s.temperature_K:g}: {run_dir} is a parallel-tempering run ({span}), "
                             "analysed per temperature, each with its own kT; drop --temperature")
        if s.replicas is not None:
            raise InputError(f"--replicas: {run_dir} is a parallel-tempering run ({span}), analysed per temperature "
                             "from its T<K>.dcd files, not per walker; drop --replicas")
    existing = [n for n in REPORT_FILES if os.path.exists(os.path.join(out, n))]
    if existing and not s.force:
        raise InputError(f"{os.path.join(out, existing[0])}: a report is already there; pass --force to overwrite "
                         "it or choose another --out")
    make_run_dir(out)                    # a read-only or unwritable --out: one line (exit 2) before the work
    if s.replicas is not None:
        wanted = list(dict.fromkeys(int(r) for r in s.replicas))
        absent = [r for r in wanted if r not in paths]
        if absent:
            raise InputError(f"{run_dir}: no replica {absent[0]} (it has {','.join(map(str, paths))}); "
                             "choose --replicas among those")
        paths = {r: paths[r] for r in wanted}

    topo_path = rd.topology_path
    topo = rd.topology()
    bb = rd.backbone()
    if len(bb) < 3:
        raise InputError(f"{topo_path}: {len(bb)} {bead} beads; the analysis needs one {bead} bead per residue "
                         f"(at least 3) as {rd.command} writes them")

    # reference structure: the run's start, or the user's PDB
    notes: List[str] = []
    ref_path = os.path.abspath(s.reference) if s.reference else topo_path
    ref_pdb = topo if not s.reference else read_pdb(ref_path)
    ref_idx = backbone_beads(ref_pdb.topology, bead)
    ref_name = bead
    if len(ref_idx) == 0 and bead == "BB":
        ref_idx, ref_name = backbone_beads(ref_pdb.topology, "CA"), "CA"
        notes.append(f"the reference {os.path.basename(ref_path)} has no BB beads: its CA atoms stand in for them")
    if len(ref_idx) != len(bb):
        raise InputError(f"{ref_path}: {len(ref_idx)} {ref_name} atoms but the run has {len(bb)} residues ({bead} "
                         "beads); give the structure the run was started from")
    ref = pdb_positions(ref_pdb, ref_idx)
    residues = [f"{res.name}{res.resSeq}" for res in (topo.topology.atom(int(i)).residue for i in bb)]

    try:
        cfg = rd.run_json() or {}
    except (OSError, ValueError) as exc:
        notes.append(f"run.json is unreadable ({exc}); settings taken from the trajectory headers")
        cfg = {}
    if ladder is not None:               # each temperature its own kT; run.json's temperature_K is not one of them
        temperature, t_source = None, ("run.json (temperatures)" if cfg.get("temperatures")
                                       else "the T<K>.dcd file names (to 0.1 K)")
    elif s.temperature_K is not None:
        temperature, t_source = float(s.temperature_K), "--temperature"
    elif isinstance(cfg.get("temperature_K"), (int, float)):
        temperature, t_source = float(cfg["temperature_K"]), "run.json"
    else:
        temperature, t_source = DEFAULT_TEMPERATURE_K, "default (no run.json)"
        notes.append(f"no temperature in run.json: F uses T = {DEFAULT_TEMPERATURE_K:g} K (set --temperature)")
    units = list(paths.items()) if ladder is None else list(ladder.items())
    kT = MOLAR_GAS_CONSTANT_KJ_MOL_K * temperature if temperature is not None else None
    unit_key = "replica" if ladder is None else "temperature_K"

    # trajectories: one per replica, or per temperature (T<K>.dcd) of a parallel-tempering run
    from tqdm.auto import tqdm

    pairs = native_contacts(ref, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    records, pooled, intervals = [], [], []
    for r, path in tqdm(units, desc="reading trajectories", unit="replica" if ladder is None else "temperature",
                        disable=not progress, leave=False):
        info = read_header(path)
        if info.atoms != topo.n_atoms:
            raise InputError(f"{path}: {info.atoms} atoms per frame but {topo_path} has {topo.n_atoms}; they are "
                             "not from the same run (analyse the directory the run wrote, unmodified)")
        xyz = read_dcd(path, bb)
        if len(xyz) == 0 and ladder is not None:
            notes.append(f"{os.path.basename(path)}: no frame (its walker was dropped before the first report?); "
                         f"{r:.1f} K is left out")
            continue
        if len(xyz) == 0:
            raise InputError(f"{path}: no complete frame; the run wrote no trajectory frame yet (run more steps "
                             "than --report-interval, or analyse after it has written some)")
        if len(xyz) < info.frames:
            notes.append(f"{os.path.basename(path)}: the header announces {info.frames} frames, {len(xyz)} are "
                         "complete (a run cut short); the complete ones are used")
        steps = info.first_step + info.interval * np.arange(len(xyz))
        frames = xyz[::s.stride]
        steps = steps[::s.stride]
        dt_ps = float(cfg["dt_fs"]) * 1e-3 if isinstance(cfg.get("dt_fs"), (int, float)) else info.dt_ps
        rmsd_t, _ = kabsch_align(frames, ref)
        rg_t = radius_of_gyration(frames)
        q_t = fraction_native_contacts(frames, ref, pairs)
        intervals.append(int(info.interval))
        records.append({
            unit_key: r, "file": os.path.basename(path), "frames": len(frames), "step": steps,
            "time_ps": steps * dt_ps if dt_ps > 0 else np.full(len(steps), np.nan),
            "rmsd_nm": rmsd_t, "rg_nm": rg_t, "q": q_t, "rmsf_nm": rmsf(frames, ref),
            "summary": {"frames": len(frames), "rmsd_mean_nm": float(rmsd_t.mean()), "rmsd_std_nm": float(rmsd_t.std()),
                        "final_rmsd_nm": float(rmsd_t[-1]), "rg_mean_nm": float(rg_t.mean()),
                        "rg_std_nm": float(rg_t.std()),
                        "q_mean": float(q_t.mean()) if len(pairs) else float("nan"),
                        "q_final": float(q_t[-1]) if len(pairs) else float("nan")}})
        if ladder is not None:
            records[-1]["kT_kJ_mol"] = MOLAR_GAS_CONSTANT_KJ_MOL_K * r
        pooled.append(frames)
    if not pooled:
        raise InputError(f"{run_dir}: no T<K>.dcd file has a frame; the run wrote no trajectory frame (run more "
                         "steps than --report-interval)")
    allframes = np.concatenate(pooled)

    # log.csv: energy and temperature traces
    log = rd.read_log(echo=lambda m: notes.append(m.removeprefix("note: ")),
                      extra=("thermostat_K",) if ladder is not None else ())
    if ladder is not None:
        log = _rung_logs(rd, log, [rec["temperature_K"] for rec in records], notes)
        for rec in records:
            rows = rec["log"] = log.get(rec["temperature_K"])
            if rows is not None:
                rec["summary"]["potential_energy_mean_kJ_mol"] = float(np.mean(rows["potential_energy_kJ_mol"]))
                rec["summary"]["temperature_mean_K"] = float(np.mean(rows["temperature_K"]))
    elif log is not None:
        for rec in records:
            rows = log.get(rec["replica"])
            if rows is not None and len(rows["step"]):
                rec["summary"]["potential_energy_mean_kJ_mol"] = float(np.mean(rows["potential_energy_kJ_mol"]))
                rec["summary"]["temperature_mean_K"] = float(np.mean(rows["temperature_K"]))
        log = {r: v for r, v in log.items() if r in paths}
        if not log:
            notes.append("log.csv has no rows for the analysed replicas: no energy/temperature traces")
    else:
        notes.append("no log.csv in the run directory: no energy/temperature traces")

    native_map = contact_map(ref, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    interval = cfg.get("report_interval")
    interval = int(interval) if isinstance(interval, int) and interval > 0 else max(intervals)
    if ladder is not None:
        # per temperature: its own contact map, and F = -kT ln p with its own kT (no pooling, no reweighting)
        for rec, frames in zip(records, pooled):
            bins = int(s.bins) if s.bins else int(np.clip(round(math.sqrt(len(frames))), 5, 50))
            f_t, xe, ye = free_energy_surface(rec["rmsd_nm"], rec["rg_nm"], rec["kT_kJ_mol"], bins=bins)
            rec["contact_map"] = contact_map(frames, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
            rec["fes"] = {"x": "rmsd_nm", "y": "rg_nm", "bins": bins, "rmsd_edges_nm": xe, "rg_edges_nm": ye,
                          "free_energy_kJ_mol": f_t}
        logged = {r["temperature_K"]: r["log"] for r in records if r["log"] is not None}
        shortfalls = too_little_data(records, "temperature_K", logged, pooled=False, interval=interval,
                                     stride=s.stride)
        result: Dict[str, object] = {
            "run_dir": run_dir, "kind": kind, "ensemble": "parallel tempering", "backbone_bead": bead,
            "topology": topo_path, "reference": ref_path, "settings": asdict(s), "temperature_source": t_source,
            "temperatures_K": [rec["temperature_K"] for rec in records],
            "n_residues": len(bb), "residues": residues, "n_native_contacts": int(len(pairs)),
            "rg_reference_nm": float(radius_of_gyration(ref)), "frames_total": int(len(allframes)),
            "temperatures": records,
            "contact_map": {"cutoff_nm": CONTACT_CUTOFF_NM, "min_separation": CONTACT_MIN_SEPARATION,
                            "reference": native_map},
            "notes": notes, "too_little_data": shortfalls, "files": list(REPORT_FILES + FIGURES),
        }
    else:
        # pooled maps
        cmap = contact_map(allframes, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
        rmsd_all = np.concatenate([rec["rmsd_nm"] for rec in records])
        rg_all = np.concatenate([rec["rg_nm"] for rec in records])
        bins = int(s.bins) if s.bins else int(np.clip(round(math.sqrt(len(rmsd_all))), 5, 50))
        fes, xe, ye = free_energy_surface(rmsd_all, rg_all, kT, bins=bins)
        shortfalls = too_little_data(records, "replica", log or {}, pooled=True, interval=interval,
                                     stride=s.stride)
        result = {
            "run_dir": run_dir, "kind": kind, "backbone_bead": bead, "topology": topo_path, "reference": ref_path,
            "settings": asdict(s), "temperature_K": temperature, "temperature_source": t_source, "kT_kJ_mol": kT,
            "n_residues": len(bb), "residues": residues, "n_native_contacts": int(len(pairs)),
            "rg_reference_nm": float(radius_of_gyration(ref)), "frames_total": int(len(allframes)),
            "replicas": records,
            "log": None if not log else {r: {k: v for k, v in cols.items()} for r, cols in log.items()},
            "contact_map": {"cutoff_nm": CONTACT_CUTOFF_NM, "min_separation": CONTACT_MIN_SEPARATION,
                            "fraction": cmap, "reference": native_map},
            "fes": {"x": "rmsd_nm", "y": "rg_nm", "bins": bins, "rmsd_edges_nm": xe, "rg_edges_nm": ye,
                    "free_energy_kJ_mol": fes},
            "notes": notes, "too_little_data": shortfalls, "files": list(REPORT_FILES + FIGURES),
        }
    # all files or none: a full disk leaves no truncated figure and keeps a previous report whole (OutputError)
    with staged_files(out, what="writing the analysis report") as stage:
        plot_report(result, stage)
        with open(os.path.join(stage, "report.md"), "w") as f:
            f.write(markdown(result))
        safe = _json_safe(result)
        with open(os.path.join(stage, "report.json"), "w") as f:
            json.dump(safe, f, indent=1, allow_nan=False)
    safe["out"] = out
    return safe


def _rung_logs(rd: RunDir, log: Optional[Dict[int, Dict[str, np.ndarray]]], temps: Sequence[float],
               notes: List[str]) -> Dict[float, Dict[str, np.ndarray]]:
    """log.csv of a parallel-tempering run (per walker) regrouped by temperature.

    A row belongs to the rung its walker was at during the segment that ends at its step (the rung whose
    ``T<K>.dcd`` holds that walker's frame of the step): its ``thermostat_K``, or, in a log without that
    column, the rung ``walkers.csv`` gives the walker at that step. A log that says neither leaves the energies
    unattributed (noted), never labelled with a guess.

    Returns
    -------
    dict {T_K: {"step", "time_ps", "potential_energy_kJ_mol", "temperature_K", "walker"}}
        Arrays in step order, for the temperatures in ``temps`` that have rows.
    """
    if log is None:
        notes.append("no log.csv in the run directory: no energy/temperature traces")
        return {}
    temps = np.asarray(temps, dtype=float)
    rows: Dict[float, list] = {}
    lost = 0
    if all(np.isfinite(cols["thermostat_K"]).all() for cols in log.values()):
        source = None
        for w, cols in log.items():
            for i, t in enumerate(cols["thermostat_K"]):
                k = int(np.argmin(np.abs(temps - t))) if len(temps) else -1
                if k < 0 or abs(temps[k] - t) > RUNG_MATCH_K:
                    lost += 1
                    continue
                rows.setdefault(float(temps[k]), []).append((cols["step"][i], cols["time_ps"][i],
                                                             cols["potential_energy_kJ_mol"][i],
                                                             cols["temperature_K"][i], w))
    else:
        at = _walker_rungs(rd.file("walkers.csv"), temps)
        if at is None:
            notes.append("log.csv does not say which temperature each row was at (no thermostat_K column, no "
                         "readable walkers.csv): its energies are not attributed to temperatures, and not shown")
            return {}
        source = "walkers.csv"
        for w, cols in log.items():
            for i, step in enumerate(cols["step"]):
                t = at.get((int(step), w))
                if t is None:
                    lost += 1
                    continue
                rows.setdefault(t, []).append(
                    (step, cols["time_ps"][i], cols["potential_energy_kJ_mol"][i], cols["temperature_K"][i], w))
    if source:
        notes.append(f"log.csv has no thermostat_K column: its rows are attributed to temperatures by {source}")
    if lost:
        notes.append(f"log.csv: {lost} row(s) at no analysed temperature are left out of the energy traces")
    if not rows:
        notes.append("log.csv has no rows for the analysed temperatures: no energy/temperature traces")
    out = {}
    for t, vals in rows.items():
        a = np.array(sorted(vals, key=lambda v: v[0]), dtype=float)
        out[t] = {"step": a[:, 0].astype(int), "time_ps": a[:, 1], "potential_energy_kJ_mol": a[:, 2],
                  "temperature_K": a[:, 3], "walker": a[:, 4].astype(int)}
    return out


def _walker_rungs(path: str, temps: np.ndarray) -> Optional[Dict[tuple, float]]:
    """``{(step, walker): T_K}`` from a parallel-tempering run's ``walkers.csv`` (a column per rung, named as
    its T<K>.dcd); None when there is no such file or it cannot be read."""
    import csv

    from .ensemble.ladder import rung_name

    try:
        with open(path, newline="", encoding="utf-8") as f:
            table = list(csv.reader(f))
        header = table[0]
        columns = {header.index(rung_name(t)): float(t) for t in temps if rung_name(t) in header}
        at = {}
        for row in table[1:]:
            if len(row) != len(header):
                continue                      # a partial last row (a run cut short)
            for c, t in columns.items():
                at[(int(row[0]), int(row[c]))] = t
    except (OSError, UnicodeDecodeError, IndexError, ValueError, csv.Error):
        return None
    return at


def too_little_data(records: Sequence[Dict[str, object]], key: str, logs: Dict[object, Dict[str, np.ndarray]],
                    pooled: bool, interval: int, stride: int) -> List[Dict[str, object]]:
    """The figures whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES``, and how much more they need.

    Parameters
    ----------
    records : list of dict
        One per replica (``key="replica"``) or per temperature (``key="temperature_K"``), with ``"frames"``.
    key : {"replica", "temperature_K"}
    logs : dict {replica or temperature: log columns}
        The log.csv rows behind the energy traces.
    pooled : bool
        The contact map and F pool every record's frames (replicas of one temperature), rather than one each
        (the temperatures of a tempering run).
    interval : int
        Steps per report (a frame per record and a log row); 0 when unknown.
    stride : int
        ``--stride``: every stride-th frame is analysed (log rows are not thinned).

    Returns
    -------
    list of dict
        Per shortfall: ``figure``, ``quantity``, ``subjects`` (replica numbers or temperatures, K; None when
        pooled), ``frames`` (the fewest), ``needed``, ``more_frames``, ``more_steps`` (None when the interval is
        unknown) and ``message`` (one line).
    """
    out: List[Dict[str, object]] = []

    def named(subjects) -> str:
        if key == "replica":
            return ("replica " if len(subjects) == 1 else "replicas ") + ", ".join(str(r) for r in subjects)
        return ", ".join(f"{t:.1f}" for t in subjects) + " K"

    def add(figure, quantity, counts, need, per_report=1, unit="frames", thinned=True):
        short = {k: int(n) for k, n in counts.items() if n < need}
        if not short:
            return
        have = min(short.values())
        more = need - have
        reports = -(-more * (stride if thinned else 1) // per_report)
        steps = reports * interval if interval > 0 else None
        if None in short:
            what = f"{quantity} from {have} {unit}" + (f" ({len(records)} replicas pooled)" if len(records) > 1 else "")
        else:
            spread = (f"{have} {unit}" + (" each" if len(short) > 1 else "") if len(set(short.values())) == 1
                      else f"{have}-{max(short.values())} {unit}")
            what = f"{quantity} of {named(list(short))} from {spread}"
        how = (f"about {steps} more steps at the report interval of {interval}" if steps is not None
               else f"{reports} more reports")
        how += ", or a smaller --report-interval" + (f" or --stride (now {stride})" if thinned and stride > 1 else "")
        out.append({"figure": figure, "quantity": quantity, "subjects": None if None in short else list(short),
                    "frames": have, "needed": int(need), "more_frames": more, "more_steps": steps,
                    "message": f"too little data for {figure}: {what}; at least {need} are needed "
                               f"({more} more: {how})"})

    frames = {rec[key]: rec["frames"] for rec in records}
    add("energy.png", "the energy and temperature traces", {k: len(v["step"]) for k, v in logs.items()},
        MIN_TRACE_POINTS, unit="log rows", thinned=False)
    add("structure.png", "the RMSD, Rg and Q traces", frames, MIN_TRACE_POINTS, unit="points")
    add("structure.png", "the RMSF", frames, MIN_RMSF_FRAMES)
    maps = {None: sum(frames.values())} if pooled else frames
    per_report = len(records) if pooled else 1
    add("contacts.png", "the contact map", maps, MIN_CONTACT_FRAMES, per_report)
    add("fes.png", "F(RMSD, Rg)", maps, MIN_FES_FRAMES, per_report)
    return out
