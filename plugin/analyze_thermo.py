"""The thermodynamics and mixing part of ``flashschnet-analyze`` for a parallel-tempering run: the per-frame
energies and observables of every rung handed to MBAR (:class:`flashschnet.openmm.thermo.ThermoFit`), and the
walkers' mixing (:func:`flashschnet.openmm.exchange_diagnostics.diagnostics`).

Samples: rung ``T``'s frames (its ``T<K>.dcd``, every ``--stride``-th; their Q, Rg and RMSD from
:func:`flashschnet.openmm.analyze_series.trajectory_series`) and its ``log.csv`` rows (the walker that was at ``T``
during the segment ending at that step, :func:`~flashschnet.openmm.analyze_series.log_series`) are written at the
same report steps: a frame's potential energy is the row of its step. A frame without a row is left out (noted), and
so is the step-0 frame (the starting structure, the same for every rung: not a sample of any temperature).

Options (checked before any work, :func:`check_options`): ``--temperatures-out`` (``TMIN:TMAX:N``, N evenly
spaced temperatures, or a comma-separated list; default the ladder) inside the ladder's range,
``--fes-temperatures`` (a list, default the lowest and highest output temperatures) and ``--bootstrap`` (resamplings
for the melting temperatures' uncertainties, default :data:`DEFAULT_BOOTSTRAP`). Each is refused (one line, exit 2)
for a run that is not parallel tempering. The files are written by :mod:`flashschnet.openmm.thermo_report`.

Too little data (:func:`flashschnet.openmm.analyze_sufficiency.mbar_sufficiency`, docs/analysis.md "Too little
data for MBAR"): fewer uncorrelated samples per rung, round trips per walker or neighbour overlap than its thresholds
get a warning each, the melting temperatures are withheld (None, with the reason) and the table and reweighted
surfaces are marked unreliable; a reweighted surface from fewer effective frames than ``MIN_FES_FRAMES`` too.
"""
from __future__ import annotations

import importlib.util
import math
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .analyze_sufficiency import MIN_FES_FRAMES, NO_ROUND_TRIP, mbar_sufficiency
from .ladder import split_temperatures
from .run_options import tempering_only
from .run_reader import step_fs

if TYPE_CHECKING:
    from .run_reader import RunDir

DEFAULT_BOOTSTRAP = 100
#: a temperature list may hold at most this many temperatures (a 1000-row table is already more than a figure shows)
MAX_TEMPERATURES = 1000
#: observables per frame handed to MBAR: name in thermo.csv -> key of a trajectory_series record
OBSERVABLES = {"Q": "q", "rg_nm": "rg_nm", "rmsd_nm": "rmsd_nm"}
#: rung temperatures from T<K>.dcd names are rounded to 0.1 K
NAME_ROUNDING_K = 0.05


def parse_temperature_list(text: str, option: str) -> List[float]:
    """``"280:420:29"`` -> 29 evenly spaced temperatures from 280 to 420 K; ``"300,350"`` -> that list; each finite
    and positive. Anything else: a one-line :class:`InputError` naming ``option``."""
    text = str(text).strip()
    try:
        spec = split_temperatures(text, skip_empty=False)
        if isinstance(spec, tuple):
            lo, hi, n = spec
            if not (1 <= n <= MAX_TEMPERATURES) or (n > 1 and not hi > lo) or (n == 1 and hi != lo):
                raise ValueError(text)
            spec = list(np.linspace(lo, hi, n))
        temps = spec
    except ValueError:
        raise InputError(f"{option} {text!r}: give TMIN:TMAX:N (N evenly spaced temperatures, K, TMIN < TMAX) or a "
                         "comma-separated list, e.g. 280:420:29 or 300,350") from None
    if not temps or len(temps) > MAX_TEMPERATURES or not all(math.isfinite(t) and t > 0 for t in temps):
        raise InputError(f"{option} {text!r}: every temperature must be a positive finite number of kelvin "
                         f"(at most {MAX_TEMPERATURES} of them)")
    return sorted(dict.fromkeys(float(t) for t in temps))


def check_options(temperatures_out: Optional[str], fes_temperatures: Optional[str], bootstrap: Optional[int],
                  ladder: Optional[Dict[float, str]], rd: "RunDir") -> Tuple[Optional[List[float]],
                                                                          Optional[List[float]]]:
    """The thermodynamics options (module docstring), parsed and checked against the run's ladder (``rd``: the
    run, :class:`~flashschnet.openmm.run_reader.RunDir`).

    Returns
    -------
    (targets, fes_temperatures)
        Lists of K, or None for the defaults.
    """
    given = [o for o, v in (("--temperatures-out", temperatures_out), ("--fes-temperatures", fes_temperatures),
                            ("--bootstrap", bootstrap)) if v is not None]
    tempering_only(given, rd, ladder, "thermodynamics across temperatures (MBAR) needs a run of flashschnet-simulate "
                   "--temperatures")
    if ladder is None:
        return None, None
    if bootstrap is not None and bootstrap < 0:
        raise InputError(f"--bootstrap must be >= 0, got {bootstrap}")
    if importlib.util.find_spec("pymbar") is None:     # before any work; the command line names the extra to install
        raise ModuleNotFoundError("No module named 'pymbar'", name="pymbar")
    lo, hi = min(ladder) - NAME_ROUNDING_K, max(ladder) + NAME_ROUNDING_K
    out = []
    for option, text in (("--temperatures-out", temperatures_out), ("--fes-temperatures", fes_temperatures)):
        temps = None if text is None else parse_temperature_list(text, option)
        for t in temps or []:
            if not lo <= t <= hi:
                raise InputError(f"{option}: {t:g} K is outside the run's temperatures ({min(ladder):.1f}-"
                                 f"{max(ladder):.1f} K); MBAR does not extrapolate: choose temperatures within them")
        out.append(temps)
    return out[0], out[1]


def rung_samples(records: Sequence[Dict[str, object]], notes: List[str]):
    """Per rung with frames and log rows: its temperature, the energy of each frame (its log row) and the
    frame's observables. Returns ``(temperatures, energies, {name: per-rung arrays})``."""
    temps, energies, obs = [], [], {name: [] for name in OBSERVABLES}
    for rec in records:
        log = rec.get("log")
        if log is None or not len(log["step"]):
            notes.append(f"{rec['temperature_K']:.1f} K has no log.csv rows: left out of the thermodynamics")
            continue
        by_step = dict(zip(np.asarray(log["step"]).tolist(), np.asarray(log["potential_energy_kJ_mol"]).tolist()))
        steps = np.asarray(rec["step"]).tolist()
        keep = [i for i, s in enumerate(steps) if s in by_step and s > 0]       # step 0: the start, not a sample
        unlogged = sum(1 for s in steps if s not in by_step)
        if unlogged:
            notes.append(f"{rec['file']}: {unlogged} of {len(steps)} frames have no log.csv row of their step: left "
                         "out of the thermodynamics")
        if len(keep) == 0:
            continue
        temps.append(float(rec["temperature_K"]))
        energies.append(np.array([by_step[steps[i]] for i in keep], dtype=float))
        for name, key in OBSERVABLES.items():
            obs[name].append(np.asarray(rec[key], dtype=float)[keep])
    return temps, energies, obs


def tempering_thermo(run_dir: str, records: Sequence[Dict[str, object]], ladder: Sequence[float],
                     cfg: Dict[str, object], targets: Optional[List[float]], fes_temps: Optional[List[float]],
                     bootstrap: Optional[int], bins: Optional[int], notes: List[str],
                     damage: Optional[List[str]] = None) -> Tuple[Optional[Dict[str, object]],
                                                                  Optional[Dict[str, object]], List[str]]:
    """MBAR thermodynamics and the mixing diagnostics of a tempering run.

    Returns
    -------
    thermo : dict or None
        ``method``, ``states``, ``table`` (columns of thermo.csv), ``melting``, ``fes`` (a list of surfaces, each
        ``reliable`` or not), ``sufficiency`` (:func:`~flashschnet.openmm.analyze_sufficiency.mbar_sufficiency`
        less its warnings: below its thresholds ``melting``'s temperatures are None and ``withheld`` says why);
        None when fewer than two rungs have frames with energies (noted; an error when ``targets`` or
        ``fes_temps`` were asked for).
    exchange : dict or None
        :func:`~flashschnet.openmm.exchange_diagnostics.diagnostics` (None without exchanges.csv, noted).
    warnings : list of str
        One line each (thermodynamics and mixing).
    """
    from .exchange_diagnostics import diagnostics
    from .thermo import MIN_DECORRELATE, ThermoError, ThermoFit, _pymbar

    ParameterError = _pymbar().utils.ParameterError         # imported quietly (pymbar logs on import)

    warnings: List[str] = []
    dt_ps = step_fs(cfg) * 1e-3 if step_fs(cfg) is not None else None
    exchange = None
    if os.path.isfile(os.path.join(run_dir, "exchanges.csv")):
        exchange = diagnostics(run_dir, ladder, dt_ps, damage)
        if exchange is not None:
            warnings += exchange["warnings"]
            notes += exchange["notes"]
    else:
        (notes if damage is None else damage).append("exchanges.csv: missing; no mixing diagnostics (acceptance, "
                                                     "occupancy, round trips)")

    temps, energies, obs = rung_samples(records, notes)
    if len(temps) < 2:
        if targets is not None or fes_temps is not None:
            raise InputError(f"{run_dir}: {len(temps)} temperature(s) with both frames and log.csv energies; "
                             "MBAR needs at least 2 (drop --temperatures-out/--fes-temperatures, or analyse a run "
                             "whose log.csv says where each walker was)")
        notes.append("no thermodynamics (MBAR): fewer than 2 temperatures have frames with log.csv energies")
        return None, exchange, warnings
    try:
        fit = ThermoFit(temps, energies, obs)
        t_out = fit.check_targets(targets if targets is not None else temps, "--temperatures-out")
        table = fit.table(t_out)
    except (ThermoError, ParameterError, np.linalg.LinAlgError) as exc:
        warnings.append(f"no thermodynamics (thermo.csv): {str(exc).splitlines()[0].strip()}")
        return None, exchange, warnings
    short = [s for s in fit.states if s["frames"] < MIN_DECORRELATE]
    if short:
        names = ", ".join(format(s["temperature_K"], ".1f") for s in short)
        warnings.append(f"{names} K: fewer "
                        f"than {MIN_DECORRELATE} frames, too few to estimate the equilibration and correlation "
                        "time: every frame is used as an independent sample, so the uncertainties are "
                        "underestimated; run longer")
    # enough data for MBAR's figures to be trusted (analyze_sufficiency: samples, round trips, overlap)?
    enough = mbar_sufficiency(fit.states, fit.neighbour_overlap(), exchange)
    if "round_trips" in enough["failed"]:           # its own line says it, with the threshold: not twice
        warnings = [w for w in warnings if not w.startswith(NO_ROUND_TRIP)]
    warnings += enough.pop("warnings")
    melting = None
    if len(t_out) < 3:
        notes.append("fewer than 3 output temperatures (--temperatures-out): no melting temperature")
    elif not enough["sufficient"]:                  # withheld, not computed: no number to mistake for a result
        melting = {"heat_capacity_peak_K": None, "heat_capacity_peak_err_K": None, "q_half_K": None,
                   "q_half_err_K": None, "range_K": [float(t_out.min()), float(t_out.max())],
                   "bootstrap_replicates": 0, "withheld": enough["reason"]}
    else:
        melting = fit.melting(float(t_out.min()), float(t_out.max()),
                              DEFAULT_BOOTSTRAP if bootstrap is None else int(bootstrap))
    fes_list = fes_temps if fes_temps is not None else sorted({float(t_out.min()), float(t_out.max())})
    fit.check_targets(fes_list, "--fes-temperatures")
    n_bins = int(bins) if bins else int(np.clip(round(math.sqrt(int(fit.n_frames_k.sum()))), 5, 50))
    fes = [fit.free_energy_surface(t, x, "rg_nm", n_bins) for t in fes_list for x in ("Q", "rmsd_nm")]
    thin = sorted({s["temperature_K"] for s in fes if s["effective_frames"] < MIN_FES_FRAMES})
    for s in fes:
        s["reliable"] = bool(enough["sufficient"] and s["effective_frames"] >= MIN_FES_FRAMES)
    if thin:
        fewest = min(s["effective_frames"] for s in fes)
        warnings.append("reweighted F(Q, Rg), F(RMSD, Rg) at " + ", ".join(f"{t:.1f}" for t in thin) + " K from "
                        f"{fewest:.0f} effective frames (the fewest), fewer than the {MIN_FES_FRAMES} a surface "
                        "needs (docs/analysis.md, \"Too little data\"): marked unreliable; run longer")
    thermo = {"method": "MBAR (pymbar 4) over every temperature's uncorrelated samples (pymbar.timeseries: "
                        "equilibration detected and dropped, then every g-th frame)",
              "states": fit.states, "temperatures_out_K": t_out, "table": table, "melting": melting,
              "fes": fes, "bins": n_bins, "sufficiency": enough}
    return thermo, exchange, warnings
