"""flashschnet.openmm.thermo: thermodynamics across the temperatures of a parallel-tempering run (MBAR), and
flashschnet-analyze's thermodynamics and mixing sections on a real tempering run, checked against exact answers:

* the harmonic walkers of ``tests/helpers/ensemble_systems.py`` run through the real driver (as
  ``ensemble/test_sampling.py``, much shorter): each walker is N particles in a 3-D well U = k/2 |x|^2, so at every
  temperature <U> = 3N/2 kB T, the configurational heat capacity is 3N/2 kB and the reduced free energy is
  f(T) = -ln Z = -(3N/2) ln T + const. MBAR's estimates from the run's log.csv (attributed to temperatures as
  flashschnet-analyze does) must agree within their reported uncertainties (|z| < 4 for each), and the same
  z-test must fail when the analysis is given the wrong temperatures;
* a two-state system sampled exactly (no dynamics): Q = 1 (U = 0) or Q = 0 (U = eps, degeneracy g), whose <Q>
  crosses 0.5 at T = eps / (kB ln g) and whose heat capacity peaks where the exact formula does: the melting
  temperatures within 4 bootstrap standard deviations, the reweighted F(Q, Rg) giving the exact populations;
* flashschnet-analyze on a tiny trp-cage tempering run (3 rungs, 40 steps): thermo.csv, report.json/md and
  exchange_diagnostics.json, and its warnings (far too little data for MBAR: melting temperatures withheld); and
  bad input (a plain run, no topology, temperatures outside the ladder or garbled)
  refused in one line, exit 2, nothing written.

The mixing diagnostics of hand-written files: test_exchange_diagnostics.py; the MBAR thresholds on synthetic numbers:
test_analyze_sufficiency.py and test_analyze_thermo.py.
"""
from __future__ import annotations

import csv
import json
import os
import shutil

import numpy as np
import pytest

import torch  # noqa: F401  (torch before openmm)

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.analyze_series import log_series
from flashschnet.openmm.ensemble.driver import EnsemblePlan, LocalBlocks, block_specs, check_plan, drive
from flashschnet.openmm.ladder import parse_temperatures
from flashschnet.openmm.run_reader import RunDir
from flashschnet.openmm.thermo import ThermoFit
from flashschnet.openmm.units import BOLTZMANN_KJ_MOL_K as KB
from tests.helpers.ensemble_systems import HarmonicBuilder, _topology

PARTICLES = 10                     # per walker: U ~ Gamma(15, kT)
LADDER = "300:450:3"               # 300, 367.4, 450 K
STEPS = 8_000                      # dt 20 fs: 160 ps
REPORT = 25                        # 0.5 ps: frames correlated (the decorrelation has work to do)
TARGETS = [300.0, 330.0, 367.4, 400.0, 450.0]
Z_MAX = 4.0


@pytest.fixture(scope="module")
def harmonic_run(tmp_path_factory):
    """A parallel-tempering run of the harmonic walkers (one block, the CPU platform); its log's energies per
    temperature, attributed by flashschnet-analyze's own reader (thermostat_K)."""
    out = tmp_path_factory.mktemp("harmonic_pt")
    temps = parse_temperatures(LADDER)
    p = EnsemblePlan(out=str(out), steps=STEPS, temperatures_K=temps, exchange_interval=10, report_interval=REPORT,
                     checkpoint_interval=STEPS, dt_fs=20.0, friction_per_ps=4.0, seed=3, blocks=1)
    check_plan(p)
    specs = block_specs(p)
    blocks = LocalBlocks(HarmonicBuilder(particles=PARTICLES, k=100.0, mass=12.0), specs)
    try:
        drive(p, blocks, specs, resume=False, progress=False, echo=lambda s: None,
              trajectory_topology=_topology(PARTICLES))
    finally:
        blocks.close()
    notes = []
    logs = log_series(RunDir(str(out)), [{"temperature_K": t, "summary": {}} for t in temps], [], True, notes)
    return out, temps, [logs[t]["potential_energy_kJ_mol"][logs[t]["step"] > 0] for t in temps]   # as analyze does


def harmonic_z(temps, energies, claimed):
    """z = (MBAR - exact) / MBAR's error for <U>, C and f(T) - f(T_0) at TARGETS (scaled as ``claimed`` is),
    with the analysis told the ladder ``claimed`` (the exact values are those at the claimed temperatures)."""
    fit = ThermoFit(claimed, energies)
    scale = claimed[0] / temps[0]
    targets = np.asarray(TARGETS) * scale
    t = fit.table(targets)
    n = 1.5 * PARTICLES
    exact = {"potential_energy_kJ_mol": n * KB * targets, "heat_capacity_kJ_mol_K": np.full(len(targets), n * KB),
             "reduced_free_energy": -n * np.log(targets / targets[0])}
    z = {}
    for key, value in exact.items():
        err = t[key + "_err"]
        sel = err > 0                                     # f(T_0) - f(T_0) is exactly 0 with 0 error
        z[key] = (t[key][sel] - value[sel]) / err[sel]
    return z, fit


def _describe(z):
    return "; ".join(f"{k}: " + " ".join(f"{v:+.2f}" for v in vals) for k, vals in z.items())


def test_mbar_recovers_the_exact_harmonic_thermodynamics(harmonic_run):
    """<U>(T) = 3N/2 kB T, C = 3N/2 kB and f(T) - f(300 K) = -(3N/2) ln(T/300 K) at 300-450 K (the rungs and
    temperatures between them), each within 4 of MBAR's reported standard errors (so the errors are neither too
    small nor, by the 2 % bound, uselessly large); the decorrelation found correlated frames (0.5 ps apart) and
    subsampled them."""
    out, temps, energies = harmonic_run
    z, fit = harmonic_z(temps, energies, temps)
    print(_describe(z), fit.states)
    assert all(np.abs(v).max() < Z_MAX for v in z.values()), _describe(z)
    assert all(len(v) >= 4 for v in z.values())
    assert all(s["frames"] == STEPS // REPORT for s in fit.states)          # the step-0 frame is not a sample
    assert sum(s["samples"] for s in fit.states) < 0.95 * sum(s["frames"] for s in fit.states)   # subsampled
    assert max(s["statistical_inefficiency"] for s in fit.states) > 1.2
    # the uncertainties are not inflated so much that anything passes: <U> to better than 2 %
    t = fit.table(TARGETS)
    assert (t["potential_energy_kJ_mol_err"] / t["potential_energy_kJ_mol"] < 0.02).all()


def test_wrong_temperatures_fail_the_same_z_test(harmonic_run):
    """Sabotage: the same energies analysed as if the ladder were 20 % hotter (a misread run.json). The z-test that
    passes above must fail, by far."""
    out, temps, energies = harmonic_run
    z, _ = harmonic_z(temps, energies, [1.2 * t for t in temps])
    print(_describe(z))
    assert np.abs(z["potential_energy_kJ_mol"]).max() > 3 * Z_MAX, _describe(z)


# -- melting temperatures: a two-state system -------------------------------------------------------------------
EPS = 50.0                          # kJ/mol
TM = 350.0                          # K: <Q> = 0.5 here
LOG_G = EPS / (KB * TM)


def _unfolded(t):
    """Exact population of the unfolded state (U = EPS, degeneracy e^LOG_G) at temperatures ``t``."""
    return 1.0 / (1.0 + np.exp(EPS / (KB * np.asarray(t)) - LOG_G))


def test_melting_temperatures_and_reweighted_surface_of_a_two_state_system():
    """Exact samples (no dynamics) at 6 temperatures 320-380 K: the <Q> = 0.5 crossing and the heat-capacity
    maximum (of the exact C(T) = (eps^2 / kB T^2) p (1 - p)) within 4 bootstrap standard deviations, which are
    below 2 K; the reweighted F(Q, Rg) at 340 K gives the exact native population within 4 standard errors."""
    rng = np.random.default_rng(7)
    temps = np.linspace(320.0, 380.0, 6)
    energies, q, rg = [], [], []
    for t in temps:
        unfolded = rng.random(300) < _unfolded(t)
        energies.append(np.where(unfolded, EPS, 0.0))
        q.append(np.where(unfolded, 0.0, 1.0))
        rg.append(np.where(unfolded, 1.2, 0.8) + 0.01 * rng.standard_normal(300))
    fit = ThermoFit(temps, energies, {"Q": q, "rg_nm": rg})
    m = fit.melting(320.0, 380.0, bootstrap=30, seed=2)
    grid = np.linspace(320.0, 380.0, 60001)
    p = _unfolded(grid)
    cv_peak = grid[np.argmax(EPS ** 2 / (KB * grid ** 2) * p * (1 - p))]
    print(m, cv_peak)
    assert m["q_half_err_K"] < 2.0 and m["heat_capacity_peak_err_K"] < 2.0
    assert abs(m["q_half_K"] - TM) < 4 * m["q_half_err_K"]
    assert abs(m["heat_capacity_peak_K"] - cv_peak) < 4 * m["heat_capacity_peak_err_K"]
    assert m["q_half_replicates"] == m["heat_capacity_peak_replicates"] == 30

    fes = fit.free_energy_surface(340.0, "Q", "rg_nm", bins=10)
    f = np.asarray(fes["free_energy_kJ_mol"])
    prob = np.exp(-np.nan_to_num(f, nan=np.inf) / (KB * 340.0))
    native = prob[np.asarray(fes["x_edges"])[:-1] > 0.5].sum() / prob.sum()
    exact = 1 - _unfolded(340.0)
    assert abs(native - exact) < 4 * np.sqrt(exact * (1 - exact) / fes["effective_frames"]), (native, exact)
    with pytest.raises(InputError, match="outside the sampled temperatures"):
        fit.check_targets([310.0], "--temperatures-out")


def test_neighbour_overlap_is_small_between_distant_temperatures():
    """Harmonic energies U ~ Gamma(15, kB T), 200 exact samples per state: 300 and 310 K overlap well, 310 and 900 K
    hardly (their energy distributions barely touch); given out of order, pairs come in increasing T."""
    rng = np.random.default_rng(3)
    temps = [900.0, 300.0, 310.0]
    fit = ThermoFit(temps, [rng.gamma(15.0, KB * t, 200) for t in temps])
    pairs = fit.neighbour_overlap()
    assert [(p["T_lo_K"], p["T_hi_K"]) for p in pairs] == [(300.0, 310.0), (310.0, 900.0)]
    assert pairs[0]["overlap"] > 0.3 and pairs[1]["overlap"] < 0.03, pairs


# -- flashschnet-analyze on a tiny trp-cage tempering run --------------------------------------------------------
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")


@pytest.fixture(scope="module")
def pt_run(tempering_run):
    """3 temperatures 300-400 K, 40 steps, an exchange and a frame every 10 steps (conftest's, shared)."""
    return tempering_run


def _analyze(capsys, *argv):
    from flashschnet.scripts.analyze import main

    rc = main([str(a) for a in argv] + ["--quiet"])
    return rc, capsys.readouterr().err


@pytest.fixture(scope="module")
def pt_analysis(pt_run, tmp_path_factory):
    """flashschnet-analyze of the tiny run, once for the tests that read it: (its --out, its stderr)."""
    import contextlib
    import io

    from flashschnet.scripts.analyze import main

    out, err = tmp_path_factory.mktemp("pt_analysis") / "a", io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([str(pt_run), "--out", str(out), "--temperatures-out", "300:400:5", "--fes-temperatures", "320",
                   "--bootstrap", "10", "--quiet"])
    assert rc == 0, err.getvalue()
    return out, err.getvalue()


def test_analyze_writes_thermo_csv_and_exchange_diagnostics(pt_run, pt_analysis):
    out, err = pt_analysis
    with open(out / "thermo.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["temperature_K"]) for r in rows] == [300.0, 325.0, 350.0, 375.0, 400.0]
    for key in ("potential_energy_kJ_mol", "heat_capacity_kJ_mol_K", "Q", "rg_nm", "rmsd_nm"):
        values = np.array([[float(r[key]), float(r[key + "_err"])] for r in rows])
        assert np.isfinite(values).all() and (values[:, 1] >= 0).all(), key
    rep = json.loads((out / "report.json").read_text())
    th = rep["thermo"]
    assert [s["frames"] for s in th["states"]] == [4, 4, 4]          # steps 10..40 (step 0: the start, dropped)
    assert th["table"]["potential_energy_kJ_mol"] == pytest.approx([float(r["potential_energy_kJ_mol"]) for r in rows])
    assert set(th["melting"]) >= {"heat_capacity_peak_K", "heat_capacity_peak_err_K", "q_half_K", "q_half_err_K"}
    assert [(s["temperature_K"], s["x"]) for s in th["fes"]] == [(320.0, "Q"), (320.0, "rmsd_nm")]
    # the mixing: acceptance per pair as exchanges.csv counts it
    diag = json.loads((out / "exchange_diagnostics.json").read_text())
    with open(pt_run / "exchanges.csv", newline="") as f:
        ex = list(csv.DictReader(f))
    for k, p in enumerate(diag["pairs"]):
        mine = [int(r["accepted"]) for r in ex if int(r["pair"]) == k]
        assert (p["attempts"], p["accepted"]) == (len(mine), sum(mine))
    assert diag == rep["exchange"]
    assert {"thermo.csv", "thermo.png", "thermo_fes.png", "exchange_diagnostics.json", "exchange.png"} <= set(
        os.listdir(out))
    md = (out / "report.md").read_text()
    assert "## Thermodynamics (MBAR)" in md and "## Exchange mixing" in md and "| 325.0 |" in md
    # 5 frames per temperature: too few to decorrelate, said; 4 exchanges: no round trip, said
    assert "fewer than 10 frames" in err and "no walker completed a round trip" in err
    assert "thermo.csv: 5 temperatures" in err


def test_a_short_run_warns_and_withholds_the_melting_temperatures(pt_analysis):
    """The tiny run (4 samples per rung, no round trip) is far below the MBAR thresholds: report.json says so
    (``thermo.sufficiency``, ``warnings``), the melting temperatures are null with the reason, and every MBAR warning
    is on stderr once and in report.md, which writes the melting temperatures as "not reported"."""
    out, err = pt_analysis
    rep = json.loads((out / "report.json").read_text())
    enough, m = rep["thermo"]["sufficiency"], rep["thermo"]["melting"]
    assert not enough["sufficient"] and enough["failed"][:2] == ["samples", "round_trips"]
    assert (enough["min_samples"], enough["round_trips"], enough["round_trips_needed"]) == (4, 0, 3)
    assert enough["thresholds"] == {"min_samples_per_temperature": 50, "min_round_trips_per_walker": 1,
                                    "min_neighbour_overlap": 0.03}
    assert m["heat_capacity_peak_K"] is None and m["q_half_K"] is None and m["withheld"] == enough["reason"]
    mbar = [w for w in rep["warnings"] if w.startswith("MBAR: ")]
    assert len(mbar) >= 2 and "4 uncorrelated samples at 300.0 K" in mbar[0] and "the 3 needed" in mbar[1]
    md = (out / "report.md").read_text()
    assert "heat-capacity maximum: not reported: too little data for MBAR" in md and "**Unreliable:" in md
    for w in rep["warnings"]:
        assert err.count(f"warning: {w}") == 1 and f"* {w}" in md
    assert err.count("no walker completed a round trip") == 1                 # the mixing's own line not repeated
    assert "heat-capacity peak withheld" in err and (out / "thermo.csv").exists()


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _one_line(rc, err, *needles):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("flashschnet-analyze: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_thermo_bad_input_is_one_line_and_exit_2(pt_run, tmp_path, capsys):
    never = tmp_path / "never"
    # a plain run (an ensemble of 3 replicas at one temperature): the same directory without its ladder (no run.json
    # temperatures, no T<K>.dcd, walkers.csv or exchanges.csv)
    plain = _copy(pt_run, tmp_path / "plain")
    for name in os.listdir(plain):
        if name.startswith("T") and name.endswith(".dcd") or name in ("walkers.csv", "exchanges.csv"):
            os.remove(plain / name)
    cfg = json.loads((plain / "run.json").read_text())
    cfg.pop("temperatures")
    cfg["replicas"] = 3
    (plain / "run.json").write_text(json.dumps(cfg))
    for option, value in (("--temperatures-out", "300:400:3"), ("--fes-temperatures", "300"), ("--bootstrap", "5")):
        _one_line(*_analyze(capsys, plain, "--out", never, option, value), option, "not a parallel-tempering run")
    # no topology (its --out is made before the topology is read, as for any run)
    notop = _copy(pt_run, tmp_path / "notop")
    (notop / "topology.pdb").unlink()
    _one_line(*_analyze(capsys, notop, "--out", tmp_path / "notop_report", "--temperatures-out", "300:400:3"),
              "topology.pdb", "missing")
    # outside the ladder, garbled
    for option, value, needle in (("--temperatures-out", "280:400:4", "280 K is outside the run's temperatures"),
                                  ("--temperatures-out", "300:420:4", "420 K is outside"),
                                  ("--fes-temperatures", "450", "450 K is outside"),
                                  ("--temperatures-out", "hot", "give TMIN:TMAX:N"),
                                  ("--temperatures-out", "300:400", "give TMIN:TMAX:N"),
                                  ("--temperatures-out", "400:300:3", "give TMIN:TMAX:N"),
                                  ("--temperatures-out", "300:400:0", "give TMIN:TMAX:N"),
                                  ("--temperatures-out", "300,,350", "give TMIN:TMAX:N"),
                                  ("--temperatures-out", "nan", "positive finite"),
                                  ("--fes-temperatures", "-5", "positive finite")):
        _one_line(*_analyze(capsys, pt_run, "--out", never, f"{option}={value}"), option, needle)
    assert not never.exists()
    with pytest.raises(SystemExit) as exc:
        _analyze(capsys, pt_run, "--bootstrap", "-1")
    assert exc.value.code == 2


def test_a_missing_pymbar_names_the_extra(pt_run, tmp_path, capsys, monkeypatch):
    """Without pymbar (the ``analysis`` extra), a tempering run's analysis stops before any work: one line naming
    the extra, exit 2, no --out."""
    import sys

    monkeypatch.setitem(sys.modules, "pymbar", None)          # as if not installed
    rc, err = _analyze(capsys, pt_run, "--out", tmp_path / "r")
    _one_line(rc, err, "pymbar is not installed", "pip install 'flashschnet[analysis]'")
    assert not (tmp_path / "r").exists()
