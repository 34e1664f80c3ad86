"""Validation of a trained CG model against its all-atom reference (``flashschnet-train validate``): run the
model in OpenMM (``flashschnet-simulate``'s driver), then compare the distributions of the prior coordinates
(bond lengths, angles, backbone phi/psi) and the free-energy surface over (backbone RMSD to the PDB, radius of
gyration) with the mapped reference frames, side by side.

Outputs in ``OUT``: ``cg_run/`` (the CG trajectory), ``validation.json`` (histograms and their overlaps
``sum_b min(p_b, q_b)``: 1 = identical, 0 = disjoint), ``validation.png``.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Dict, Optional

import numpy as np
import torch

from ..atomic import atomic_write
from ..cg import map_pdb
from ..checkpoint import load_model
from ..errors import InputError
from ..priors import angle_tuples, dihedral_tuples, compute_angle_cos, compute_distances, compute_torsions
from ..train import map_reference
from .observables import kabsch_align, radius_of_gyration
from .run_reader import RunDir
from .simulate import RunSettings, run

KB_KJ = 0.0083144626


def features(mol, pos_a: np.ndarray) -> Dict[str, np.ndarray]:
    """Pooled prior coordinates and global structure of frames [F, N, 3] (Angstrom): ``bond`` (nm), ``angle``
    (degrees), ``phi``/``psi`` (degrees), ``rmsd`` and ``rg`` (nm) per frame."""
    pos = torch.as_tensor(np.asarray(pos_a, dtype=np.float64))
    bonds = np.asarray(mol.bonds, dtype=np.int64).reshape(-1, 2)
    out = {"bond": compute_distances(pos, torch.as_tensor(bonds)).numpy().ravel() / 10.0}
    ang = torch.tensor(angle_tuples(mol.n_beads, bonds), dtype=torch.long).reshape(-1, 3)
    c = compute_angle_cos(pos, ang).clamp(-1, 1)
    out["angle"] = np.degrees(torch.arccos(c).numpy().ravel())
    dih = dihedral_tuples(mol)
    for name in ("phi", "psi"):
        idx = torch.tensor(dih.get(name, []), dtype=torch.long).reshape(-1, 4)
        out[name] = np.degrees(compute_torsions(pos, idx).numpy().ravel()) if len(idx) else np.zeros(0)
    rmsd, _ = kabsch_align(pos.numpy() / 10.0, np.asarray(mol.positions) / 10.0)
    out["rmsd"], out["rg"] = rmsd, radius_of_gyration(pos.numpy() / 10.0)
    return out


def _overlap(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    p, _ = np.histogram(a, bins=edges)
    q, _ = np.histogram(b, bins=edges)
    if p.sum() == 0 or q.sum() == 0:
        return float("nan")
    return float(np.minimum(p / p.sum(), q / q.sum()).sum())


def validate(pdb: str, model_path: str, reference: str, out: str, steps: int, replicas: int = 4,
             report_interval: int = 100, seed: int = 1, platform: Optional[str] = None, threads: Optional[int] = None,
             dt_fs: float = 4.0,
             progress: bool = True, echo: Callable[[str], None] = print) -> Dict:
    """Run the model and compare with the reference (see the module docstring); returns the summary dict."""
    if 0 <= steps < report_interval:            # other bad values: RunSettings.validate names them
        raise InputError(f"--steps {steps} gives no frame to compare at --report-interval {report_interval}; "
                         "use --steps of at least one report interval")
    os.makedirs(out, exist_ok=True)
    model = load_model(model_path)
    mol = map_pdb(pdb, mapping=model.config.get("cg_mapping") or "5bead")
    ref = map_reference(reference, mol)
    run_dir = os.path.join(out, "cg_run")
    result = run(RunSettings(pdb=pdb, model=model_path, out=run_dir, steps=steps, replicas=replicas,
                             platform=platform, seed=seed, temperature_K=ref.temperature_K, dt_fs=dt_fs,
                             report_interval=report_interval, threads=threads), progress=progress, echo=echo)
    rd = RunDir(run_dir)
    # the model's samples: each replica's frames but the starting structure (step 0, the PDB's, not a sample)
    frames = np.concatenate([rd.frames(r)[1 if rd.header(r).first_step == 0 else 0:] for r in rd.trajectories]) * 10.0
    fr, fc = features(mol, ref.positions), features(mol, frames)
    edges = {"bond": np.linspace(0.1, 0.2, 61), "angle": np.linspace(60, 180, 61),
             "phi": np.linspace(-180, 180, 37), "psi": np.linspace(-180, 180, 37)}
    summary = {"model": os.path.abspath(model_path), "reference": os.path.abspath(reference), "pdb": os.path.abspath(pdb),
               "reference_frames": int(ref.n_frames), "cg_frames": int(len(frames)), "cg_steps": int(steps),
               "replicas": int(replicas), "ns_per_day_per_replica": result.ns_per_day_per_replica,
               "overlap": {k: _overlap(fr[k], fc[k], e) for k, e in edges.items()},
               "mean_rmsd_nm": {"reference": float(fr["rmsd"].mean()), "cg": float(fc["rmsd"].mean())},
               "mean_rg_nm": {"reference": float(fr["rg"].mean()), "cg": float(fc["rg"].mean())}}
    with atomic_write(os.path.join(out, "validation.json"), "w", what="writing the validation summary") as f:
        json.dump(summary, f, indent=1)
    _plot(fr, fc, edges, ref.temperature_K, os.path.join(out, "validation.png"))
    return summary


def _plot(fr, fc, edges, temperature_K: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    labels = {"bond": "bond length (nm)", "angle": "angle (degrees)", "phi": "phi (degrees)", "psi": "psi (degrees)"}
    for ax, key in zip(axes.flat[:4], ("bond", "angle", "phi", "psi")):
        ax.hist(fr[key], bins=edges[key], density=True, histtype="step", lw=1.5, label="all-atom (mapped)")
        ax.hist(fc[key], bins=edges[key], density=True, histtype="step", lw=1.5, label="CG model")
        ax.set_xlabel(labels[key])
        ax.set_ylabel("density")
    axes.flat[0].legend()
    kT = KB_KJ * temperature_K
    lo = np.array([0.0, min(fr["rg"].min(), fc["rg"].min()) * 0.95])
    hi = np.array([max(fr["rmsd"].max(), fc["rmsd"].max()) * 1.05 + 1e-3, max(fr["rg"].max(), fc["rg"].max()) * 1.05])
    for ax, f, title in ((axes.flat[4], fr, "all-atom (mapped)"), (axes.flat[5], fc, "CG model")):
        h, xe, ye = np.histogram2d(f["rmsd"], f["rg"], bins=30, range=[[lo[0], hi[0]], [lo[1], hi[1]]])
        with np.errstate(divide="ignore"):
            fes = -kT * np.log(h / h.sum())
        fes -= np.nanmin(fes[np.isfinite(fes)]) if np.isfinite(fes).any() else 0.0
        im = ax.imshow(fes.T, origin="lower", extent=[xe[0], xe[-1], ye[0], ye[-1]], aspect="auto", cmap="viridis")
        fig.colorbar(im, ax=ax, label="free energy (kJ/mol)")
        ax.set_xlabel("backbone RMSD to the PDB (nm)")
        ax.set_ylabel("radius of gyration (nm)")
        ax.set_title(title)
    fig.tight_layout()
    try:
        with atomic_write(path, "wb", what="writing the figure") as f:      # no truncated PNG on a full disk
            fig.savefig(f, format="png", dpi=110)
    finally:
        plt.close(fig)
