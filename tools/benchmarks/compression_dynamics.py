"""Dynamics of compressed models (tabulated filters) against the exact network: NVE energy drift and Langevin
stability, behind ``python tools/benchmarks/compression_report.py`` (a maintainer's tool, not installed).

The system is the real converted mlcg chignolin CA model with its (specialized) priors, or, where that file is
absent (``../shared/``), the mlcg oracle model with the mlcg chignolin prior. The network runs as an openmm-torch
``TorchForce`` with float64 weights (fused CPU path) on OpenMM's Reference platform (double precision throughout),
the priors as native OpenMM forces.

* :func:`nve` -- velocity-Verlet runs from one shared equilibrated state, one per velocity seed, the same seeds
  for every model: total-energy drift (slope of a straight-line fit) and fluctuation per run, mean and standard
  error over the runs;
* :func:`langevin` -- one Langevin run per model (same seed): finished without NaN, potential energy,
  temperature, largest force.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, Sequence

import numpy as np
import torch

from compression_accuracy import ORACLE, PRIOR_ORACLE, REAL_ORACLE, data_file, load_real

#: Boltzmann's constant in kJ/mol/K
KB = 0.0083144626
#: amu per mlcg mass unit (mlcg stores masses in kcal/mol ps^2/A^2 = amu / 418.4)
MLCG_MASS = 418.4


def dynamics_system(real_model: Path) -> Dict[str, Any]:
    """The system of the runs: ``label, model, network`` (float64 CGSchNet, fused CPU backend), ``priors``
    (PriorSet), ``masses`` (amu), ``types`` [N], ``start`` [N, 3] (A, the first oracle frame), ``note``."""
    real_frames = data_file(REAL_ORACLE)
    if Path(real_model).is_file() and real_frames is not None:
        network, priors = load_real(Path(real_model), "torch")
        o = torch.load(real_frames, weights_only=True)
        return {"label": "real mlcg chignolin CA model with its priors (10 beads)", "model": Path(real_model).name,
                "network": network, "priors": priors, "masses": (o["masses"].double() * MLCG_MASS).numpy(),
                "types": o["bead_types"].long(), "start": o["positions_A"][0].double().numpy(), "note": None}
    import flashschnet
    from flashschnet.priors import PriorSet

    oracle, prior = data_file(ORACLE), data_file(PRIOR_ORACLE)
    fx = torch.load(oracle, weights_only=True)
    priors = PriorSet.from_mlcg_oracle(torch.load(prior, weights_only=True)) if prior is not None else None
    return {"label": "mlcg oracle model on chignolin (5 beads, 49) with the mlcg chignolin prior"
                     + ("" if priors is not None else " (prior file missing: network only)"),
            "model": oracle.name, "network": flashschnet.load_model(oracle, backend="torch", dtype=torch.float64).network,
            "priors": priors, "masses": (fx["masses"].double() * MLCG_MASS).numpy(), "types": fx["bead_types"].long(),
            "start": fx["positions_A"][0].double().numpy(),
            "note": "the real mlcg model was not found, so the dynamics use the oracle model and the mlcg prior"}


def _context(spec: Dict[str, Any], network, integrator):
    import openmm

    from flashschnet.openmm.force import make_network_force
    from flashschnet.openmm.priors import add_prior_forces
    from flashschnet.openmm.units import conversion_factors

    system = openmm.System()
    for m in spec["masses"]:
        system.addParticle(float(m))
    system.addForce(make_network_force("torch", network, spec["types"], 1))
    if spec["priors"] is not None:
        length_to_nm, energy_to_kj = conversion_factors(spec["priors"].units)
        add_prior_forces(system, spec["priors"], replicas=1, n_beads=len(spec["masses"]),
                         length_to_nm=length_to_nm, energy_to_kj=energy_to_kj, force_group=1)
    return openmm.Context(system, integrator, openmm.Platform.getPlatformByName("Reference"))


def _langevin_integrator(dt_fs: float, seed: int, temperature: float = 300.0, friction: float = 1.0):
    import openmm

    integrator = openmm.LangevinMiddleIntegrator(temperature, friction, dt_fs * 1e-3)
    integrator.setRandomNumberSeed(int(seed))
    return integrator


def equilibrate(spec: Dict[str, Any], steps: int, dt_fs: float, seed: int) -> np.ndarray:
    """Positions (nm) after a Langevin run (300 K, 1/ps) of the exact model from ``spec["start"]``."""
    import openmm.unit as u

    integrator = _langevin_integrator(dt_fs, seed)
    ctx = _context(spec, spec["network"], integrator)
    ctx.setPositions(spec["start"] * 0.1)
    ctx.setVelocitiesToTemperature(300.0, int(seed))
    integrator.step(steps)
    return ctx.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)


def maxwell_velocities(masses: np.ndarray, seed: int, temperature: float = 300.0) -> np.ndarray:
    """Maxwell-Boltzmann velocities (nm/ps) from ``numpy.random.default_rng(seed)``, no centre-of-mass motion."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(len(masses), 3)) * np.sqrt(KB * temperature / masses)[:, None]
    return v - (masses[:, None] * v).sum(0) / masses.sum()


def linear_fit(t_ps: Sequence[float], e: Sequence[float]) -> Dict[str, float]:
    """Slope (kJ/mol/ns) of a least-squares line through ``e(t)`` and the RMS of the residuals (kJ/mol)."""
    t, e = np.asarray(t_ps, dtype=np.float64) * 1e-3, np.asarray(e, dtype=np.float64)
    if len(t) < 3:
        return {"slope": float("nan"), "residual_rms": float("nan")}
    slope, icept = np.polyfit(t, e, 1)
    return {"slope": float(slope), "residual_rms": float(np.sqrt(np.mean((e - slope * t - icept) ** 2)))}


def _mean_se(x: Sequence[float]) -> Dict[str, float]:
    x = np.asarray(x, dtype=np.float64)
    se = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
    return {"mean": float(x.mean()), "se": se, "n": int(len(x))}


def nve(spec: Dict[str, Any], models: Dict[str, Any], start_nm: np.ndarray, seeds: Sequence[int], dt_fs: float,
        steps: int, interval: int, log: Callable[[str], None] = lambda m: None) -> Dict[str, Any]:
    """NVE runs of each model (``{name: network}``; the first is the reference) from ``start_nm``, one per seed.

    Returns ``{name: {runs: [{seed, drift_kJ_mol_ns, fluctuation_kJ_mol, completed, sample_interval_ps,
    total_first_kJ_mol, total_minus_first_kJ_mol}],
    drift (mean/se/n, kJ/mol/ns), drift_kT_per_dof_ns (mean/se), fluctuation_kJ_mol (mean/se),
    diff_vs_reference (paired per-seed drift differences: mean/se), ms_per_step}}``.
    """
    import openmm
    import openmm.unit as u

    dof = 3 * len(spec["masses"])
    kT = KB * 300.0
    out: Dict[str, Any] = {}
    first = None
    for name, network in models.items():
        runs, t0 = [], time.perf_counter()
        for seed in seeds:
            integrator = openmm.VerletIntegrator(dt_fs * 1e-3)
            ctx = _context(spec, network, integrator)
            ctx.setPositions(start_nm)
            ctx.setVelocities(maxwell_velocities(spec["masses"], seed))
            times, totals = [], []
            for k in range(steps // interval + 1):
                if k:
                    integrator.step(interval)
                st = ctx.getState(getEnergy=True)
                e = (st.getPotentialEnergy() + st.getKineticEnergy()).value_in_unit(u.kilojoule_per_mole)
                if not np.isfinite(e):
                    break
                times.append(st.getTime().value_in_unit(u.picosecond))
                totals.append(e)
            fit = linear_fit(times, totals)
            runs.append({"seed": int(seed), "drift_kJ_mol_ns": fit["slope"], "fluctuation_kJ_mol": fit["residual_rms"],
                         "completed": len(times) == steps // interval + 1, "sample_interval_ps": interval * dt_fs * 1e-3,
                         "total_first_kJ_mol": totals[0] if totals else None,
                         "total_minus_first_kJ_mol": [round(e - totals[0], 7) for e in totals]})
        drifts = [r["drift_kJ_mol_ns"] for r in runs]
        res = {"runs": runs, "drift": _mean_se(drifts),
               "drift_kT_per_dof_ns": _mean_se([d / (dof * kT) for d in drifts]),
               "fluctuation_kJ_mol": _mean_se([r["fluctuation_kJ_mol"] for r in runs]),
               "ms_per_step": (time.perf_counter() - t0) / (len(seeds) * steps) * 1e3}
        if first is not None:
            res["diff_vs_reference"] = _mean_se([d - r["drift_kJ_mol_ns"] for d, r in zip(drifts, out[first]["runs"])])
        first = first or name
        out[name] = res
        log(f"nve {name}: drift {res['drift']['mean']:.3g} +- {res['drift']['se']:.2g} kJ/mol/ns "
            f"({res['ms_per_step']:.2f} ms/step)")
    return out


def langevin(spec: Dict[str, Any], network, steps: int, dt_fs: float, seed: int, interval: int,
             temperature: float = 300.0, friction: float = 1.0) -> Dict[str, Any]:
    """A Langevin (middle) run from ``spec["start"]`` with velocities from ``seed``: ``finished`` (all steps, no
    NaN), ``steps_done``, mean/std potential energy (kJ/mol) and mean temperature (K) over the samples after the
    first tenth, the largest per-bead force (kcal/mol/A, any sample), ``ms_per_step``."""
    import openmm
    import openmm.unit as u

    integrator = _langevin_integrator(dt_fs, seed, temperature, friction)
    ctx = _context(spec, network, integrator)
    ctx.setPositions(spec["start"] * 0.1)
    ctx.setVelocities(maxwell_velocities(spec["masses"], seed, temperature))
    dof = 3 * len(spec["masses"])
    pe, temp, fmax, done, error = [], [], 0.0, 0, None
    t0 = time.perf_counter()
    try:
        while done < steps:
            n = min(interval, steps - done)
            integrator.step(n)
            done += n
            st = ctx.getState(getEnergy=True, getForces=True)
            e = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            f = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)
            if not (np.isfinite(e) and np.isfinite(f).all()):
                error = f"NaN energy or forces at step {done}"
                break
            pe.append(e)
            temp.append(2.0 * st.getKineticEnergy().value_in_unit(u.kilojoule_per_mole) / (dof * KB))
            fmax = max(fmax, float(np.linalg.norm(f, axis=1).max()) / 41.84)
    except openmm.OpenMMException as exc:             # e.g. "Particle coordinate is NaN"
        error = str(exc).splitlines()[0]
    seconds = time.perf_counter() - t0
    skip = len(pe) // 10
    pe_a, t_a = np.asarray(pe[skip:]), np.asarray(temp[skip:])
    return {"steps": steps, "steps_done": done, "dt_fs": dt_fs, "seed": seed,
            "finished": error is None and done == steps, "error": error, "samples": len(pe_a),
            "potential_mean_kJ_mol": float(pe_a.mean()) if len(pe_a) else None,
            "potential_std_kJ_mol": float(pe_a.std()) if len(pe_a) else None,
            "temperature_mean_K": float(t_a.mean()) if len(t_a) else None,
            "temperature_std_K": float(t_a.std()) if len(t_a) else None,
            "force_max_kcal_mol_A": fmax, "seconds": seconds, "ms_per_step": seconds / max(done, 1) * 1e3}


def run_dynamics(real_model: Path, settings: Dict[str, Any], log: Callable[[str], None] = lambda m: None,
                 ) -> Dict[str, Any]:
    """Equilibration, NVE and Langevin runs of the exact model and its default compressions (``settings``:
    ``equil_steps, nve_runs, nve_steps, nve_dt, nve_interval, nve_dtypes, langevin_steps, langevin_dt,
    langevin_interval, seed``)."""
    from flashschnet.transforms import DEFAULT_KIND, DEFAULT_KNOTS, compress

    spec = dynamics_system(real_model)
    s = settings
    exact = spec["network"]
    models = {"exact": exact}
    for dt in s["nve_dtypes"]:
        models[f"{DEFAULT_KIND} {DEFAULT_KNOTS} {dt}"] = compress(exact, dtype=dt)
    t0 = time.perf_counter()
    start = equilibrate(spec, s["equil_steps"], s["langevin_dt"], s["seed"])
    log(f"equilibrated ({s['equil_steps']} steps) in {time.perf_counter() - t0:.1f} s")
    seeds = [s["seed"] + 1 + k for k in range(s["nve_runs"])]
    nve_res = nve(spec, models, start, seeds, s["nve_dt"], s["nve_steps"], s["nve_interval"], log)
    lang: Dict[str, Any] = {}
    for name in list(models)[:2]:
        lang[name] = langevin(spec, models[name], s["langevin_steps"], s["langevin_dt"], s["seed"],
                              s["langevin_interval"])
        log(f"langevin {name}: finished={lang[name]['finished']} ({lang[name]['seconds']:.1f} s)")
    return {"system": spec["label"], "model": spec["model"], "beads": len(spec["masses"]),
            "dof": 3 * len(spec["masses"]), "note": spec["note"], "platform": "Reference",
            "network_dtype": "float64", "backend": "torch", "settings": dict(s), "nve_seeds": seeds,
            "nve": nve_res, "langevin": lang, "seconds": time.perf_counter() - t0}
