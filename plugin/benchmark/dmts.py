"""Does a multiple-time-step run sample what single stepping samples? The checks of distilled multiple time
stepping (``tools/benchmarks/dmts_validate.py``, docs/sampling.md):

* **stability**: every replica's kinetic temperature (log.csv, second half of the run) within a tolerance of the
  target, and no blow-up;
* **the same equilibrium**: the distributions of the radius of gyration, the fraction of native contacts Q, the
  end-to-end distance (first to last CA bead), every bond length and every bond angle of the candidate run against
  a single-stepping reference, by the Jensen-Shannon divergence (JSD, base 2: 0 = the same, 1 = disjoint) of
  their histograms on common bins, with a bootstrap over replicas for its spread; next to the JSD of two
  independent reference runs (the noise floor of the same comparison).

Runs are read from their run directories (:class:`~flashschnet.openmm.run_reader.RunDir`).
"""
from __future__ import annotations

import csv
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

#: histogram bins per observable
BINS = 40
#: bootstrap resamples of the replicas
BOOTSTRAP = 200


def kinetic_temperatures(run_dir: str) -> np.ndarray:
    """Kinetic temperature (K) per log row of each replica, second half of the run: [R, rows]."""
    with open(os.path.join(run_dir, "log.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    reps = sorted({int(r["replica"]) for r in rows})
    per = [np.array([float(r["temperature_K"]) for r in rows if int(r["replica"]) == k]) for k in reps]
    n = min(len(p) for p in per)
    return np.stack([p[n // 2:n] for p in per])


def observables(run_dir: str) -> Dict[str, np.ndarray]:
    """Per replica, second half of the frames: ``rg`` [R, T] (nm), ``q`` [R, T], ``end_to_end`` [R, T] (nm) from the
    CA beads, and ``bonds`` [R, T, nb] (nm), ``angles`` [R, T, na] (rad) of the CG topology's bonds."""
    import mdtraj as md

    from ..observables import fraction_native_contacts, native_contacts, radius_of_gyration
    from ..run_reader import RunDir

    rd = RunDir(run_dir)
    top = md.load(os.path.join(run_dir, "topology.pdb"))
    ca = rd.backbone()
    native_ca = top.xyz[0][ca]
    pairs = native_contacts(native_ca)
    bonds = np.array([[b[0].index, b[1].index] for b in top.topology.bonds], dtype=int)
    nbr: Dict[int, List[int]] = {}
    for i, j in bonds:
        nbr.setdefault(int(i), []).append(int(j))
        nbr.setdefault(int(j), []).append(int(i))
    angles = np.array([(a, b, c) for b, ns in nbr.items() for ia, a in enumerate(ns) for c in ns[ia + 1:]], dtype=int)
    out: Dict[str, list] = {k: [] for k in ("rg", "q", "end_to_end", "bonds", "angles")}
    for r in rd.trajectories:
        xyz = rd.frames(r, np.arange(top.n_atoms))
        xyz = xyz[len(xyz) // 2:]
        c = xyz[:, ca]
        out["rg"].append(radius_of_gyration(c))
        out["q"].append(fraction_native_contacts(c, native_ca, pairs))
        out["end_to_end"].append(np.linalg.norm(c[:, -1] - c[:, 0], axis=-1))
        out["bonds"].append(np.linalg.norm(xyz[:, bonds[:, 1]] - xyz[:, bonds[:, 0]], axis=-1))
        v1 = xyz[:, angles[:, 0]] - xyz[:, angles[:, 1]]
        v2 = xyz[:, angles[:, 2]] - xyz[:, angles[:, 1]]
        cos = (v1 * v2).sum(-1) / (np.linalg.norm(v1, axis=-1) * np.linalg.norm(v2, axis=-1))
        out["angles"].append(np.arccos(np.clip(cos, -1.0, 1.0)))
    n = min(len(x) for x in out["rg"])
    return {k: np.stack([x[:n] for x in v]) for k, v in out.items()}


def jsd(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    """Jensen-Shannon divergence (bits) of the histograms of ``a`` and ``b`` on ``edges``."""
    p = np.histogram(np.ravel(a), bins=edges)[0].astype(float)
    q = np.histogram(np.ravel(b), bins=edges)[0].astype(float)
    p, q = p / max(p.sum(), 1.0), q / max(q.sum(), 1.0)
    m = 0.5 * (p + q)

    def kl(x):
        nz = x > 0
        return float((x[nz] * np.log2(x[nz] / m[nz])).sum())

    return 0.5 * kl(p) + 0.5 * kl(q)


def _flat(x: np.ndarray, bonded: bool) -> np.ndarray:
    """Per-replica samples: [R, T] as is; bonded [R, T, n] as deviations from each tuple's mean over everything
    (so one histogram pools every bond or angle)."""
    if not bonded:
        return x
    return (x - x.mean(axis=(0, 1), keepdims=True)).reshape(x.shape[0], -1)


def overlap(candidate: Dict[str, np.ndarray], reference: Dict[str, np.ndarray], seed: int = 0) -> Dict[str, object]:
    """JSD of each observable between two runs' samples (:func:`observables`), with the bootstrap over replicas:
    ``{name: {"jsd", "bootstrap_sd", "bootstrap_95"}}``."""
    rng = np.random.default_rng(seed)
    out: Dict[str, object] = {}
    for name in candidate:
        bonded = name in ("bonds", "angles")
        a, b = _flat(candidate[name], bonded), _flat(reference[name], bonded)
        lo, hi = float(min(np.nanmin(a), np.nanmin(b))), float(max(np.nanmax(a), np.nanmax(b)))
        edges = np.linspace(lo, hi if hi > lo else lo + 1e-9, BINS + 1)
        value = jsd(a, b, edges)
        boot = [jsd(a[rng.integers(0, len(a), len(a))], b[rng.integers(0, len(b), len(b))], edges)
                for _ in range(BOOTSTRAP)]
        out[name] = {"jsd": value, "bootstrap_sd": float(np.std(boot)),
                     "bootstrap_95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]}
    return out


def stability(run_dir: str, target_K: float, tolerance: float = 0.02) -> Dict[str, object]:
    """The kinetic-temperature check of one run: mean over the second half per replica, and whether every replica is
    within ``tolerance`` (relative) of ``target_K``; a run without a complete log is not stable."""
    try:
        t = kinetic_temperatures(run_dir)
    except (OSError, ValueError, KeyError):
        return {"stable": False, "reason": "no complete log"}
    means = t.mean(axis=1)
    sem = t.std(axis=1, ddof=1) / np.sqrt(t.shape[1])
    dev = means / target_K - 1.0
    return {"per_replica_mean_K": means.tolist(), "per_replica_sem_K": sem.tolist(),
            "max_relative_deviation": float(np.abs(dev).max()), "tolerance": tolerance,
            "stable": bool(np.isfinite(means).all() and np.abs(dev).max() <= tolerance)}


def summary_lines(report: Dict[str, object]) -> List[str]:
    """A Markdown table of the overlap report (candidate vs reference, next to reference vs reference)."""
    lines = ["| observable | JSD candidate vs reference | JSD reference vs reference (noise) |", "|---|---|---|"]
    cand, noise = report["overlap"], report.get("noise") or {}
    for name, v in cand.items():
        n = noise.get(name)
        lines.append(f"| {name} | {v['jsd']:.4f} ± {v['bootstrap_sd']:.4f} | "
                     + (f"{n['jsd']:.4f} ± {n['bootstrap_sd']:.4f} |" if n else "- |"))
    return lines


def _label(name: str) -> str:
    """``mts_5_2.5`` -> ``DMTS 5/2.5``, ``single_5`` -> ``single stepping, 5 fs`` (tools/benchmarks/dmts_validate.py's
    run names)."""
    kind, _, rest = name.partition("_")
    if kind == "mts":
        return "DMTS " + rest.replace("_", "/")
    return f"single stepping, {rest} fs" if kind == "single" else name


def _jsds(overlaps: Dict[str, dict]) -> str:
    return " | ".join(f"{overlaps[n]['jsd']:.{3 if n in ('rg', 'q', 'end_to_end') else 4}f} ± "
                      f"{overlaps[n]['bootstrap_sd']:.{3 if n in ('rg', 'q', 'end_to_end') else 4}f}" for n in names())


def _temperatures(st: Dict[str, object]) -> str:
    return ", ".join(f"{t:.1f}" for t in st.get("per_replica_mean_K", [])) or "no complete log"


def _verdict(st: Dict[str, object], target_K: float) -> str:
    temps = st.get("per_replica_mean_K") or []
    if not temps:
        return "**no**"
    worst = max(temps, key=lambda t: abs(t - target_K)) / target_K - 1.0
    return f"**{'yes' if st['stable'] else 'no'}** ({100 * worst:+.1f} %)"


def table(report: Dict[str, object], target_K: float = 300.0) -> str:
    """The Markdown table of a ``tools/benchmarks/dmts_validate.py`` JSON (docs/sampling.md): reference B against
    reference A (the noise floor), then each candidate: kinetic temperature per replica, the stability verdict (the
    worst replica's deviation), and the JSD ± bootstrap SD of each observable against reference A. A run that blew up
    (exit status 3) says so in its temperature column. Without reference B (no ``noise``), the first row is
    reference A's temperatures alone."""
    cands = report["candidates"]
    first = next(c for c in cands.values() if "overlap" in c)
    ref = first["reference_stability"]
    head = ["| candidate (outer/inner fs) | kinetic T per replica, K | stable (2 %) | JSD Rg | JSD Q | JSD end-to-end "
            "| JSD bonds | JSD angles |", "|---|---|---|---|---|---|---|---|"]
    if "noise" in first:
        lines = head + [f"| reference B (4 fs, noise floor) | {_temperatures(ref)} (ref. A) | "
                        f"{_verdict(ref, target_K)} | {_jsds(first['noise'])} |"]
    else:
        lines = head + [f"| reference A (4 fs) | {_temperatures(ref)} | {_verdict(ref, target_K)} |  |  |  |  |  |"]
    for name, c in cands.items():
        if "overlap" not in c:
            lines.append(f"| {_label(name)} | no run (exit status {c.get('exit_status')}) | **no** |  |  |  |  |  |")
            continue
        temps = (f"blew up (exit {c['exit_status']})" if c.get("exit_status") == 3
                 else _temperatures(c["stability"]))
        verdict = "**no**" if c.get("exit_status") == 3 else _verdict(c["stability"], target_K)
        lines.append(f"| {_label(name)} | {temps} | {verdict} | {_jsds(c['overlap'])} |")
    return "\n".join(lines)


def compare_runs(candidate: str, reference: str, reference_b: Optional[str] = None,
                 target_K: float = 300.0) -> Dict[str, object]:
    """Everything above for one candidate run directory against a reference one (and a second, independent
    reference for the noise floor)."""
    c, r = observables(candidate), observables(reference)
    report = {"candidate": os.path.abspath(candidate), "reference": os.path.abspath(reference),
              "stability": stability(candidate, target_K), "reference_stability": stability(reference, target_K),
              "overlap": overlap(c, r)}
    if reference_b:
        report["noise"] = overlap(observables(reference_b), r, seed=1)
    return report


def overlap_figure(runs: Dict[str, str], path: str) -> str:
    """The distribution-overlap figure: one panel per observable (:func:`names`), the normalised histogram of each
    run in ``runs`` (label -> run directory) on common bins; bonds and angles pooled as deviations from each
    tuple's mean (as :func:`overlap` compares them). Written to ``path`` (PNG); returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = {label: observables(d) for label, d in runs.items()}
    units = {"rg": "Rg (nm)", "q": "Q", "end_to_end": "end-to-end (nm)", "bonds": "bond - its mean (nm)",
             "angles": "angle - its mean (rad)"}
    fig, axes = plt.subplots(1, len(names()), figsize=(3.2 * len(names()), 2.8))
    for ax, name in zip(axes, names()):
        flat = {k: _flat(v[name], name in ("bonds", "angles")).ravel() for k, v in data.items()}
        lo = min(float(np.nanmin(x)) for x in flat.values())
        hi = max(float(np.nanmax(x)) for x in flat.values())
        edges = np.linspace(lo, hi if hi > lo else lo + 1e-9, BINS + 1)
        for label, x in flat.items():
            ax.hist(x, bins=edges, density=True, histtype="step", label=label)
        ax.set_xlabel(units[name])
        ax.set_yticks([])
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def names() -> Sequence[str]:
    return ("rg", "q", "end_to_end", "bonds", "angles")
