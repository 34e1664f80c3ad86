"""The series ``flashschnet-analyze``'s report is drawn from, read from a run directory
(:class:`flashschnet.openmm.run_reader.RunDir`), one record per replica, or per temperature of a parallel-tempering run:

* :func:`trajectory_series`: each trajectory's backbone frames (every ``stride``-th complete frame of its DCD,
  :func:`flashschnet.openmm.dcd.read_dcd`) and their RMSD to the reference after Kabsch superposition, radius of
  gyration, fraction of native contacts Q, per-residue RMSF (nm), steps and times;
* :func:`log_series`: ``log.csv``'s potential energy (kJ/mol) and temperature (K) rows per replica, or, for a
  tempering run, regrouped by the temperature each walker was at (its ``thermostat_K``, else ``walkers.csv``);
  never labelled with a guess.

What is read but left out (a partial last frame, a temperature without a frame, unattributable log rows) is
said in ``notes``; bad input raises :class:`~flashschnet.errors.InputError` (one line: the file and what to do).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .observables import MOLAR_GAS_CONSTANT_KJ_MOL_K, fraction_native_contacts, kabsch_align, radius_of_gyration, rmsf
from .run_reader import RunDir, step_fs

#: a log row's thermostat temperature is its rung's when within this (K): rung names are 0.1 K apart at least
RUNG_MATCH_K = 0.051


def trajectory_series(rd: RunDir, units: Sequence[Tuple[object, str]], tempering: bool, backbone: np.ndarray,
                      ref: np.ndarray, pairs: np.ndarray, cfg: Dict[str, object], stride: int, notes: List[str],
                      progress: bool = True) -> Tuple[List[Dict[str, object]], List[np.ndarray], List[int]]:
    """Each trajectory's backbone frames and their RMSD, Rg, Q and RMSF.

    Parameters
    ----------
    rd : RunDir
        The run: its reader (:meth:`RunDir.frames`: the complete, undamaged frames; what it leaves out is noted).
    units : list of (replica, path) or (temperature in K, path)
        The trajectories: one per replica, or the ``T<K>.dcd`` of each temperature (``tempering``).
    tempering : bool
        A parallel-tempering run: a temperature without a frame is left out (noted) and each record gets its
        ``kT_kJ_mol``; else a trajectory without a frame is an error.
    backbone : array of int
        The backbone bead of each residue (indices into a frame).
    ref : array (n_residues, 3)
        The reference backbone (nm); ``pairs`` its native contacts.
    cfg : dict
        run.json (its ``dt_fs`` sets the times, else the DCD header's).
    stride : int
        Every stride-th complete frame is used.
    notes : list of str
        Appended to.

    Returns
    -------
    records : list of dict
        Per unit: ``replica`` or ``temperature_K``, ``file``, ``frames``, ``step``, ``time_ps``, ``rmsd_nm``,
        ``rg_nm``, ``q``, ``rmsf_nm``, ``summary`` (and ``kT_kJ_mol`` when ``tempering``).
    frames : list of array (frames, n_residues, 3)
        The backbone frames used, per record.
    intervals : list of int
        Steps per frame, per record (the DCD headers').
    """
    from tqdm.auto import tqdm

    unit_key = "replica" if not tempering else "temperature_K"
    records, pooled, intervals = [], [], []
    n_atoms = rd.topology().n_atoms
    for r, path in tqdm(units, desc="reading trajectories", unit="replica" if not tempering else "temperature",
                        disable=not progress, leave=False):
        info = rd.header(path)
        if info.atoms != n_atoms:
            raise InputError(f"{path}: {info.atoms} atoms per frame but {rd.topology_path} has {n_atoms}; they are "
                             "not from the same run (restore the files the run wrote)")
        xyz = rd.frames(path, backbone)
        if len(xyz) == 0 and tempering:
            notes.append(f"{os.path.basename(path)}: no frame (its walker was dropped before the first report?); "
                         f"{r:.1f} K is left out")
            continue
        if len(xyz) == 0:
            raise InputError(f"{path}: no complete frame; the run wrote no trajectory frame yet (run more steps "
                             "than --report-interval, or analyse after it has written some)")
        steps = info.first_step + info.interval * np.arange(len(xyz))
        frames = xyz[::stride]
        steps = steps[::stride]
        dt_ps = step_fs(cfg) * 1e-3 if step_fs(cfg) is not None else info.dt_ps
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
        if tempering:
            records[-1]["kT_kJ_mol"] = MOLAR_GAS_CONSTANT_KJ_MOL_K * r
        pooled.append(frames)
    return records, pooled, intervals


def log_series(rd: RunDir, records: List[Dict[str, object]], replicas: Sequence[int], tempering: bool,
               notes: List[str]) -> Optional[Dict[object, Dict[str, np.ndarray]]]:
    """``log.csv``'s energy and temperature traces for the records of :func:`trajectory_series`.

    Each record's ``summary`` gets ``potential_energy_mean_kJ_mol`` and ``temperature_mean_K`` when it has log
    rows; a tempering run's records also get ``log`` (their rows, or None).

    Returns
    -------
    dict or None
        ``{replica: log columns}`` for the analysed ``replicas`` (None without a log.csv), or for a tempering
        run ``{T_K: columns}`` (:func:`_rung_logs`).
    """
    log = rd.read_log(extra=("thermostat_K",) if tempering else ())
    if tempering:
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
        log = {r: v for r, v in log.items() if r in replicas}
        if not log:
            notes.append("log.csv has no rows for the analysed replicas: no energy/temperature traces")
    return log


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
    if log is None:                       # (RunDir notes the missing file)
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

    from .ladder import rung_name

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
