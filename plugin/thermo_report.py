"""The files of ``flashschnet-analyze``'s thermodynamics and mixing sections (a parallel-tempering run; computed by
:func:`flashschnet.openmm.analyze_thermo.tempering_thermo`): ``thermo.csv`` (one row per output temperature),
``thermo.png`` (potential energy, heat capacity, Q, Rg and RMSD against T with one-standard-error bands and the
melting temperatures), ``thermo_fes.png`` (the reweighted F(Q, Rg) and F(RMSD, Rg)), ``exchange_diagnostics.json``
and ``exchange.png`` (:mod:`flashschnet.openmm.exchange_diagnostics`), and the report.md sections (:func:`markdown`).
Figures on matplotlib's Agg canvases (no display, no pyplot)."""
from __future__ import annotations

import csv
import json
import os
from typing import Callable, Dict, List

import numpy as np

from . import exchange_diagnostics

#: thermo.csv's columns after temperature_K, each followed by its ``_err`` (one standard error)
QUANTITIES = ("potential_energy_kJ_mol", "heat_capacity_kJ_mol_K", "Q", "rg_nm", "rmsd_nm", "reduced_free_energy")
COLUMNS = ["temperature_K"] + [c for q in QUANTITIES for c in (q, q + "_err")] + ["effective_samples"]


def files(result: Dict[str, object]) -> List[str]:
    """The names :func:`write` writes for this result."""
    names = []
    if result.get("thermo"):
        names += ["thermo.csv", "thermo.png", "thermo_fes.png"]
    if result.get("exchange"):
        names += [exchange_diagnostics.FILE, exchange_diagnostics.FIGURE]
    return names


def write(result: Dict[str, object], out: str, json_safe: Callable[[object], object]) -> None:
    """Write :func:`files` into ``out``."""
    thermo, exchange = result.get("thermo"), result.get("exchange")
    if thermo:
        table = thermo["table"]
        with open(os.path.join(out, "thermo.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for i in range(len(table["temperature_K"])):
                w.writerow([format(float(table[c][i]), ".10g") for c in COLUMNS])
        _plot_thermo(thermo, out)
    if exchange:
        with open(os.path.join(out, exchange_diagnostics.FILE), "w") as f:
            json.dump(json_safe(exchange), f, indent=1, allow_nan=False)
        exchange_diagnostics.plot(exchange, out)


def _num(x, fmt=".1f") -> str:
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def _pm(table, key, i, fmt) -> str:
    return f"{_num(table[key][i], fmt)} ± {_num(table[key + '_err'][i], fmt)}"


def markdown(result: Dict[str, object]) -> str:
    """report.md's "Thermodynamics (MBAR)" and "Exchange mixing" sections ('' when neither was computed)."""
    thermo, exchange = result.get("thermo"), result.get("exchange")
    lines: List[str] = []
    if thermo:
        t = thermo["table"]
        lines += ["## Thermodynamics (MBAR)", "", thermo["method"] + "; uncertainties: one standard error (MBAR's "
                  "asymptotic covariance; C propagated from the covariance of <U> and <U^2>). C = (<U^2> - <U>^2) / "
                  "(kB T^2) is the configurational heat capacity. Every row is in `thermo.csv`.", ""]
        lines += _unreliable(thermo) + [
            "| T (K) | <U> (kJ/mol) | C (kJ/mol/K) | Q | Rg (nm) | RMSD (nm) | effective samples |",
            "|---|---|---|---|---|---|---|"]
        for i in range(len(t["temperature_K"])):
            lines.append(f"| {t['temperature_K'][i]:.1f} | {_pm(t, 'potential_energy_kJ_mol', i, '.1f')} "
                         f"| {_pm(t, 'heat_capacity_kJ_mol_K', i, '.3f')} | {_pm(t, 'Q', i, '.3f')} "
                         f"| {_pm(t, 'rg_nm', i, '.3f')} | {_pm(t, 'rmsd_nm', i, '.3f')} "
                         f"| {t['effective_samples'][i]:.0f} |")
        m = thermo["melting"]
        if m:
            how = f"; uncertainty: {m['uncertainty']}" if "uncertainty" in m else ""
            lines += ["", f"Melting temperature (between {m['range_K'][0]:.1f} and {m['range_K'][1]:.1f} K{how}):", "",
                      f"* heat-capacity maximum: {_melt(m, 'heat_capacity_peak')}",
                      f"* <Q> = 0.5: {_melt(m, 'q_half')}"]
        lines += ["", "| T (K) | frames | equilibration (frames dropped) | statistical inefficiency g | samples |",
                  "|---|---|---|---|---|"]
        lines += [f"| {s['temperature_K']:.1f} | {s['frames']} | {s['equilibration_frames']} "
                  f"| {s['statistical_inefficiency']:.2f} | {s['samples']} |" for s in thermo["states"]]
        at = ", ".join(dict.fromkeys(format(s["temperature_K"], ".1f") for s in thermo["fes"]))
        thin = ", ".join(dict.fromkeys(f"{s['temperature_K']:.1f} K ({s['effective_frames']:.0f} effective frames)"
                                       for s in thermo["fes"] if not s.get("reliable", True)))
        lines += ["", "![thermodynamics](thermo.png)", "",
                  f"Reweighted free-energy surfaces F = -kT ln p (kJ/mol) at {at} K, "
                  f"{thermo['bins']} x {thermo['bins']} bins, every frame after equilibration weighted by MBAR"
                  + (f"; **unreliable** (see Warnings): {thin}" if thin else "") + ":", "",
                  "![reweighted free-energy surfaces](thermo_fes.png)", ""]
    if exchange:
        lines += ["## Exchange mixing", "", "| pair (K) | tried | accepted | acceptance |", "|---|---|---|---|"]
        lines += [f"| {p['T_lo_K']:.1f}-{p['T_hi_K']:.1f} | {p['attempts']} | {p['accepted']} "
                  f"| {_num(p['acceptance'], '.3f')} |" for p in exchange["pairs"]]
        trips = exchange["round_trips_total"]
        mean = exchange["mean_round_trip_steps"]
        lines += ["", f"Round trips (lowest -> highest -> lowest rung): {trips} in {exchange['steps']} steps"
                  + (f", mean {mean:.0f} steps" if mean is not None else "")
                  + (f" ({exchange['mean_round_trip_ps']:.1f} ps)" if exchange.get("mean_round_trip_ps") else "")
                  + ". Occupancy of each rung by each walker and each walker's rung over the run: "
                    "`exchange_diagnostics.json`.", "", "![exchange mixing](exchange.png)", ""]
    warnings = result.get("warnings") or []
    if warnings:
        lines += ["## Warnings", ""] + [f"* {w}" for w in warnings] + [""]
    return "\n".join(lines)


def _unreliable(thermo: Dict[str, object]) -> List[str]:
    """The paragraph that marks the MBAR section unreliable (none when its data suffice)."""
    enough = thermo.get("sufficiency") or {}
    if enough.get("sufficient", True):
        return []
    return [f"**Unreliable: {enough['reason']}** (thresholds: docs/analysis.md, \"Too little data for MBAR\"). "
            "The ± below are MBAR's asymptotic standard errors, which assume many independent, equilibrated samples "
            "from a mixed ladder whose neighbouring temperatures overlap: here they understate the uncertainty, the "
            "melting temperatures are not reported, and the reweighted surfaces are marked unreliable. Run longer "
            "(or use more, closer rungs).", ""]


def _melt(m: Dict[str, object], key: str) -> str:
    value, err = m[key + "_K"], m[key + "_err_K"]
    if m.get("withheld"):
        return f"not reported: {m['withheld']}"
    if value is None:
        return "none inside the range"
    used = m[key + "_replicates"]
    return (f"{value:.1f} ± {err:.1f} K ({used} of {m['bootstrap_replicates']} bootstrap replicates found one)"
            if err is not None else f"{value:.1f} K (no bootstrap uncertainty)")


def _plot_thermo(thermo: Dict[str, object], out: str) -> None:
    from matplotlib.figure import Figure

    t = thermo["table"]
    temps = np.asarray(t["temperature_K"], dtype=float)
    fig = Figure(figsize=(11, 7.5))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.07, top=0.95, wspace=0.25, hspace=0.3)
    axes = fig.subplots(2, 2).ravel()
    panels = [("potential_energy_kJ_mol", "<U> (kJ/mol)"), ("heat_capacity_kJ_mol_K", "C (kJ/mol/K)"),
              ("Q", "<Q>"), ("rg_nm", "<Rg>, <RMSD> (nm)")]
    for ax, (key, label) in zip(axes, panels):
        for k in ([key, "rmsd_nm"] if key == "rg_nm" else [key]):
            y, e = np.asarray(t[k], dtype=float), np.asarray(t[k + "_err"], dtype=float)
            line, = ax.plot(temps, y, marker="." if len(temps) < 40 else None, label=k)
            ax.fill_between(temps, y - e, y + e, color=line.get_color(), alpha=0.25, lw=0)
        ax.set_xlabel("T (K)")
        ax.set_ylabel(label)
    axes[3].legend(fontsize="small")
    axes[2].axhline(0.5, color="k", ls=":", lw=1)
    if not (thermo.get("sufficiency") or {}).get("sufficient", True):
        fig.suptitle("UNRELIABLE: too little data for MBAR (see report.md); melting temperatures not reported",
                     color="tab:red")
    m = thermo["melting"] or {}
    for ax, key in ((axes[1], "heat_capacity_peak_K"), (axes[2], "q_half_K")):
        if m.get(key) is not None:
            ax.axvline(m[key], color="tab:red", ls="--", lw=1)
            if m.get(key.replace("_K", "_err_K")) is not None:
                err = m[key.replace("_K", "_err_K")]
                ax.axvspan(m[key] - err, m[key] + err, color="tab:red", alpha=0.15, lw=0)
            ax.set_title(f"T_m = {m[key]:.1f} K", fontsize="medium")
    fig.savefig(os.path.join(out, "thermo.png"), dpi=100)

    surfaces = thermo["fes"]
    rows = len(surfaces) // 2
    fig = Figure(figsize=(10, 4.0 * rows))
    fig.subplots_adjust(left=0.08, right=0.97, bottom=0.12 / rows, top=1 - 0.08 / rows, wspace=0.35, hspace=0.35)
    axes = np.asarray(fig.subplots(rows, 2, squeeze=False)).ravel()
    labels = {"Q": "native contacts Q", "rmsd_nm": "backbone RMSD (nm)", "rg_nm": "radius of gyration (nm)"}
    for ax, s in zip(axes, surfaces):
        f = np.ma.masked_invalid(np.asarray(s["free_energy_kJ_mol"], dtype=float))
        pm = ax.pcolormesh(s["x_edges"], s["y_edges"], f.T, cmap="magma_r", shading="flat")
        fig.colorbar(pm, ax=ax, label="F (kJ/mol)")
        ax.set_xlabel(labels.get(s["x"], s["x"]))
        ax.set_ylabel(labels.get(s["y"], s["y"]))
        ax.set_title(f"T = {s['temperature_K']:.1f} K (reweighted)" + ("" if s.get("reliable", True) else
                     ", UNRELIABLE"), fontsize="medium", color="black" if s.get("reliable", True) else "tab:red")
    fig.savefig(os.path.join(out, "thermo_fes.png"), dpi=100)
