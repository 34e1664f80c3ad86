"""Sampling efficiency of a run: observable series in, statistical inefficiency, effective samples and effective
samples per wall-clock hour out, with error bars (what ``flashschnet-compare`` reports per force field).

Definitions (per observable, e.g. Rg or Q; ``n`` frames per replica, ``R`` replicas, ``W`` the wall-clock hours
the step loop took to produce those frames):

* statistical inefficiency ``g = 1 + 2 tau`` (``tau``: the integrated autocorrelation time), in frames, from
  ``pymbar.timeseries.statistical_inefficiency`` (the ACF summed up to its first zero crossing after 3 lags, as
  pymbar does; ``g >= 1``); ``g`` in ps is ``g`` times the frame spacing;
* effective samples ``ESS = n / g`` per replica; ``ESS/hour = n / g / W`` per replica, and the aggregate over
  the replicas of one run: ``sum_r n / g_r / W`` (packed replicas share the wall time ``W``).

Error bars (one standard error; pymbar gives none for ``g``, hence the error code here):

* ``madras-sokal`` (one trajectory, e.g. MARTINI's): the asymptotic error of a summed autocorrelation time
  (Madras and Sokal, J. Stat. Phys. 50, 109 (1988)), ``sd(g) = g sqrt(2 (2 M + 1) / n)``, with ``M`` the last lag
  pymbar summed (:func:`summed_lags`). The spread of ``g`` over consecutive blocks was measured first and
  rejected: on AR(1) series it underestimated the error by about half (50 % of estimates within one error of
  the truth), as the estimate's noise comes from where the noisy ACF first crosses zero, which does not scale
  with the block length;
* ``replicas`` (two or more usable replicas, which are independent runs): ``g`` is the mean of the per-replica
  ``g_r`` and its error the standard error of that mean, ``sd(g_r) / sqrt(R)``, but never less than the
  Madras-Sokal error of the mean, ``sqrt(sum_r sd_r^2) / R`` (a spread of a few estimates can be ~0 by chance, or
  because pymbar clamps ``g`` at 1); ESS likewise from the per-replica values (the aggregate's error is ``R``
  times the per-replica mean's).

ESS and ESS/hour carry ``g``'s error (the wall time is taken as exact). Calibration, measured on AR(1) series
(exact ``g = (1 + phi) / (1 - phi)`` = 1, 3, 9; one trajectory of 2000 or 20000 frames, or 4 x 1000 or 8 x 2500;
100 seeds each): 70-86 % of estimates lie within one error of the exact ``g``, 96-100 % within two, all but one
in 1200 within three. The exception is uncorrelated data with 8 x 2500 frames (24 % within one error, 84 % within
two): pymbar's ``g`` is biased high by ~0.05 there, more than the error of a mean of 8.

Too little data is said, not hidden (a warning per case, in the result):

* fewer than :data:`MIN_FRAMES` finite frames: no estimate (``status`` ``"not enough frames"``);
* fewer than :data:`MIN_SAMPLES` effective samples per replica (``n / g``, the mean over the replicas: the
  ``ess`` reported, the one figure of effective samples everywhere): ``g`` is reported as a **lower bound**
  (ESS and ESS/hour as upper bounds; ``status`` ``"lower bound"``). pymbar's estimate is biased low on short
  series: on AR(1) series its mean is 0.80 of the true ``g`` at 10 samples per ``g``, 0.94 at 20, 1.02 at 50;
* a constant series (e.g. Q = 1 in every frame): ``g`` is undefined (``status`` ``"constant"``);
* NaN frames: each replica's longest stretch of consecutive finite frames is used (a gap would join unrelated
  frames), and said; a replica left with fewer than :data:`MIN_FRAMES` frames, or constant, is left out.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

#: fewer finite frames in a series: no estimate of g at all
MIN_FRAMES = 10
#: fewer effective samples (frames / g) in a series: g is a lower bound (see the module docstring)
MIN_SAMPLES = 20
#: pymbar's ``mintime``: the ACF is summed at least this far before a zero crossing ends it
MINTIME = 3


def _timeseries():
    from .thermo import _pymbar          # pymbar imported quietly, once for the package

    return _pymbar().timeseries


def statistical_inefficiency(x: np.ndarray) -> Optional[float]:
    """pymbar's statistical inefficiency of one series.

    Parameters
    ----------
    x : array [n]
        Finite values in time order (any unit).

    Returns
    -------
    float or None
        ``g >= 1`` in frames; None when ``x`` is constant (no fluctuation to correlate).
    """
    x = np.asarray(x, dtype=np.float64)
    if not np.ptp(x) > 0:
        return None
    return float(_timeseries().statistical_inefficiency(x))


def summed_lags(x: np.ndarray) -> int:
    """The last lag ``M`` that ``pymbar.timeseries.statistical_inefficiency`` sums (its default ``mintime``,
    :data:`MINTIME`): it stops at the first lag ``t > MINTIME`` where the normalised ACF is <= 0, or runs out at
    ``t = n - 1``. pymbar does not return it; the Madras-Sokal error needs it. The ACF is pymbar's,
    ``C(t) = sum_i dx_i dx_(i+t) / ((n - t) var x)``, by FFT here (``tests/openmm/test_sampling.py``
    checks that summing it to ``M`` gives pymbar's ``g``).

    Parameters
    ----------
    x : array [n]
        Finite, not constant.

    Returns
    -------
    int
        ``M`` in frames: pymbar summed lags 1 .. M (``M <= n - 2``).
    """
    d = np.asarray(x, dtype=np.float64)
    d = d - d.mean()
    n = len(d)
    f = np.fft.rfft(d, 2 * n)
    acf = np.fft.irfft(f * np.conj(f))[:n] / (np.arange(n, 0, -1) * (d * d).mean())
    stop = np.flatnonzero((acf <= 0.0) & (np.arange(n) > MINTIME))
    t = int(stop[0]) if len(stop) else n - 1
    return max(t - 1, 0)


def finite_stretch(x: np.ndarray) -> Tuple[int, int]:
    """``(start, stop)`` of the longest run of consecutive finite values of ``x`` [n] (the first of equal ones;
    ``(0, 0)`` when none is finite)."""
    ok = np.concatenate([[False], np.isfinite(np.asarray(x, dtype=np.float64)), [False]])
    edges = np.flatnonzero(ok[1:] != ok[:-1])            # starts and stops, alternating
    if not len(edges):
        return 0, 0
    starts, stops = edges[0::2], edges[1::2]
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k])


def _value(value: Optional[float], error: Optional[float]) -> Dict[str, Optional[float]]:
    def clean(v):
        return None if v is None or not math.isfinite(v) else float(v)

    return {"value": clean(value), "error": clean(error)}


def _mean_sem(values: Sequence[float]) -> Tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v)))


def _usable(series: np.ndarray, name: str, warnings: List[str]) -> List[Optional[np.ndarray]]:
    """Per replica: its longest finite stretch, or None (too short); NaN frames and left-out replicas said."""
    used: List[Optional[np.ndarray]] = []
    for r, x in enumerate(series):
        a, b = finite_stretch(x)
        who = f"{name}, replica {r}" if len(series) > 1 else name
        if b - a < len(x):
            warnings.append(f"{who}: {len(x) - np.isfinite(x).sum()} of {len(x)} frames are NaN; g from the longest "
                            f"finite stretch ({b - a} frames)")
        if b - a < MIN_FRAMES:
            if len(series) > 1 and b - a < len(x):
                warnings.append(f"{who}: left out (fewer than {MIN_FRAMES} consecutive finite frames)")
            used.append(None)
            continue
        used.append(np.asarray(x[a:b], dtype=np.float64))
    return used


def estimate(series: np.ndarray, frame_ps: float, wall_s: Optional[float] = None, name: str = "") -> Dict[str, object]:
    """Statistical inefficiency, effective samples and ESS/hour of one observable of one run.

    Parameters
    ----------
    series : array [R, n]
        The observable at each analysed frame of each replica (any unit; NaN for a frame without a value).
    frame_ps : float
        Simulated time between frames, ps.
    wall_s : float or None
        Wall-clock seconds the step loop took to produce the ``n`` frames (the replicas together); None: not
        recorded (ESS/hour is then None).
    name : str
        Names the observable in warnings.

    Returns
    -------
    dict
        ``status`` (``"ok"``, ``"lower bound"``, ``"not enough frames"``, ``"constant"``), ``frames`` (n),
        ``replicas`` (R) and ``replicas_used``; ``g`` (frames) and ``g_ps`` as ``{"value", "error"}``;
        ``g_per_replica`` (frames; None where left out); ``ess`` (per replica), ``ess_total``, ``ess_per_hour``
        (per replica), ``ess_per_hour_aggregate`` as ``{"value", "error"}`` (None values where not estimated);
        ``bound`` (``"lower"`` for g when ``status`` is ``"lower bound"``, else None); ``error_method``
        (``"replicas"``, ``"madras-sokal"`` or None) and ``error_description``; ``warnings`` (one line each).
    """
    series = np.atleast_2d(np.asarray(series, dtype=np.float64))
    R, n = series.shape
    warnings: List[str] = []
    used = _usable(series, name, warnings)
    g_r = [statistical_inefficiency(x) if x is not None else None for x in used]
    pairs = [(x, g) for x, g in zip(used, g_r) if g is not None]
    constant = sum(x is not None and g is None for x, g in zip(used, g_r))
    if constant and pairs:
        warnings.append(f"{name}: {constant} of {R} replicas constant over the analysed frames; left out")
    out: Dict[str, object] = {"frames": int(n), "replicas": int(R), "replicas_used": len(pairs), "bound": None,
                              "error_method": None, "error_description": None, "g_per_replica": g_r}
    out.update({k: _value(None, None) for k in ("g", "g_ps", "ess", "ess_total", "ess_per_hour",
                                                 "ess_per_hour_aggregate")})
    if all(x is None for x in used):
        out["status"] = "not enough frames"
        warnings.append(f"{name}: not enough frames to estimate g ({n} analysed, fewer than {MIN_FRAMES} finite "
                        "in a row); run longer or write more frames (--frames)")
    elif not pairs:
        out["status"] = "constant"
        warnings.append(f"{name}: constant over the analysed frames; g is undefined (nothing fluctuates)")
    else:
        out.update(_errors(pairs, frame_ps, wall_s, name, warnings))
    out["warnings"] = warnings
    return out


def madras_sokal(x: np.ndarray, g: float) -> float:
    """One standard error of ``g`` [frames] estimated from the series ``x`` [n]: ``g sqrt(2 (2 M + 1) / n)``, ``M``
    the last lag pymbar summed (:func:`summed_lags`; module docstring)."""
    return g * math.sqrt(2.0 * (2 * summed_lags(x) + 1) / len(x))


def _errors(pairs: List[Tuple[np.ndarray, float]], frame_ps: float, wall_s: Optional[float], name: str,
            warnings: List[str]) -> Dict[str, object]:
    """g, ESS and ESS/hour with their errors from the usable replicas' (series, g) (module docstring)."""
    frames = np.array([len(x) for x, _ in pairs], dtype=np.float64)
    g = np.array([g for _, g in pairs])
    sokal = np.array([madras_sokal(x, gr) for x, gr in pairs])       # per replica, frames
    ess = frames / g
    ess_sokal = ess * sokal / g                                      # ESS carries g's relative error
    k = len(pairs)
    out: Dict[str, object] = {}
    if k >= 2:
        g_mean, g_spread = _mean_sem(g)
        ess_mean, ess_spread = _mean_sem(ess)
        # the larger of the replicas' spread and the Madras-Sokal error of their mean: a spread of a few clamped
        # (g = 1) or alike estimates can be ~0, which no estimate from n frames is
        g_err = max(g_spread, math.sqrt((sokal ** 2).sum()) / k)
        ess_err = max(ess_spread, math.sqrt((ess_sokal ** 2).sum()) / k)
        out["error_method"] = "replicas"
        out["error_description"] = (f"standard error of the mean over {k} independent replicas (the larger of "
                                    "sd/sqrt(R) and the Madras-Sokal error of the mean)")
        out["ess"] = _value(ess_mean, ess_err)
        out["ess_total"] = _value(ess.sum(), ess_err * k)
    else:
        g_mean, g_err = float(g[0]), float(sokal[0])
        out["error_method"] = "madras-sokal"
        out["error_description"] = (f"one trajectory: Madras-Sokal g sqrt(2 (2M + 1) / n), M = "
                                    f"{summed_lags(pairs[0][0])} lags summed, n = {int(frames[0])} frames")
        out["ess"] = _value(ess[0], ess_sokal[0])
        out["ess_total"] = out["ess"]
    out["g"] = _value(g_mean, g_err)
    out["g_ps"] = _value(g_mean * frame_ps, g_err * frame_ps)
    if wall_s is not None and wall_s > 0:
        hours = wall_s / 3600.0
        out["ess_per_hour"] = _value(out["ess"]["value"] / hours, out["ess"]["error"] / hours)
        out["ess_per_hour_aggregate"] = _value(out["ess_total"]["value"] / hours, out["ess_total"]["error"] / hours)
    samples = out["ess"]["value"]          # the table's figure: the mean of frames / g over the replicas
    if samples < MIN_SAMPLES:
        out["status"], out["bound"] = "lower bound", "lower"
        warnings.append(f"{name}: only {samples:.3g} effective samples per replica (frames / g, the mean over the "
                        f"replicas; fewer than {MIN_SAMPLES}): g is a lower bound and ESS/hour an upper bound; run "
                        "longer")
    else:
        out["status"] = "ok"
    return out


def autocorrelation(series: np.ndarray, max_lag: Optional[int] = None) -> Optional[np.ndarray]:
    """Normalised fluctuation autocorrelation function of an observable, pooled over replicas
    (``pymbar.timeseries.normalized_fluctuation_correlation_function_multiple``; each replica's longest finite
    stretch of at least :data:`MIN_FRAMES` frames, constant ones left out).

    Parameters
    ----------
    series : array [R, n]
    max_lag : int, optional
        Last lag in frames (default: half the shortest stretch used).

    Returns
    -------
    array [max_lag + 1] or None
        C(0) = 1, C(1), ... ; None when no replica qualifies.
    """
    used = [x[a:b] for x in np.atleast_2d(np.asarray(series, dtype=np.float64))
            for a, b in [finite_stretch(x)] if b - a >= MIN_FRAMES and np.ptp(x[a:b]) > 0]
    if not used:
        return None
    lag = min(len(x) for x in used) // 2 if max_lag is None else int(max_lag)
    return np.asarray(_timeseries().normalized_fluctuation_correlation_function_multiple(used, N_max=lag),
                      dtype=np.float64)


def sampling_efficiency(observables: Dict[str, np.ndarray], frame_ps: float, wall_s: Optional[float],
                        labels: Optional[Dict[str, str]] = None) -> Dict[str, object]:
    """:func:`estimate` and :func:`autocorrelation` of each observable of one run.

    Parameters
    ----------
    observables : dict {key: array [R, n]}
        The analysed frames of each observable (e.g. ``{"rg": nm, "q": fraction}``).
    frame_ps : float
        Simulated time between frames, ps.
    wall_s : float or None
        Wall-clock seconds of the step loop that produced the ``n`` frames; None: not recorded.
    labels : dict {key: str}, optional
        How warnings name each observable (default its key).

    Returns
    -------
    dict
        ``frame_ps``, ``wall_s``, ``thresholds`` (``min_frames``, ``min_samples``), ``observables``
        ({key: :func:`estimate`}), ``acf`` ({``lag_ps``: [L], key: [L] or None}), ``warnings`` (every
        observable's).
    """
    labels = labels or {}
    est = {k: estimate(v, frame_ps, wall_s, labels.get(k, k)) for k, v in observables.items()}
    acfs = {k: autocorrelation(v) for k, v in observables.items()}
    longest = max((len(a) for a in acfs.values() if a is not None), default=0)
    acf = {"lag_ps": (np.arange(longest) * frame_ps).tolist()}
    acf.update({k: (a.tolist() if a is not None else None) for k, a in acfs.items()})
    return {"frame_ps": float(frame_ps), "wall_s": None if wall_s is None else float(wall_s),
            "thresholds": {"min_frames": MIN_FRAMES, "min_samples": MIN_SAMPLES},
            "observables": est, "acf": acf, "warnings": [w for e in est.values() for w in e["warnings"]]}
