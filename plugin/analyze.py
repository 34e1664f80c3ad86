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

from ..errors import InputError
from .analysis import (MOLAR_GAS_CONSTANT_KJ_MOL_K, contact_map, fraction_native_contacts, free_energy_surface,
                       kabsch_align, native_contacts, radius_of_gyration, rmsf)
from .rundir import RunDir, backbone_beads, pdb_positions, read_pdb

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
    existing = [n for n in REPORT_FILES if os.path.exists(os.path.join(out, n))]
    if existing and not s.force:
        raise InputError(f"{os.path.join(out, existing[0])}: a report is already there; pass --force to overwrite "
                         "it or choose another --out")
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
    if s.temperature_K is not None:
        temperature, t_source = float(s.temperature_K), "--temperature"
    elif isinstance(cfg.get("temperature_K"), (int, float)):
        temperature, t_source = float(cfg["temperature_K"]), "run.json"
    else:
        temperature, t_source = DEFAULT_TEMPERATURE_K, "default (no run.json)"
        notes.append(f"no temperature in run.json: F uses T = {DEFAULT_TEMPERATURE_K:g} K (set --temperature)")
    kT = MOLAR_GAS_CONSTANT_KJ_MOL_K * temperature

    # trajectories
    from tqdm.auto import tqdm

    pairs = native_contacts(ref, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    per_replica, pooled = [], []
    for r, path in tqdm(list(paths.items()), desc="reading trajectories", unit="replica", disable=not progress,
                        leave=False):
        info = rd.header(r)
        if info.atoms != topo.n_atoms:
            raise InputError(f"{path}: {info.atoms} atoms per frame but {topo_path} has {topo.n_atoms}; they are "
                             "not from the same run (analyse the directory the run wrote, unmodified)")
        xyz = rd.frames(r, bb)
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
        per_replica.append({
            "replica": r, "file": os.path.basename(path), "frames": len(frames), "step": steps,
            "time_ps": steps * dt_ps if dt_ps > 0 else np.full(len(steps), np.nan),
            "rmsd_nm": rmsd_t, "rg_nm": rg_t, "q": q_t, "rmsf_nm": rmsf(frames, ref),
            "summary": {"frames": len(frames), "rmsd_mean_nm": float(rmsd_t.mean()), "rmsd_std_nm": float(rmsd_t.std()),
                        "final_rmsd_nm": float(rmsd_t[-1]), "rg_mean_nm": float(rg_t.mean()),
                        "rg_std_nm": float(rg_t.std()),
                        "q_mean": float(q_t.mean()) if len(pairs) else float("nan"),
                        "q_final": float(q_t[-1]) if len(pairs) else float("nan")}})
        pooled.append(frames)
    allframes = np.concatenate(pooled)

    # log.csv: energy and temperature traces
    log = rd.read_log(echo=lambda m: notes.append(m.removeprefix("note: ")))
    if log is not None:
        for rec in per_replica:
            rows = log.get(rec["replica"])
            if rows is not None and len(rows["step"]):
                rec["summary"]["potential_energy_mean_kJ_mol"] = float(np.mean(rows["potential_energy_kJ_mol"]))
                rec["summary"]["temperature_mean_K"] = float(np.mean(rows["temperature_K"]))
        log = {r: v for r, v in log.items() if r in paths}
        if not log:
            notes.append("log.csv has no rows for the analysed replicas: no energy/temperature traces")
    else:
        notes.append("no log.csv in the run directory: no energy/temperature traces")

    # pooled maps
    cmap = contact_map(allframes, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    native_map = contact_map(ref, CONTACT_CUTOFF_NM, CONTACT_MIN_SEPARATION)
    rmsd_all = np.concatenate([rec["rmsd_nm"] for rec in per_replica])
    rg_all = np.concatenate([rec["rg_nm"] for rec in per_replica])
    bins = int(s.bins) if s.bins else int(np.clip(round(math.sqrt(len(rmsd_all))), 5, 50))
    fes, xe, ye = free_energy_surface(rmsd_all, rg_all, kT, bins=bins)

    result: Dict[str, object] = {
        "run_dir": run_dir, "kind": kind, "backbone_bead": bead, "topology": topo_path, "reference": ref_path,
        "settings": asdict(s), "temperature_K": temperature, "temperature_source": t_source, "kT_kJ_mol": kT,
        "n_residues": len(bb), "residues": residues, "n_native_contacts": int(len(pairs)),
        "rg_reference_nm": float(radius_of_gyration(ref)), "frames_total": int(len(allframes)),
        "replicas": per_replica,
        "log": None if not log else {r: {k: v for k, v in cols.items()} for r, cols in log.items()},
        "contact_map": {"cutoff_nm": CONTACT_CUTOFF_NM, "min_separation": CONTACT_MIN_SEPARATION,
                        "fraction": cmap, "reference": native_map},
        "fes": {"x": "rmsd_nm", "y": "rg_nm", "bins": bins, "rmsd_edges_nm": xe, "rg_edges_nm": ye,
                "free_energy_kJ_mol": fes},
        "notes": notes, "files": list(REPORT_FILES + FIGURES),
    }
    os.makedirs(out, exist_ok=True)
    plot_report(result, out)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(result))
    safe = _json_safe(result)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(safe, f, indent=1, allow_nan=False)
    safe["out"] = out
    return safe


# -- output --------------------------------------------------------------------------------------------------

def _pm(mean: float, sd: float) -> str:
    return "n/a" if not np.isfinite(mean) else f"{mean:.3f} ± {sd:.3f}"


def _num(x: Optional[float], fmt: str = ".3f") -> str:
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def markdown(result: Dict[str, object]) -> str:
    """The ``report.md`` text of an :func:`analyze` result."""
    kind = "flashschnet-simulate" if result["kind"] == "flashschnet" else "flashschnet-martini"
    lines = [f"# Analysis of `{result['run_dir']}`", "",
             f"Run of {kind}; {len(result['replicas'])} replica(s), {result['n_residues']} residues "
             f"(one `{result['backbone_bead']}` bead each), {result['frames_total']} frames analysed "
             f"(stride {result['settings']['stride']}). Reference: `{result['reference']}` "
             f"(Rg {result['rg_reference_nm']:.3f} nm, {result['n_native_contacts']} native contacts). "
             f"T = {result['temperature_K']:g} K ({result['temperature_source']}).", "",
             "| replica | frames | RMSD mean ± sd (nm) | final RMSD (nm) | Rg mean ± sd (nm) | Q mean | Q final "
             "| ⟨E_pot⟩ (kJ/mol) | ⟨T⟩ (K) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for rec in result["replicas"]:
        m = rec["summary"]
        lines.append(f"| {rec['replica']} | {m['frames']} | {_pm(m['rmsd_mean_nm'], m['rmsd_std_nm'])} "
                     f"| {_num(m['final_rmsd_nm'])} | {_pm(m['rg_mean_nm'], m['rg_std_nm'])} | {_num(m['q_mean'])} "
                     f"| {_num(m['q_final'])} | {_num(m.get('potential_energy_mean_kJ_mol'), '.6g')} "
                     f"| {_num(m.get('temperature_mean_K'), '.1f')} |")
    lines += ["",
              "RMSD: backbone beads after Kabsch superposition on the reference. Q: fraction of the reference's "
              f"contacts (< {result['contact_map']['cutoff_nm']:g} nm, >= {result['contact_map']['min_separation']} "
              "residues apart) within 1.2 x their reference distance. Means over all analysed frames.", "",
              "## Energy and temperature", "",
              "![energy and temperature](energy.png)" if result["log"] else "(no log.csv rows: not shown)", "",
              "## Structure", "", "![RMSD, Rg, Q, RMSF](structure.png)", "",
              "## Contact map", "",
              f"Upper-right triangle: fraction of frames (all replicas) with {result['backbone_bead']}-"
              f"{result['backbone_bead']} distance < {result['contact_map']['cutoff_nm']:g} nm; lower-left triangle: "
              "the reference's contacts (1 = in contact).", "", "![contact map](contacts.png)", "",
              "## Free-energy surface", "",
              f"F(RMSD, Rg) = -kT ln p in kJ/mol (kT = {result['kT_kJ_mol']:.4g} kJ/mol), all replicas pooled, "
              f"{result['fes']['bins']} x {result['fes']['bins']} bins; F = 0 at the most populated bin, white: "
              "not sampled.", "", "![free-energy surface](fes.png)", ""]
    if result["notes"]:
        lines += ["## Notes", ""] + [f"* {n}" for n in result["notes"]] + [""]
    return "\n".join(lines)


def plot_report(result: Dict[str, object], out: str) -> None:
    """Write ``FIGURES`` into ``out`` (matplotlib's Agg canvas: no display needed, pyplot not used)."""
    from matplotlib.figure import Figure

    reps = result["replicas"]

    def xaxis(rec, key="time_ps"):
        t = np.asarray(rec[key], dtype=float)
        return (t, "time (ps)") if np.isfinite(t).all() else (np.asarray(rec["step"], dtype=float), "step")

    # energy and temperature traces
    fig = Figure(figsize=(9, 6))
    ax_e, ax_t = fig.subplots(2, 1, sharex=True)
    log = result["log"] or {}
    for r, cols in log.items():
        t, label = xaxis(cols)
        ax_e.plot(t, cols["potential_energy_kJ_mol"], lw=1, label=f"replica {r}")
        ax_t.plot(t, cols["temperature_K"], lw=1)
    if log:
        ax_t.axhline(result["temperature_K"], color="k", ls=":", lw=1)
        ax_t.set_xlabel(label)
        ax_e.legend(fontsize="small")
    else:
        ax_e.text(0.5, 0.5, "no log.csv", ha="center", transform=ax_e.transAxes)
    ax_e.set_ylabel("potential energy (kJ/mol)")
    ax_t.set_ylabel("temperature (K)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "energy.png"), dpi=100)

    # structure over time and RMSF
    fig = Figure(figsize=(11, 8))
    axes = fig.subplots(2, 2)
    for rec in reps:
        t, label = xaxis(rec)
        for ax, key in zip(axes.flat[:3], ("rmsd_nm", "rg_nm", "q")):
            ax.plot(t, rec[key], lw=1, marker="." if len(t) < 50 else None, label=f"replica {rec['replica']}")
        axes.flat[3].plot(np.arange(1, len(rec["rmsf_nm"]) + 1), rec["rmsf_nm"], lw=1)
    axes.flat[1].axhline(result["rg_reference_nm"], color="k", ls=":", lw=1)
    for ax, ylab in zip(axes.flat, ("backbone RMSD (nm)", "radius of gyration (nm)", "native contacts Q",
                                    "RMSF (nm)")):
        ax.set_ylabel(ylab)
        ax.set_xlabel(label if ylab != "RMSF (nm)" else "residue")
    axes.flat[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "structure.png"), dpi=100)

    # contact map: simulation above the diagonal, reference below
    cm = np.asarray(result["contact_map"]["fraction"], dtype=float)
    nat = np.asarray(result["contact_map"]["reference"], dtype=float)
    n = len(cm)
    i, j = np.indices((n, n))
    both = np.where(j > i, cm, np.where(j < i, nat, np.nan))
    fig = Figure(figsize=(6.5, 5.5))
    ax = fig.subplots()
    im = ax.imshow(both, origin="upper", cmap="viridis", vmin=0, vmax=1, extent=(0.5, n + 0.5, n + 0.5, 0.5))
    fig.colorbar(im, ax=ax, label="fraction of frames in contact")
    ax.set_xlabel("residue")
    ax.set_ylabel("residue")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title("simulation (upper right) / reference (lower left)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "contacts.png"), dpi=100)

    # free-energy surface
    fes = result["fes"]
    fig = Figure(figsize=(6.5, 5))
    ax = fig.subplots()
    f = np.ma.masked_invalid(np.asarray(fes["free_energy_kJ_mol"], dtype=float))
    pm = ax.pcolormesh(fes["rmsd_edges_nm"], fes["rg_edges_nm"], f.T, cmap="magma_r", shading="flat")
    fig.colorbar(pm, ax=ax, label="F (kJ/mol)")
    ax.set_xlabel("backbone RMSD (nm)")
    ax.set_ylabel("radius of gyration (nm)")
    ax.set_title(f"F = -kT ln p, T = {result['temperature_K']:g} K", fontsize="medium")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fes.png"), dpi=100)
