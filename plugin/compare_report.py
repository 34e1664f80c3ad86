"""``flashschnet-compare``'s report: the Markdown table (:func:`markdown`) and the figure (:func:`plot`) of a
comparison's result dict (what ``comparison.json`` holds; :func:`flashschnet.openmm.compare.compare` builds it), and
the sampling section from :mod:`~flashschnet.openmm.sampling_report`."""
from __future__ import annotations

import os
from typing import Dict, Optional

import numpy as np

from . import sampling_report


def _replicas(f: Dict[str, object]) -> str:
    """How the FlashSchNet run held its replicas: "8 in one Context", "8 in 2 Contexts (one process each)"."""
    c = int(f.get("contexts") or 1)
    return f"{f['replicas']} in one Context" if c == 1 else f"{f['replicas']} in {c} Contexts (one process each)"


def _fmt(s: Dict[str, float], digits: int = 3) -> str:
    return "n/a" if not np.isfinite(s["mean"]) else f"{s['mean']:.{digits}f} ± {s['sd']:.{digits}f}"


def _structure_line(structures: Optional[Dict[str, object]]) -> str:
    if not structures or structures.get("same") is None:
        return "Input: the PDB as each run read it (run directories without `cleaned.pdb`)."
    digest = next(iter(structures["sha256"].values()))
    if structures["same"]:
        return (f"Input: both force fields read the same cleaned structure (`cleaned.pdb`, sha256 `{digest[:12]}`; "
                "`flashschnet.openmm.cleaning`).")
    return "Input: **the two runs read different cleaned structures** (see comparison.json)."


def _tertiary(m: Dict[str, object]) -> str:
    """What holds MARTINI's tertiary structure in the run ``m``."""
    if m.get("go"):
        return "Go model"
    return "elastic network" if m.get("elastic", True) else "no elastic network"


def markdown(result: Dict[str, object]) -> str:
    m, f = result["martini"], result["flashschnet"]
    ms, fs = m["summary"], f["summary"]
    agg_m = m["speed"]["ns_per_day"]
    agg_f = f["speed"]["ns_per_day"] * f["replicas"]
    lines = [
        f"Comparison on {result['machine']} (OpenMM platform: {result['platform']}), PDB `{os.path.basename(result['pdb'])}`.",
        "",
        "| | MARTINI 3 | FlashSchNet |",
        "|---|---|---|",
        f"| model | martinize2 (DSSP, {_tertiary(m)}), W + {m['salt_molar']:g} M NaCl | {result['model_description']} |",
        f"| network | - | {f.get('network', 'n/a')} |",
        f"| particles per replica | {m['particles']} ({m['protein_beads']} protein beads) | {f['particles']} beads |",
        f"| time step | {m['dt_fs']:g} fs | {f['dt_fs']:g} fs"
        + (f" (multiple time stepping: network every {f['dt_fs']:g} fs, priors + inner model every "
           f"{f['inner_dt_fs']:g} fs)" if f.get("inner_dt_fs") else "") + " |",
        f"| replicas | 1 | {_replicas(f)} |",
        f"| simulated per replica | {m['speed']['steps'] * m['dt_fs'] * 1e-6:.4g} ns | {f['speed']['steps'] * f['dt_fs'] * 1e-6:.4g} ns |",
        f"| ns/day per replica | {m['speed']['ns_per_day']:.4g} | {f['speed']['ns_per_day']:.4g} |",
        f"| ns/day aggregate | {agg_m:.4g} | {agg_f:.4g} |",
        f"| backbone RMSD to the mapped PDB, nm | {_fmt(ms['rmsd'])} | {_fmt(fs['rmsd'])} |",
        f"| radius of gyration, nm (native) | {_fmt(ms['rg'])} ({ms['rg_native_nm']:.3f}) | {_fmt(fs['rg'])} ({fs['rg_native_nm']:.3f}) |",
        f"| mean per-residue RMSF, nm | {ms['rmsf_mean_nm']:.3f} | {fs['rmsf_mean_nm']:.3f} |",
        f"| native contacts Q ({ms['n_native_contacts']} / {fs['n_native_contacts']} contacts) | {_fmt(ms['q'])} | {_fmt(fs['q'])} |",
        f"| secondary-structure retention | {_fmt(ms['ss_retention'])} | {_fmt(fs['ss_retention'])} |",
        "",
        _structure_line(result.get("structures")),
        "",
        f"Aggregate speed ratio FlashSchNet / MARTINI: {agg_f / agg_m:.3g}. Structure values: mean ± sd over the second "
        "half of each run's frames (pooled over replicas), one bead per residue (BB / CA) against that model's own "
        "mapping of the PDB; secondary-structure retention: native helix/strand residues (DSSP of the PDB) whose "
        "distances to the beads 2-4 residues along their segment stay within 15 % of native. See "
        "`flashschnet.openmm.compare` for the definitions.",
    ] + sampling_report.markdown(result)
    return "\n".join(lines) + "\n"


def plot(result: Dict[str, object], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    colours = {"martini": "tab:blue", "flashschnet": "tab:red"}
    names = {"martini": "MARTINI 3", "flashschnet": "FlashSchNet"}
    for ax, key, label in zip(axes.flat[:4], ("rmsd", "rg", "q", "ss_retention"),
                              ("backbone RMSD (nm)", "radius of gyration (nm)", "native contacts Q",
                               "secondary-structure retention")):
        for run in ("martini", "flashschnet"):
            s = result[run]["summary"]
            ax.plot(s["times_ns"], s["series"][key], color=colours[run], label=names[run])
            if key == "rg":
                ax.axhline(s["rg_native_nm"], color=colours[run], ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("simulated time (ns, log scale)")
        ax.set_ylabel(label)
    axes.flat[0].legend()
    ax = axes.flat[4]
    for run in ("martini", "flashschnet"):
        r = result[run]["summary"]["rmsf_nm"]
        ax.plot(np.arange(1, len(r) + 1), r, color=colours[run], label=names[run])
    ax.set_xlabel("residue")
    ax.set_ylabel("RMSF (nm)")
    ax = axes.flat[5]
    m, f = result["martini"], result["flashschnet"]
    bars = [("MARTINI", m["speed"]["ns_per_day"]), ("FlashSchNet\nper replica", f["speed"]["ns_per_day"]),
            (f"FlashSchNet\n{f['replicas']} replicas", f["speed"]["ns_per_day"] * f["replicas"])]
    ax.bar([b[0] for b in bars], [b[1] for b in bars],
           color=[colours["martini"], colours["flashschnet"], colours["flashschnet"]])
    ax.set_yscale("log")
    ax.set_ylabel("ns/day")
    fig.suptitle(f"{os.path.basename(result['pdb'])}: MARTINI 3 vs FlashSchNet ({result['machine']}, {result['platform']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
