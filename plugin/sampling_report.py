"""``flashschnet-compare``'s sampling-efficiency section: the Markdown table of ``comparison.md`` and
``sampling.png`` (the autocorrelation functions of Rg and Q per force field, and ESS/hour with error bars), from
each run's ``sampling`` result (:func:`flashschnet.openmm.sampling.sampling_efficiency`). Figures on matplotlib's
Agg canvas (no display, no pyplot)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

#: the two force fields of a comparison, in column order, and how the report names them
RUNS = (("martini", "MARTINI 3"), ("flashschnet", "FlashSchNet"))
OBSERVABLES = (("rg", "Rg"), ("q", "Q"))
FIGURE = "sampling.png"


def _pm(v: Dict[str, Optional[float]], digits: int = 3) -> str:
    if v["value"] is None:
        return "n/a"
    return f"{v['value']:.{digits}g}" + (f" ± {v['error']:.2g}" if v["error"] is not None else "")


def _cell(est: Dict[str, object], key: str, wall: bool = True) -> str:
    """One table cell: ``key`` of an observable's estimate, with its bound or why there is none."""
    if est["status"] in ("not enough frames", "constant"):
        return est["status"] + (" (g undefined)" if est["status"] == "constant" else "")
    if key.startswith("ess_per_hour") and not wall:
        return "not recorded"
    text = _pm(est[key])
    if key == "g":
        text += f" ({_pm(est['g_ps'])} ps)"
    if est["bound"] == "lower":
        return ("≥ " if key == "g" else "≤ ") + text
    return text


def markdown(result: Dict[str, object]) -> List[str]:
    """The lines of comparison.md's sampling section (a table, the warnings, the definitions)."""
    s = {run: result[run]["sampling"] for run, _ in RUNS}
    f = result["flashschnet"]

    def row(label: str, cells) -> str:
        return f"| {label} | " + " | ".join(cells) + " |"

    def frames(run: str) -> str:
        est = next(iter(s[run]["observables"].values()))
        reps = f" × {est['replicas']} replicas" if est["replicas"] > 1 else ""
        return f"{est['frames']}{reps}, every {s[run]['frame_ps']:.4g} ps"

    def hours(run: str) -> str:
        wall = s[run]["wall_s"]
        return "not recorded" if wall is None else f"{wall:.4g} s ({wall / 3600.0:.3g} h)"

    def errors(run: str) -> str:
        return next((e["error_description"] for e in s[run]["observables"].values() if e["error_description"]),
                    "none (no estimate)")

    lines = ["", "Sampling efficiency (the frames of the structure values: the second half of each run's; Rg and Q):",
             "", "| | MARTINI 3 | FlashSchNet |", "|---|---|---|",
             row("frames analysed per replica", [frames(r) for r, _ in RUNS]),
             row("wall-clock time of those frames", [hours(r) for r, _ in RUNS])]
    for key, name in OBSERVABLES:
        est = {r: s[r]["observables"][key] for r, _ in RUNS}
        lines += [row(f"statistical inefficiency g of {name}, frames (ps)", [_cell(est[r], "g") for r, _ in RUNS]),
                  row(f"effective samples of {name} per replica", [_cell(est[r], "ess") for r, _ in RUNS]),
                  row(f"ESS/hour of {name} per replica",
                      [_cell(est[r], "ess_per_hour", s[r]["wall_s"] is not None) for r, _ in RUNS]),
                  row(f"ESS/hour of {name} aggregate ({f['replicas']} FlashSchNet replicas)",
                      [_cell(est[r], "ess_per_hour_aggregate", s[r]["wall_s"] is not None) for r, _ in RUNS])]
    lines.append(row("error bars", [errors(r) for r, _ in RUNS]))
    warnings = [f"* {label}: {w}" for run, label in RUNS for w in s[run]["warnings"]]
    if warnings:
        lines += ["", "Warnings:", ""] + warnings
    t = s["martini"]["thresholds"]
    lines += ["", "g = 1 + 2 × the integrated autocorrelation time (pymbar's `statistical_inefficiency`, in frames "
              "and ps); effective samples = frames / g; ESS/hour = effective samples per hour of the step loop that "
              "wrote those frames (from log.csv's ns_per_day), per replica and summed over a run's packed replicas. "
              "Error bars: one standard error (spread over independent replicas, or the Madras-Sokal error of one "
              f"trajectory). Fewer than {t['min_samples']} effective samples per replica: g is a lower bound (≥) and "
              f"ESS an upper bound (≤); fewer than {t['min_frames']} frames: no estimate. Earlier frames are "
              "discarded as equilibration for both force fields alike. See `flashschnet.openmm.sampling`."]
    return lines


def plot(result: Dict[str, object], path: str) -> None:
    """``sampling.png``: the ACF of Rg and of Q per force field against the lag (ps, log scale), and ESS/hour per
    observable (MARTINI, FlashSchNet per replica, FlashSchNet aggregate) with one-standard-error bars; hatched
    bars are upper bounds, missing ones not estimated or not recorded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    colours = {"martini": "tab:blue", "flashschnet": "tab:red"}
    for ax, (key, name) in zip(axes[:2], OBSERVABLES):
        for run, label in RUNS:
            acf = result[run]["sampling"]["acf"]
            if acf.get(key):
                lag = np.asarray(acf["lag_ps"][:len(acf[key])])
                ax.plot(lag[1:], acf[key][1:], "o-", ms=3, color=colours[run], label=label)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("lag (ps, log scale)")
        ax.set_ylabel(f"autocorrelation of {name}")
        if ax.get_lines()[:-1]:                          # a curve besides the zero line
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no autocorrelation function\n(too few frames, or constant)", ha="center",
                    transform=ax.transAxes)
    ax = axes[2]
    bars = [("MARTINI 3", "martini", "ess_per_hour"), ("FlashSchNet\nper replica", "flashschnet", "ess_per_hour"),
            (f"FlashSchNet\n{result['flashschnet']['replicas']} replicas", "flashschnet", "ess_per_hour_aggregate")]
    width, drawn = 0.38, False
    for j, (key, _) in enumerate(OBSERVABLES):
        for i, (label, run, field) in enumerate(bars):
            est = result[run]["sampling"]["observables"][key]
            v = est[field]
            if v["value"] is None:
                ax.text(i + (j - 0.5) * width, 0.02, "n/a", ha="center", va="bottom", fontsize=7,
                        transform=ax.get_xaxis_transform())
                continue
            drawn = True
            ax.bar(i + (j - 0.5) * width, v["value"], width, yerr=v["error"] or 0.0, capsize=3,
                   color=colours[run], alpha=0.9 if j == 0 else 0.5, hatch="//" if est["bound"] else None,
                   edgecolor="black")
    ax.set_xlim(-0.6, len(bars) - 0.4)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([b[0] for b in bars], fontsize=8)
    if drawn:
        ax.set_yscale("log")
    ax.set_ylabel("effective samples per wall-clock hour")
    ax.set_title("ESS/hour: solid Rg, light Q; hatched: upper bound", fontsize=9)
    fig.suptitle(f"Sampling efficiency: MARTINI 3 vs FlashSchNet ({result['machine']}, {result['platform']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
