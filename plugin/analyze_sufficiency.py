"""Whether each figure of ``flashschnet-analyze``'s report has enough data to mean something, and if not, how much
more it needs (docs/analysis.md, "Too little data").

A figure whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES`` is still drawn;
:func:`too_little_data` says (report.json ``too_little_data``, report.md, a ``warning:`` line) how many more frames
and steps it needs. Used by :func:`flashschnet.openmm.analyze.analyze`.

A parallel-tempering run's MBAR thermodynamics are held to ``MIN_SAMPLES_PER_TEMPERATURE``,
``MIN_ROUND_TRIPS_PER_WALKER`` and ``MIN_NEIGHBOUR_OVERLAP`` (docs/analysis.md, "Too little data for MBAR"):
:func:`mbar_sufficiency` says which fall short, and :func:`flashschnet.openmm.analyze_thermo.tempering_thermo` then
withholds the melting temperatures and marks the rest unreliable.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

# The fewest frames (log rows, for energy.png) a figure needs to mean something; below them the report says so
# and how many more are needed (docs/analysis.md, "Too little data"):
#: a time trace (RMSD, Rg, Q; energy and temperature): fewer points cannot tell a drift from a fluctuation
MIN_TRACE_POINTS = 10
#: an RMSF (a standard deviation per residue): from n independent frames it is uncertain by ~1/sqrt(2(n - 1)),
#: 16 % at 20 frames, and successive frames are not independent
MIN_RMSF_FRAMES = 20
#: a contact map: its fractions come in steps of 1/frames
MIN_CONTACT_FRAMES = 10
#: F(RMSD, Rg): F of a bin of n samples is uncertain by ~kT/sqrt(n); only from ~100 frames up do the populated
#: bins of even the coarsest default grid (5 x 5 .. 10 x 10) hold ~10 samples, F known there to ~0.3 kT
MIN_FES_FRAMES = 100


def too_little_data(records: Sequence[Dict[str, object]], key: str, logs: Dict[object, Dict[str, np.ndarray]],
                    pooled: bool, interval: int, stride: int) -> List[Dict[str, object]]:
    """The figures whose data fall short of ``MIN_TRACE_POINTS`` ... ``MIN_FES_FRAMES``, and how much more they need.

    Parameters
    ----------
    records : list of dict
        One per replica (``key="replica"``) or per temperature (``key="temperature_K"``), with ``"frames"``.
    key : {"replica", "temperature_K"}
    logs : dict {replica or temperature: log columns}
        The log.csv rows behind the energy traces.
    pooled : bool
        The contact map and F pool every record's frames (replicas of one temperature), rather than one each
        (the temperatures of a tempering run).
    interval : int
        Steps per report (a frame per record and a log row); 0 when unknown.
    stride : int
        ``--stride``: every stride-th frame is analysed (log rows are not thinned).

    Returns
    -------
    list of dict
        Per shortfall: ``figure``, ``quantity``, ``subjects`` (replica numbers or temperatures, K; None when
        pooled), ``frames`` (the fewest), ``needed``, ``more_frames``, ``more_steps`` (None when the interval is
        unknown) and ``message`` (one line).
    """
    out: List[Dict[str, object]] = []

    def named(subjects) -> str:
        if key == "replica":
            return ("replica " if len(subjects) == 1 else "replicas ") + ", ".join(str(r) for r in subjects)
        return ", ".join(f"{t:.1f}" for t in subjects) + " K"

    def add(figure, quantity, counts, need, per_report=1, unit="frames", thinned=True):
        short = {k: int(n) for k, n in counts.items() if n < need}
        if not short:
            return
        have = min(short.values())
        more = need - have
        reports = -(-more * (stride if thinned else 1) // per_report)
        steps = reports * interval if interval > 0 else None
        if None in short:
            what = f"{quantity} from {have} {unit}" + (f" ({len(records)} replicas pooled)" if len(records) > 1 else "")
        else:
            spread = (f"{have} {unit}" + (" each" if len(short) > 1 else "") if len(set(short.values())) == 1
                      else f"{have}-{max(short.values())} {unit}")
            what = f"{quantity} of {named(list(short))} from {spread}"
        how = (f"about {steps} more steps at the report interval of {interval}" if steps is not None
               else f"{reports} more reports")
        how += ", or a smaller --report-interval" + (f" or --stride (now {stride})" if thinned and stride > 1 else "")
        out.append({"figure": figure, "quantity": quantity, "subjects": None if None in short else list(short),
                    "frames": have, "needed": int(need), "more_frames": more, "more_steps": steps,
                    "message": f"too little data for {figure}: {what}; at least {need} are needed "
                               f"({more} more: {how})"})

    frames = {rec[key]: rec["frames"] for rec in records}
    add("energy.png", "the energy and temperature traces", {k: len(v["step"]) for k, v in logs.items()},
        MIN_TRACE_POINTS, unit="log rows", thinned=False)
    add("structure.png", "the RMSD, Rg and Q traces", frames, MIN_TRACE_POINTS, unit="points")
    add("structure.png", "the RMSF", frames, MIN_RMSF_FRAMES)
    maps = {None: sum(frames.values())} if pooled else frames
    per_report = len(records) if pooled else 1
    add("contacts.png", "the contact map", maps, MIN_CONTACT_FRAMES, per_report)
    add("fes.png", "F(RMSD, Rg)", maps, MIN_FES_FRAMES, per_report)
    return out


# -- MBAR across the temperatures of a tempering run (docs/analysis.md, "Too little data for MBAR") ---------------
# MBAR's errors are asymptotic (large-sample) standard errors of independent, equilibrated samples from a ladder whose
# walkers have mixed and whose neighbouring temperatures overlap; below any of these floors they understate the
# uncertainty, and the melting temperatures (a maximum and a crossing of noisy curves) are not reported.
#: uncorrelated samples per temperature (after equilibration detection and decorrelation): the heat capacity is a
#: variance of U, and a variance from n independent samples is uncertain by ~sqrt(2 / (n - 1)): 20 % at 50, 32 % at
#: 20, as large as a small protein's melting peak; pymbar's estimate of g from shorter series is itself biased low
MIN_SAMPLES_PER_TEMPERATURE = 50
#: completed round trips (lowest -> highest -> lowest rung) per walker, on average: a round trip brings a structure
#: from the hot end, where barriers are crossed, back to the cold rungs; until each walker has made one the cold
#: rungs may still sample only the basin of the (shared) starting structure, however small their error bars
MIN_ROUND_TRIPS_PER_WALKER = 1
#: overlap between neighbouring temperatures (pymbar's MBAR.compute_overlap(), the smaller of O[k, k+1] and
#: O[k+1, k]: the chance that a sample of one is seen in the other); 0.03 is the floor recommended for MBAR by
#: Klimovich, Shirts & Mobley, J. Comput.-Aided Mol. Des. 29, 397 (2015), as alchemlyb's documentation repeats
MIN_NEIGHBOUR_OVERLAP = 0.03
#: the start of exchange_diagnostics' warning for a run without a round trip (replaced by the MBAR one)
NO_ROUND_TRIP = "no walker completed a round trip"


def mbar_sufficiency(states: Sequence[Dict[str, object]], overlap: Sequence[Dict[str, float]],
                     exchange: Optional[Dict[str, object]]) -> Dict[str, object]:
    """Whether a tempering run's MBAR thermodynamics rest on enough data (the thresholds above).

    Parameters
    ----------
    states : list of dict
        Per temperature: ``temperature_K`` and ``samples`` (uncorrelated, as :class:`ThermoFit.states`).
    overlap : list of dict
        Per neighbouring pair: ``T_lo_K``, ``T_hi_K``, ``overlap`` (:meth:`ThermoFit.neighbour_overlap`).
    exchange : dict or None
        :func:`~flashschnet.openmm.exchange_diagnostics.diagnostics` (None: round trips unknown, not judged).

    Returns
    -------
    dict
        ``thresholds``; ``min_samples`` (and ``min_samples_T_K``), ``round_trips``, ``round_trips_needed`` (None
        without ``exchange``), ``min_neighbour_overlap`` (and the pair, ``min_overlap_pair_K``); ``failed`` (of
        "samples", "round_trips", "overlap"), ``sufficient``, ``reason`` (one clause per failure; None when
        sufficient) and ``warnings`` (one line per failure: the quantity, its value, the threshold, what to do).
    """
    consequence = ("melting temperatures withheld; thermo.csv (values and ±) and the reweighted surfaces "
                   "unreliable (docs/analysis.md, \"Too little data for MBAR\")")
    out: Dict[str, object] = {"thresholds": {"min_samples_per_temperature": MIN_SAMPLES_PER_TEMPERATURE,
                                             "min_round_trips_per_walker": MIN_ROUND_TRIPS_PER_WALKER,
                                             "min_neighbour_overlap": MIN_NEIGHBOUR_OVERLAP}}
    failed, reasons, warnings = [], [], []
    fewest = min(states, key=lambda s: s["samples"])
    out["min_samples"], out["min_samples_T_K"] = int(fewest["samples"]), float(fewest["temperature_K"])
    short = [s for s in states if s["samples"] < MIN_SAMPLES_PER_TEMPERATURE]
    if short:
        failed.append("samples")
        reasons.append(f"{fewest['samples']} uncorrelated samples at {fewest['temperature_K']:.1f} K (at least "
                       f"{MIN_SAMPLES_PER_TEMPERATURE} per temperature are needed)")
        warnings.append(f"MBAR: {fewest['samples']} uncorrelated samples at {fewest['temperature_K']:.1f} K after "
                        f"equilibration detection and decorrelation ({len(short)} of {len(states)} temperatures "
                        f"below {MIN_SAMPLES_PER_TEMPERATURE}), fewer than the {MIN_SAMPLES_PER_TEMPERATURE} per "
                        f"temperature needed: {consequence}; run longer")
    out["round_trips"] = out["round_trips_needed"] = None
    if exchange is not None:
        temps = exchange["temperatures_K"]
        trips, need = int(exchange["round_trips_total"]), MIN_ROUND_TRIPS_PER_WALKER * len(temps)
        out["round_trips"], out["round_trips_needed"] = trips, need
        if trips < need:
            failed.append("round_trips")
            reasons.append(f"{trips} walker round trips (at least {need} are needed)")
            path = f"{temps[0]:.1f} -> {temps[-1]:.1f} -> {temps[0]:.1f} K"
            what = (f"{NO_ROUND_TRIP} {path}" if trips == 0 else f"{trips} walker round trip(s) {path}")
            warnings.append(f"MBAR: {what} in {exchange['steps']} steps, fewer than the {need} needed "
                            f"({MIN_ROUND_TRIPS_PER_WALKER} per walker), the ladder is not mixed: {consequence}; "
                            "run longer (or use more, closer rungs)")
    out["min_neighbour_overlap"] = out["min_overlap_pair_K"] = None
    if overlap:
        worst = min(overlap, key=lambda p: p["overlap"])
        out["min_neighbour_overlap"] = float(worst["overlap"])
        out["min_overlap_pair_K"] = [float(worst["T_lo_K"]), float(worst["T_hi_K"])]
        if not worst["overlap"] >= MIN_NEIGHBOUR_OVERLAP:
            failed.append("overlap")
            reasons.append(f"overlap {worst['overlap']:.3f} between {worst['T_lo_K']:.1f} and {worst['T_hi_K']:.1f} K "
                           f"(at least {MIN_NEIGHBOUR_OVERLAP} is needed)")
            warnings.append(f"MBAR: overlap {worst['overlap']:.3f} between {worst['T_lo_K']:.1f} and "
                            f"{worst['T_hi_K']:.1f} K (the smallest of the neighbouring temperatures'), below "
                            f"{MIN_NEIGHBOUR_OVERLAP}: {consequence}; put a temperature between them (more, closer "
                            "rungs) or run longer")
    out.update({"failed": failed, "sufficient": not failed,
                "reason": ("too little data for MBAR: " + "; ".join(reasons)) if reasons else None,
                "warnings": warnings})
    return out
