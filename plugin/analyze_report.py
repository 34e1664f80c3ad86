"""The report of ``flashschnet-analyze`` as files: ``report.md`` (:func:`markdown`) and the PNG figures
(:func:`plot_report`, on matplotlib's Agg canvases: no display needed, pyplot never imported), from the result of
:func:`flashschnet.openmm.analyze.analyze`. Plain runs get one row and one line per replica; parallel-tempering
runs one per temperature, each surface with its own kT."""
from __future__ import annotations

import os
from typing import Dict, List, Optional

import numpy as np

def _pm(mean: float, sd: float) -> str:
    return "n/a" if not np.isfinite(mean) else f"{mean:.3f} ± {sd:.3f}"


def _num(x: Optional[float], fmt: str = ".3f") -> str:
    return "n/a" if x is None or not np.isfinite(x) else format(x, fmt)


def markdown(result: Dict[str, object]) -> str:
    """The ``report.md`` text of an :func:`analyze` result."""
    if "temperatures" in result:
        return _markdown_tempering(result)
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
    lines += _shortfall_lines(result)
    if result["notes"]:
        lines += ["## Notes", ""] + [f"* {n}" for n in result["notes"]] + [""]
    return "\n".join(lines)


def _shortfall_lines(result: Dict[str, object]) -> List[str]:
    """report.md's "Too little data" section (none when every figure has enough)."""
    if not result["too_little_data"]:
        return []
    return (["## Too little data", "",
             "These figures have fewer frames than they need to mean anything (thresholds: docs/analysis.md, "
             "\"Too little data\"):", ""]
            + [f"* {short['message']}" for short in result["too_little_data"]] + [""])


def _markdown_tempering(result: Dict[str, object]) -> str:
    """``report.md`` of a parallel-tempering run: every result per temperature, none pooled."""
    temps = result["temperatures"]
    bead = result["backbone_bead"]
    ladder = ", ".join(f"{r['temperature_K']:.1f}" for r in temps)
    lines = [f"# Analysis of `{result['run_dir']}`", "",
             f"Parallel-tempering run of flashschnet-simulate: {len(temps)} temperatures "
             f"({ladder} K, from {result['temperature_source']}), "
             f"{result['n_residues']} residues (one `{bead}` bead each), {result['frames_total']} frames analysed "
             f"(stride {result['settings']['stride']}). Each temperature is analysed on its own, from its "
             "demultiplexed trajectory `T<K>.dcd` (at each report step, the frame of the walker that was at that "
             "temperature), with its own kT; no result pools temperatures, and the walkers' own trajectories "
             "(`replica_WWW.dcd`, each visiting many temperatures) are not analysed. Reference: "
             f"`{result['reference']}` (Rg {result['rg_reference_nm']:.3f} nm, {result['n_native_contacts']} "
             "native contacts).", "",
             "| T (K) | kT (kJ/mol) | file | frames | RMSD mean ± sd (nm) | final RMSD (nm) | Rg mean ± sd (nm) "
             "| Q mean | Q final | ⟨E_pot⟩ (kJ/mol) | ⟨T⟩ (K) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in temps:
        m = rec["summary"]
        lines.append(f"| {rec['temperature_K']:.1f} | {rec['kT_kJ_mol']:.4g} | `{rec['file']}` | {m['frames']} "
                     f"| {_pm(m['rmsd_mean_nm'], m['rmsd_std_nm'])} | {_num(m['final_rmsd_nm'])} "
                     f"| {_pm(m['rg_mean_nm'], m['rg_std_nm'])} | {_num(m['q_mean'])} | {_num(m['q_final'])} "
                     f"| {_num(m.get('potential_energy_mean_kJ_mol'), '.6g')} "
                     f"| {_num(m.get('temperature_mean_K'), '.1f')} |")
    cut, sep = result["contact_map"]["cutoff_nm"], result["contact_map"]["min_separation"]
    logged = any(rec.get("log") is not None for rec in temps)
    lines += ["",
              "RMSD: backbone beads after Kabsch superposition on the reference. Q: fraction of the reference's "
              f"contacts (< {cut:g} nm, >= {sep} residues apart) within 1.2 x their reference distance. Means over "
              "the frames at that temperature. ⟨E_pot⟩, ⟨T⟩ (kinetic): the log.csv rows of the walker that was at "
              "that temperature at each report.", "",
              "## Energy and temperature", "",
              "![energy and temperature per temperature](energy.png)" if logged
              else "(no log.csv rows attributed to a temperature: not shown)", "",
              "## Structure", "", "![RMSD, Rg, Q, RMSF per temperature](structure.png)", "",
              "## Contact maps", "",
              f"One panel per temperature. Upper-right triangle: fraction of that temperature's frames with "
              f"{bead}-{bead} distance < {cut:g} nm; lower-left triangle: the reference's contacts (1 = in contact).",
              "", "![contact maps](contacts.png)", "",
              "## Free-energy surfaces", "",
              "F(RMSD, Rg) = -kT ln p in kJ/mol, one panel per temperature, each from that temperature's frames "
              "only and with its own kT ("
              + ", ".join(f"{r['kT_kJ_mol']:.4g} kJ/mol at {r['temperature_K']:.1f} K" for r in temps)
              + "); F = 0 at each panel's most populated bin, white: not sampled. Temperatures are not reweighted "
              "into each other (no WHAM/MBAR).", "", "![free-energy surfaces](fes.png)", ""]
    lines += _shortfall_lines(result)
    if result["notes"]:
        lines += ["## Notes", ""] + [f"* {n}" for n in result["notes"]] + [""]
    return "\n".join(lines)


def plot_report(result: Dict[str, object], out: str) -> None:
    """Write ``FIGURES`` into ``out`` (matplotlib's Agg canvas: no display needed, pyplot not used)."""
    from matplotlib.figure import Figure

    tempering = "temperatures" in result        # a parallel-tempering run: everything per temperature
    reps = result["temperatures"] if tempering else result["replicas"]

    def name(rec) -> str:
        return f"{rec['temperature_K']:.1f} K" if tempering else f"replica {rec['replica']}"

    def xaxis(rec, key="time_ps"):
        t = np.asarray(rec[key], dtype=float)
        return (t, "time (ps)") if np.isfinite(t).all() else (np.asarray(rec["step"], dtype=float), "step")

    # energy and temperature traces
    fig = Figure(figsize=(9, 6))
    ax_e, ax_t = fig.subplots(2, 1, sharex=True)
    if tempering:          # each temperature's rows (of whichever walker was there), its thermostat dotted
        log = [(name(rec), rec["log"], rec["temperature_K"]) for rec in reps if rec.get("log") is not None]
    else:
        log = [(f"replica {r}", cols, None) for r, cols in (result["log"] or {}).items()]
    for who, cols, target in log:
        t, label = xaxis(cols)
        line, = ax_e.plot(t, cols["potential_energy_kJ_mol"], lw=1, marker="." if len(t) < 50 else None, label=who)
        ax_t.plot(t, cols["temperature_K"], lw=1, color=line.get_color(), marker="." if len(t) < 50 else None)
        if target is not None:
            ax_t.axhline(target, color=line.get_color(), ls=":", lw=1)
    if log:
        if not tempering:
            ax_t.axhline(result["temperature_K"], color="k", ls=":", lw=1)
        ax_t.set_xlabel(label)
        ax_e.legend(fontsize="small")
    else:
        ax_e.text(0.5, 0.5, "no log.csv rows at a temperature" if tempering else "no log.csv", ha="center",
                  transform=ax_e.transAxes)
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
            ax.plot(t, rec[key], lw=1, marker="." if len(t) < 50 else None, label=name(rec))
        axes.flat[3].plot(np.arange(1, len(rec["rmsf_nm"]) + 1), rec["rmsf_nm"], lw=1)
    axes.flat[1].axhline(result["rg_reference_nm"], color="k", ls=":", lw=1)
    for ax, ylab in zip(axes.flat, ("backbone RMSD (nm)", "radius of gyration (nm)", "native contacts Q",
                                    "RMSF (nm)")):
        ax.set_ylabel(ylab)
        ax.set_xlabel(label if ylab != "RMSF (nm)" else "residue")
    axes.flat[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "structure.png"), dpi=100)

    # contact map: simulation above the diagonal, reference below (a tempering run: one panel per temperature)
    nat = np.asarray(result["contact_map"]["reference"], dtype=float)
    if tempering:
        fig, axes = _panel_grid(len(reps))
        for ax, rec in zip(axes, reps):
            im = _contact_panel(ax, np.asarray(rec["contact_map"], dtype=float), nat)
            ax.set_title(f"T = {rec['temperature_K']:.1f} K (upper right) / reference", fontsize="medium")
        fig.colorbar(im, ax=list(axes), label="fraction of frames in contact")
    else:
        fig = Figure(figsize=(6.5, 5.5))
        ax = fig.subplots()
        im = _contact_panel(ax, np.asarray(result["contact_map"]["fraction"], dtype=float), nat)
        fig.colorbar(im, ax=ax, label="fraction of frames in contact")
        ax.set_title("simulation (upper right) / reference (lower left)", fontsize="medium")
        fig.tight_layout()
    fig.savefig(os.path.join(out, "contacts.png"), dpi=100)

    # free-energy surface (a tempering run: one panel per temperature, each with its own kT)
    if tempering:
        fig, axes = _panel_grid(len(reps))
        for ax, rec in zip(axes, reps):
            fig.colorbar(_fes_panel(ax, rec["fes"]), ax=ax, label="F (kJ/mol)")
            ax.set_title(f"T = {rec['temperature_K']:.1f} K, kT = {rec['kT_kJ_mol']:.4g} kJ/mol", fontsize="medium")
    else:
        fig = Figure(figsize=(6.5, 5))
        ax = fig.subplots()
        fig.colorbar(_fes_panel(ax, result["fes"]), ax=ax, label="F (kJ/mol)")
        ax.set_title(f"F = -kT ln p, T = {result['temperature_K']:g} K", fontsize="medium")
        fig.tight_layout()
    fig.savefig(os.path.join(out, "fes.png"), dpi=100)


def _panel_grid(n: int):
    """A figure of ``n`` panels, at most 4 a row, in constrained layout (room for each panel's colour bar);
    returns (figure, the n axes)."""
    from matplotlib.figure import Figure

    cols = min(n, 4)
    rows = -(-n // cols)
    fig = Figure(figsize=(4.6 * cols, 4.0 * rows), layout="constrained")
    axes = list(np.asarray(fig.subplots(rows, cols, squeeze=False)).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _contact_panel(ax, cm: np.ndarray, nat: np.ndarray):
    """One contact map on ``ax``: ``cm`` above the diagonal, the reference's ``nat`` below; returns the image."""
    n = len(cm)
    i, j = np.indices((n, n))
    both = np.where(j > i, cm, np.where(j < i, nat, np.nan))
    im = ax.imshow(both, origin="upper", cmap="viridis", vmin=0, vmax=1, extent=(0.5, n + 0.5, n + 0.5, 0.5))
    ax.set_xlabel("residue")
    ax.set_ylabel("residue")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)
    return im


def _fes_panel(ax, fes: Dict[str, object]):
    """One F(RMSD, Rg) on ``ax`` (unsampled bins empty); returns the mesh."""
    f = np.ma.masked_invalid(np.asarray(fes["free_energy_kJ_mol"], dtype=float))
    pm = ax.pcolormesh(fes["rmsd_edges_nm"], fes["rg_edges_nm"], f.T, cmap="magma_r", shading="flat")
    ax.set_xlabel("backbone RMSD (nm)")
    ax.set_ylabel("radius of gyration (nm)")
    return pm
