"""The report behind ``flashschnet-analyze``: a run directory in, ``report.md`` + PNG figures + ``report.json`` out.

Run directories understood (read by :class:`flashschnet.openmm.run_reader.RunDir`):

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
  frames, T from ``run.json``, else ``--temperature``, else 300 K (a ``--temperature`` other than ``run.json``'s is
  refused: one temperature's frames are not reweighted to another); F = 0 at the most populated bin,
  unsampled bins are left empty (NaN in the figure, null in the JSON).

A parallel-tempering run (``flashschnet-simulate --temperatures``; :meth:`RunDir.ladder`) is analysed per
temperature, never per walker and never pooled: each ``T<K>.dcd`` (the demultiplexed frames at that
temperature) gets its traces, RMSF, contact map and F(RMSD, Rg) with its own kT = R T; ``log.csv`` rows go to the
temperature their walker was at (its ``thermostat_K``, else ``walkers.csv``). ``--temperature`` and
``--replicas`` are refused there. Those per-temperature results are not reweighted; across temperatures,
:mod:`flashschnet.openmm.analyze_thermo` adds MBAR's thermodynamics (``thermo.csv``: energy, heat capacity, Q, Rg,
RMSD against T; melting temperatures; reweighted F(Q, Rg) and F(RMSD, Rg)) and the walkers' mixing
(``exchange_diagnostics.json``), written by :mod:`flashschnet.openmm.thermo_report`.

Too little data: a figure whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES`` is still drawn,
and :func:`~flashschnet.openmm.analyze_sufficiency.too_little_data` says (report.json ``too_little_data``,
report.md, a ``warning:`` line) how many more frames and steps it needs.

This module checks the settings, picks the reference and the temperature(s), computes the contact maps and F and
writes the report. The series come from :mod:`flashschnet.openmm.analyze_series` (DCD files read with
:func:`flashschnet.openmm.dcd.read_dcd`, which ignores a partial last frame: a run killed mid-write; log.csv rows
per temperature), the shortfalls from :mod:`flashschnet.openmm.analyze_sufficiency`, the files from
:mod:`flashschnet.openmm.analyze_report`. Bad input raises :class:`~flashschnet.errors.InputError` (one line: the
file and what to do); a damaged file the analysis can go on without, or past (a trajectory cut short), is a note,
kept apart in ``report.json`` as ``input_warnings`` (:class:`~flashschnet.openmm.run_reader.RunDir`). The options
are checked against the run as flashschnet-backmap checks them (:mod:`flashschnet.openmm.run_options`).
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
from .observables import MOLAR_GAS_CONSTANT_KJ_MOL_K, contact_map, free_energy_surface, native_contacts, radius_of_gyration
from .analyze_report import markdown, plot_report
from .analyze_series import RUNG_MATCH_K, log_series, trajectory_series  # noqa: F401  (RUNG_MATCH_K: its old home)
from .analyze_sufficiency import (MIN_CONTACT_FRAMES, MIN_FES_FRAMES, MIN_RMSF_FRAMES,  # noqa: F401  (their old home)
                                  MIN_TRACE_POINTS, too_little_data)
from .analyze_thermo import check_options as check_thermo_options
from .analyze_thermo import tempering_thermo
from . import thermo_report
from .run_checks import check_rungs, check_size
from .run_options import not_for_tempering, reference_residues, replica_choice
from .run_reader import RunDir, backbone_beads, pdb_positions, read_pdb
from .runner.directory import make_run_dir

REPORT_FILES = ("report.md", "report.json")
FIGURES = ("energy.png", "structure.png", "contacts.png", "fes.png")
CONTACT_CUTOFF_NM = 0.8
CONTACT_MIN_SEPARATION = 3
DEFAULT_TEMPERATURE_K = 300.0


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
    temperatures_out: Optional[str] = None   # tempering: MBAR's temperatures, "TMIN:TMAX:N" or a list (default ladder)
    fes_temperatures: Optional[str] = None   # tempering: reweighted F(Q, Rg), F(RMSD, Rg) at these (default the ends)
    bootstrap: Optional[int] = None          # tempering: resamplings for the melting temperatures' uncertainties


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
    rd = RunDir(run_dir)                 # the one reader: its notes say what was damaged and what was done
    kind, bead, paths = rd.kind, rd.bead, rd.trajectories
    out = os.path.abspath(s.out) if s.out else os.path.join(run_dir, "analysis")
    if s.stride < 1:
        raise InputError(f"--stride must be >= 1, got {s.stride}")
    if s.temperature_K is not None and not s.temperature_K > 0:
        raise InputError(f"--temperature must be positive (K), got {s.temperature_K}")
    cfg = rd.settings()                  # run.json: another run's or unreadable is one line; missing, a note
    ladder = rd.ladder()                 # {T_K: T<K>.dcd} of a parallel-tempering run, else None
    if s.temperature_K is not None:
        not_for_tempering("--temperature", f"{s.temperature_K:g}", rd, ladder,
                          "it is analysed per temperature, each with its own kT")
        ran = cfg.get("temperature_K")
        if isinstance(ran, (int, float)) and not isinstance(ran, bool) and abs(float(ran) - s.temperature_K) > 1e-9:
            raise InputError(f"--temperature {s.temperature_K:g} contradicts the run's own {float(ran):g} K "
                             f"({os.path.join(run_dir, 'run.json')}): F = -kT ln p of frames sampled at "
                             f"{float(ran):g} K is the free energy at {float(ran):g} K only, and one temperature's "
                             "frames cannot be reweighted to another; drop --temperature (parallel tempering, "
                             "flashschnet-simulate --temperatures, samples several)")
    if s.replicas is not None:
        not_for_tempering("--replicas", ",".join(map(str, s.replicas)), rd, ladder,
                          "it is analysed per temperature from its T<K>.dcd files, not per walker")
    targets, fes_temps = check_thermo_options(s.temperatures_out, s.fes_temperatures, s.bootstrap, ladder, rd)
    if s.replicas is not None:
        paths = {r: paths[r] for r in replica_choice("--replicas", list(dict.fromkeys(int(r) for r in s.replicas)),
                                                      rd, ladder)}
    existing = [n for n in REPORT_FILES if os.path.exists(os.path.join(out, n))]
    if existing and not s.force:
        raise InputError(f"{os.path.join(out, existing[0])}: a report is already there; pass --force to overwrite "
                         "it or choose another --out")

    topo_path = rd.topology_path
    topo = rd.topology()
    bb = rd.backbone()
    if len(bb) < 3:
        raise InputError(f"{topo_path}: {len(bb)} {bead} beads; the analysis needs one {bead} bead per residue "
                         f"(at least 3) as {rd.command} writes them")

    # reference structure: the run's start, or the user's PDB (of the same protein)
    notes: List[str] = []
    ref_path = os.path.abspath(s.reference) if s.reference else topo_path
    ref_pdb = topo if not s.reference else read_pdb(ref_path)
    ref_idx = backbone_beads(ref_pdb.topology, bead)
    ref_name = bead
    if len(ref_idx) == 0 and bead == "BB":
        ref_idx, ref_name = backbone_beads(ref_pdb.topology, "CA"), "CA"
        notes.append(f"the reference {os.path.basename(ref_path)} has no BB beads: its CA atoms stand in for them")
    residue_names = [topo.topology.atom(int(i)).residue.name for i in bb]
    reference_residues(topo_path, residue_names, ref_path,
                       [ref_pdb.topology.atom(int(i)).residue.name for i in ref_idx],
                       f"give a structure of the run's protein with one {ref_name} per residue (e.g. its "
                       "cleaned.pdb)")
    ref = pdb_positions(ref_pdb, ref_idx)
    residues = [f"{res.name}{res.resSeq}" for res in (topo.topology.atom(int(i)).residue for i in bb)]
    rd.checkpoint()                      # what the trajectories and the log are checked against (notes)
    if ladder is not None:
        check_size(rd, "exchanges.csv")
        check_rungs(rd, ladder, "delete it and write it again from the walkers' trajectories with "
                                f"flashschnet-simulate --resume --out {run_dir}")
    make_run_dir(out)                    # a read-only or unwritable --out: one line (exit 2) before the work

    if ladder is not None:               # each temperature its own kT; run.json's temperature_K is not one of them
        temperature, t_source = None, ("run.json (temperatures)" if cfg.get("temperatures")
                                       else "the T<K>.dcd file names (to 0.1 K)")
    elif s.temperature_K is not None:      # (the run's own temperature, or a run that recorded none: checked above)
        temperature, t_source = float(s.temperature_K), "--temperature"
    elif isinstance(cfg.get("temperature_K"), (int, float)):
        temperature, t_source = float(cfg["temperature_K"]), "run.json"
    else:
        temperature, t_source = DEFAULT_TEMPERATURE_K, "default (no run.json)"
        notes.append(f"no temperature in run.json: F uses T = {DEFAULT_TEMPERATURE_K:g} K (set --temperature)")
    units = list(paths.items()) if ladder is None else list(ladder.items())
    kT = MOLAR_GAS_CONSTANT_KJ_MOL_K * temperature if temperature is not None else None

    # trajectories: one per replica, or per temperature (T<K>.dcd) of a parallel-tempering run
    pairs = native_contacts(ref, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    records, pooled, intervals = trajectory_series(rd, units, ladder is not None, bb, ref, pairs, cfg, s.stride, notes,
                                                   progress)
    if not pooled:
        raise InputError(f"{run_dir}: no T<K>.dcd file has a frame; the run wrote no trajectory frame (run more "
                         "steps than --report-interval)")
    allframes = np.concatenate(pooled)

    # log.csv: energy and temperature traces
    log = log_series(rd, records, list(paths), ladder is not None, notes)

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
        # across temperatures: MBAR thermodynamics (thermo.csv) and the walkers' mixing (exchange_diagnostics.json)
        thermo, exchange, warnings = tempering_thermo(run_dir, records, list(ladder), cfg, targets, fes_temps,
                                                      s.bootstrap, s.bins, notes, rd.notes)
        result.update({"thermo": thermo, "exchange": exchange, "warnings": warnings})
        result["files"] += thermo_report.files(result)
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
    # what the run directory's files lacked (RunDir's notes) first, and apart: report.json's input_warnings
    result["input_warnings"] = list(rd.notes)
    result["notes"] = list(rd.notes) + [n for n in notes if n not in rd.notes]
    # all files or none: a full disk leaves no truncated figure and keeps a previous report whole (OutputError)
    with staged_files(out, what="writing the analysis report") as stage:
        plot_report(result, stage)
        thermo_report.write(result, stage, _json_safe)
        with open(os.path.join(stage, "report.md"), "w") as f:
            f.write(markdown(result) + thermo_report.markdown(result))
        safe = _json_safe(result)
        with open(os.path.join(stage, "report.json"), "w") as f:
            json.dump(safe, f, indent=1, allow_nan=False)
    safe["out"] = out
    return safe
