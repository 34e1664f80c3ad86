"""The accuracy cost of channel-wise 16-bit weights, measured (``python tools/benchmarks/quantization_report.py``
reports it).

* :func:`frame_errors` -- energies and forces of each 16-bit variant against the unquantized model, on given
  frames, for each backend (float32 arithmetic; the truth is the unquantized model in float64);
* :func:`langevin_check` -- a Langevin run of a variant through :func:`flashschnet.openmm.simulate.run` and
  whether it stayed stable (bond lengths, temperature);
* :func:`nve_drift` -- total-energy drift of a short NVE run from one shared starting state;
* :func:`channel_ranges` -- per-output-channel ranges of every weight matrix that gets quantized.

Energies are in the model's energy unit, forces in energy per length unit of the model (mlcg: kcal/mol, A).
"""
from __future__ import annotations

import csv
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from flashschnet.checkpoint import load_model
from flashschnet.errors import SimulationInstabilityError
from flashschnet.loaded import as_loaded
from flashschnet.names import VARIANTS
from flashschnet.nn.quant import QDTYPES, dequantize_weight, quantize_weight
from flashschnet.transforms import apply_variant


def _quantizable(model):
    """``(name, weight [out, in] float64)`` of every Linear that :func:`flashschnet.quantize` stores in 16 bits."""
    for name, mod in as_loaded(model).network.named_modules():
        if isinstance(mod, torch.nn.Linear) and (".filter_network." in name or name.startswith("output_network.")):
            yield name, mod.weight.detach().double()


def channel_ranges(model) -> List[Dict[str, object]]:
    """For each quantized weight matrix of an unquantized CGSchNet: name, shape, and per output channel the
    largest and smallest non-zero |w| (lists)."""
    out = []
    for name, w in _quantizable(model):
        w = w.abs()
        nz = torch.where(w > 0, w, torch.full_like(w, float("inf")))
        out.append({"name": name, "shape": list(w.shape), "amax": w.amax(1).tolist(),
                    "amin_nonzero": nz.amin(1).tolist()})
    return out


def weight_errors(model) -> List[Dict[str, object]]:
    """Round-trip error of every quantized matrix for each variant: max relative and RMS relative error."""
    rows = []
    for name, w in _quantizable(model):
        for variant, spec in VARIANTS.items():
            if spec is None:
                continue
            try:
                q, s = quantize_weight(w, QDTYPES[spec[0]], spec[1])
            except Exception as exc:       # e.g. a plain cast that overflows float16
                rows.append({"matrix": name, "variant": variant, "error": str(exc)})
                continue
            d = dequantize_weight(q, s, torch.float64) - w
            nz = w != 0
            rel = (d.abs()[nz] / w.abs()[nz]) if bool(nz.any()) else torch.zeros(1, dtype=torch.float64)
            rows.append({"matrix": name, "variant": variant, "max_rel": float(rel.max()),
                         "rms_rel": float(d.norm() / w.norm().clamp_min(1e-300))})
    return rows


def _rel_rmse(f: torch.Tensor, ref: torch.Tensor) -> float:
    return float(((f - ref) ** 2).sum().sqrt() / (ref ** 2).sum().sqrt().clamp_min(1e-300))


def frame_errors(model_path: str, positions: torch.Tensor, bead_types: torch.Tensor, variants: Sequence[str],
                 backends: Sequence[str] = ("torch", "reference"), dataset: str = "") -> List[Dict[str, object]]:
    """Errors of each (variant, backend) in float32 on frames ``positions`` [F, N, 3] (model length unit).

    Each row: ``energy_mae`` / ``energy_max`` (|E - E_true|), ``force_rel_rmse`` and ``force_max_abs`` against
    the truth (unquantized, float64, reference backend), and ``*_vs_fp32`` against the unquantized float32
    model of the same backend. Variant ``"none"`` is the float32 model itself. Also rows ``"fp16-all"`` /
    ``"bf16-all"``: the whole reference network run in 16-bit PyTorch (activations too), for context.
    """
    pos64 = positions.to(torch.float64)
    truth = load_model(model_path, backend="reference", dtype=torch.float64)
    e_true, f_true = truth.energy_forces(pos64, bead_types)
    rows = []

    def row(variant, backend, e, f, e32=None, f32=None):
        e, f = e.double(), f.double()
        r = {"dataset": dataset, "variant": variant, "backend": backend, "frames": int(positions.shape[0]),
             "energy_mae": float((e - e_true).abs().mean()), "energy_max": float((e - e_true).abs().max()),
             "force_rel_rmse": _rel_rmse(f, f_true), "force_max_abs": float((f - f_true).abs().max())}
        if e32 is not None:
            r.update(energy_mae_vs_fp32=float((e - e32).abs().mean()), force_rel_rmse_vs_fp32=_rel_rmse(f, f32),
                     force_max_abs_vs_fp32=float((f - f32).abs().max()))
        rows.append(r)

    for backend in backends:
        base = load_model(model_path, backend=backend, dtype=torch.float32)
        e32, f32 = base.energy_forces(positions.float(), bead_types)
        e32, f32 = e32.double(), f32.double()
        for variant in variants:
            m = apply_variant(base, variant)
            e, f = m.energy_forces(positions.float(), bead_types)
            row(variant, backend, e, f, e32, f32)
    for name, dt in (("fp16-all", torch.float16), ("bf16-all", torch.bfloat16)):
        m = load_model(model_path, backend="reference", dtype=dt)
        e, f = m.energy_forces(positions.to(dt), bead_types)
        row(name, "reference", e, f, e32=None)
    return rows


def langevin_check(pdb: str, model_path: str, variant: str, steps: int, out_dir: str, seed: int = 3,
                   report_interval: int = 500, threads: Optional[int] = None, platform: str = "CPU",
                   backend: Optional[str] = None, compress: str = "none") -> Dict[str, object]:
    """A Langevin run (4 fs, 300 K, 1/ps) of ``variant`` and its stability: completed steps, the largest
    relative CG bond-length deviation from the PDB over the frames, mean temperature after the first fifth,
    and ns/day. ``stable`` is True when the run completed with every bond within 25 % of native and the
    mean temperature within 240-360 K. ``compress`` is simulate's ``--compress``: ``"none"`` (the default here)
    runs the exact filter network, the one 16-bit weights are measured against; ``"auto"`` what a user runs."""
    import mdtraj as md

    from flashschnet.openmm.simulate import RunSettings, run

    res: Dict[str, object] = {"variant": variant, "steps": steps}
    settings = RunSettings(pdb=pdb, model=model_path, out=out_dir, steps=steps, seed=seed, quantize=variant,
                           report_interval=report_interval, threads=threads, platform=platform, backend=backend,
                           compress=compress)
    try:
        result = run(settings, progress=False, echo=lambda msg: None)
    except SimulationInstabilityError as exc:
        res.update(completed=False, stable=False, error=str(exc))
        return res
    top = md.load(os.path.join(out_dir, "topology.pdb"))
    traj = md.load(os.path.join(out_dir, "replica_000.dcd"), top=os.path.join(out_dir, "topology.pdb"))
    bonds = np.array([[a.index, b.index] for a, b in top.topology.bonds])
    native = md.compute_distances(top, bonds)[0]
    dev = float(np.abs(md.compute_distances(traj, bonds) / native - 1.0).max())
    with open(os.path.join(out_dir, "log.csv")) as f:
        temps = np.array([float(r["temperature_K"]) for r in csv.DictReader(f)])
    t_mean = float(temps[len(temps) // 5:].mean())
    res.update(completed=result.steps_done == steps, frames=int(traj.n_frames), max_bond_deviation=dev,
               mean_temperature_K=t_mean, ns_per_day=result.ns_per_day_per_replica,
               stable=bool(result.steps_done == steps and dev < 0.25 and 240.0 < t_mean < 360.0),
               trajectory=os.path.join(out_dir, "replica_000.dcd"))
    return res


def drift_fit(time_ps: Sequence[float], total_kj_mol: Sequence[float]) -> Dict[str, float]:
    """Least-squares slope of the total energy (kJ/mol/ns) and its standard error (from the residuals,
    samples taken as independent). A slope within two standard errors of zero is no measurable drift."""
    t = np.asarray(time_ps, dtype=np.float64) * 1e-3
    e = np.asarray(total_kj_mol, dtype=np.float64)
    if len(t) < 3:
        return {"slope": float("nan"), "stderr": float("nan")}
    A = np.vstack([t, np.ones_like(t)]).T
    coef, *_ = np.linalg.lstsq(A, e, rcond=None)
    resid = e - A @ coef
    s2 = float(resid @ resid) / (len(t) - 2)
    stderr = float(np.sqrt(s2 / float(((t - t.mean()) ** 2).sum())))
    return {"slope": float(coef[0]), "stderr": stderr}


def nve_drift(mol, model, priors, positions_nm: np.ndarray, velocities_nm_ps: np.ndarray, dt_fs: float,
              steps: int, interval: int, platform: str = "Reference") -> Dict[str, object]:
    """Total energy of an NVE (velocity Verlet) run from the given state, every ``interval`` steps, and its
    drift: the slope of a straight-line fit (kJ/mol/ns) and that slope per degree of freedom in kT/ns at 300 K.
    """
    import openmm
    import openmm.unit as u

    from flashschnet.openmm.system import build_system

    system = build_system(mol, model, replicas=1, priors=priors, compress="none")      # the model as given
    integrator = openmm.VerletIntegrator(dt_fs * 1e-3)
    ctx = openmm.Context(system, integrator, openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(positions_nm)
    ctx.setVelocities(velocities_nm_ps)
    times, totals = [], []
    for k in range(steps // interval + 1):
        if k:
            integrator.step(interval)
        st = ctx.getState(getEnergy=True)
        e = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole) + \
            st.getKineticEnergy().value_in_unit(u.kilojoule_per_mole)
        if not np.isfinite(e):
            break
        times.append(st.getTime().value_in_unit(u.picosecond))
        totals.append(e)
    fit = drift_fit(times, totals)
    dof = 3 * mol.n_beads
    kT = 0.0083144626 * 300.0
    return {"dt_fs": dt_fs, "steps": steps, "completed": len(times) == steps // interval + 1, "dof": dof,
            "time_ps": list(times), "total_energy_kJ_mol": list(totals), "drift_kJ_mol_ns": fit["slope"],
            "drift_stderr_kJ_mol_ns": fit["stderr"], "drift_kT_per_dof_ns": fit["slope"] / (dof * kT),
            "fluctuation_kJ_mol": float(np.std(totals)) if totals else None}
