"""flashschnet.openmm.sampling: statistical inefficiency, effective samples and ESS/hour with error bars.

The exact answer: an AR(1) series ``x_t = phi x_(t-1) + e_t`` has ``g = (1 + phi) / (1 - phi)``. The edges: a
constant series, too few frames, NaN frames, one replica against several (the error method switches and is
named). Everything here is numpy on a few thousand numbers: well under a second.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from flashschnet.openmm.sampling import (MIN_FRAMES, MIN_SAMPLES, autocorrelation, estimate, finite_stretch,
                                         madras_sokal, sampling_efficiency, statistical_inefficiency, summed_lags)
from tests.helpers.ar1 import ar1


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
@pytest.mark.parametrize("shape, method", [((1, 20000), "madras-sokal"), ((8, 2500), "replicas")])
def test_ar1_statistical_inefficiency_within_its_error_bars(phi, shape, method):
    """g = (1 + phi) / (1 - phi) recovered within 3 of the module's own errors, which are tight (under 10 % of g).
    Over 100 seeds per case, all but one of 600 estimates lie within 3 errors (the module docstring's calibration);
    the seed here is fixed."""
    exact = (1 + phi) / (1 - phi)
    e = estimate(ar1(phi, shape, seed=int(10 * phi) + shape[0]), frame_ps=2.0, wall_s=1800.0, name="x")
    assert e["error_method"] == method and e["status"] == "ok" and e["bound"] is None
    g, err = e["g"]["value"], e["g"]["error"]
    assert 0.0 < err < 0.1 * exact
    assert abs(g - exact) < 3.0 * err, (g, err, exact)
    assert e["g_ps"]["value"] == pytest.approx(2.0 * g) and e["g_ps"]["error"] == pytest.approx(2.0 * err)


def test_ess_per_hour_arithmetic_on_known_inputs():
    """ESS = n / g per replica; ESS/hour divides by the wall hours the replicas shared; the aggregate sums the
    replicas; the errors follow the documented rules (replicas: the larger of the spread and the Madras-Sokal
    error of the mean; one trajectory: g's relative error)."""
    x = ar1(0.5, (3, 400), seed=3)
    e = estimate(x, frame_ps=0.5, wall_s=1800.0)                       # half an hour
    g = np.array([statistical_inefficiency(r) for r in x])
    assert e["g_per_replica"] == pytest.approx(g.tolist())
    ess = 400 / g
    assert e["g"]["value"] == pytest.approx(g.mean())
    sokal = np.array([gr * math.sqrt(2 * (2 * summed_lags(r) + 1) / 400) for r, gr in zip(x, g)])
    assert e["g"]["error"] == pytest.approx(max(g.std(ddof=1) / math.sqrt(3), math.sqrt((sokal ** 2).sum()) / 3))
    assert e["ess"]["value"] == pytest.approx(ess.mean())
    assert e["ess_total"]["value"] == pytest.approx(ess.sum())
    assert e["ess_per_hour"]["value"] == pytest.approx(ess.mean() * 2.0)
    assert e["ess_per_hour_aggregate"]["value"] == pytest.approx(ess.sum() * 2.0)
    assert e["ess_per_hour_aggregate"]["error"] == pytest.approx(3 * e["ess_per_hour"]["error"])
    one = estimate(x[:1], frame_ps=0.5, wall_s=7200.0)
    assert one["ess_per_hour"]["value"] == pytest.approx(400 / g[0] / 2.0)
    assert one["ess_per_hour"]["error"] / one["ess_per_hour"]["value"] == pytest.approx(sokal[0] / g[0])
    assert one["ess_per_hour_aggregate"] == one["ess_per_hour"]
    assert madras_sokal(x[0], g[0]) == pytest.approx(sokal[0])
    # replicas that agree exactly (here: copies) have no spread; the error is still the Madras-Sokal error of the mean
    same = estimate(np.vstack([x[0]] * 4), frame_ps=0.5, wall_s=1800.0)
    assert same["g"]["value"] == pytest.approx(g[0]) and same["g"]["error"] == pytest.approx(sokal[0] / 2)


@pytest.mark.parametrize("phi, n", [(0.0, 12), (0.3, 50), (0.8, 500), (0.95, 3000)])
def test_summed_lags_are_pymbars(phi, n):
    """Summing pymbar's normalised ACF to lag summed_lags(x) gives pymbar's own g (so the Madras-Sokal window is
    the one pymbar used)."""
    x = ar1(phi, (n,), seed=n)
    lags = summed_lags(x)
    d = x - x.mean()
    c = np.array([np.sum(d[:n - t] * d[t:]) / ((n - t) * (d * d).mean()) for t in range(1, lags + 1)])
    g = max(1.0, 1.0 + 2.0 * np.sum(c * (1.0 - np.arange(1, lags + 1) / n)))
    assert g == pytest.approx(statistical_inefficiency(x), rel=1e-9)
    assert lags >= 3 or lags == n - 2


def test_one_replica_and_several_name_their_error_method():
    x = ar1(0.5, (4, 600), seed=11)
    several, one = estimate(x, 1.0, 60.0), estimate(x[:1], 1.0, 60.0)
    assert several["error_method"] == "replicas" and "4 independent replicas" in several["error_description"]
    assert one["error_method"] == "madras-sokal" and "one trajectory" in one["error_description"]
    assert several["replicas_used"] == 4 and one["replicas_used"] == 1
    # the aggregate over packed replicas is worth more per hour than one replica, by about R
    assert several["ess_per_hour_aggregate"]["value"] > 3 * one["ess_per_hour"]["value"]


def test_a_constant_series_has_no_g():
    e = estimate(np.ones((1, 50)), 1.0, 60.0, name="Q")
    assert e["status"] == "constant" and e["g"]["value"] is None and e["ess_per_hour"]["value"] is None
    assert e["warnings"] == ["Q: constant over the analysed frames; g is undefined (nothing fluctuates)"]
    mixed = np.vstack([np.ones(50), ar1(0.5, (2, 50), seed=2)])       # one constant replica of three: left out
    e = estimate(mixed, 1.0, 60.0, name="Q")
    assert e["replicas_used"] == 2 and e["g_per_replica"][0] is None and e["g"]["value"] is not None
    assert any("1 of 3 replicas constant" in w for w in e["warnings"])
    assert autocorrelation(np.ones((1, 50))) is None


def test_too_few_frames_are_said_not_estimated():
    e = estimate(ar1(0.5, (1, MIN_FRAMES - 1), seed=1), 1.0, 60.0, name="Rg")
    assert e["status"] == "not enough frames" and e["g"]["value"] is None and e["ess"]["value"] is None
    assert len(e["warnings"]) == 1 and "not enough frames" in e["warnings"][0]


def test_a_short_series_is_a_lower_bound():
    """Fewer than MIN_SAMPLES effective samples: g is a lower bound (and ESS an upper one), with a warning, even
    though a number is reported; enough samples of the same process: a plain estimate."""
    short = estimate(ar1(0.8, (1, 60), seed=4), 1.0, 60.0, name="Rg")
    assert short["frames"] / short["g"]["value"] < MIN_SAMPLES
    assert short["status"] == "lower bound" and short["bound"] == "lower"
    assert any("g is a lower bound" in w for w in short["warnings"])
    assert estimate(ar1(0.8, (1, 5000), seed=4), 1.0, 60.0)["status"] == "ok"



def test_the_warning_gives_the_tables_effective_samples():
    """One estimator of effective samples per replica everywhere: the warning's figure is the reported ``ess`` (the
    mean over replicas of frames / g), not frames over the mean g -- different numbers for replicas of unequal g."""
    import re

    x = np.concatenate([ar1(0.95, (1, 120), seed=7), ar1(0.6, (1, 120), seed=8)])
    e = estimate(x, 1.0, 60.0, name="Rg")
    assert e["replicas_used"] == 2 and e["status"] == "lower bound"
    said = float(re.search(r"only ([\d.e+-]+) effective samples per replica", " ".join(e["warnings"])).group(1))
    assert said == pytest.approx(e["ess"]["value"], rel=1e-3)
    assert abs(120 / e["g"]["value"] - e["ess"]["value"]) > 0.05 * e["ess"]["value"]   # the other figure differs

def test_nan_frames_use_the_longest_finite_stretch():
    x = ar1(0.5, (2, 300), seed=5)
    x[0, 100] = np.nan                                      # replica 0: stretches of 100 and 199 frames
    x[1, 5:295] = np.nan                                    # replica 1: nothing long enough
    e = estimate(x, 1.0, 60.0, name="Rg")
    assert finite_stretch(x[0]) == (101, 300) and finite_stretch(np.full(4, np.nan)) == (0, 0)
    assert e["replicas_used"] == 1 and e["error_method"] == "madras-sokal" and e["g_per_replica"][1] is None
    assert e["g_per_replica"][0] == pytest.approx(statistical_inefficiency(x[0, 101:]))
    assert any("1 of 300 frames are NaN" in w for w in e["warnings"])
    assert any("replica 1: left out" in w for w in e["warnings"])
    assert np.isfinite(e["g"]["value"]) and e["ess_per_hour"]["value"] is not None


def test_no_wall_time_no_ess_per_hour_and_the_acf():
    """Without a wall time ESS is still reported but ESS/hour is None; the ACF starts at 1 and decays as phi^t."""
    x = ar1(0.5, (2, 4000), seed=6)
    s = sampling_efficiency({"rg": x, "q": x[:, ::-1]}, frame_ps=0.25, wall_s=None)
    e = s["observables"]["rg"]
    assert s["wall_s"] is None and e["ess"]["value"] > 0 and e["ess_per_hour"]["value"] is None
    acf = np.array(s["acf"]["rg"])
    assert acf[0] == pytest.approx(1.0) and acf[1:4] == pytest.approx([0.5, 0.25, 0.125], abs=0.05)
    assert s["acf"]["lag_ps"][:3] == pytest.approx([0.0, 0.25, 0.5])
    assert s["thresholds"] == {"min_frames": MIN_FRAMES, "min_samples": MIN_SAMPLES}
