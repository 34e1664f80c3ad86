"""Parallel tempering samples the right thing: statistical tests of whole runs of the real driver
(:func:`flashschnet.openmm.ensemble.driver.drive`, :class:`LocalBlocks`, the CPU platform) on a system with an
exact answer, and proof that the same tests reject a run whose swaps use the wrong energies or temperatures.

The system (``tests/helpers/ensemble_systems.py``): each walker is ``PARTICLES`` independent particles in the
3-D well U = k/2 |x|^2. At temperature T one particle's potential energy is Gamma(shape 3/2, scale kT) and a
walker's total U is Gamma(3n/2, kT) (n = ``PARTICLES``). The integrator (LangevinMiddle, BAOAB family) samples
a harmonic potential's configurations *exactly* at any stable step (omega*dt < 2), so the tests compare with
the exact Boltzmann distribution, with no discretisation allowance.

Time scales (k = 100 kJ/mol/nm^2, m = 12 amu: omega = 2.887 /ps, period 2.18 ps; dt = 20 fs: omega*dt =
0.058, far inside the stable range; friction 4 /ps). The autocorrelation of one particle's potential energy
(the square of the position's, computed from the integrator's linear map) is 0.76 after one exchange interval
(10 steps, 0.2 ps: a swap's effect has not relaxed when the next frame is written -- which is what lets the
distribution test see wrong swaps), and below 0.0025 at every lag of 1 ps (50 steps, the report interval) or
more, so frames are independent samples for the statistics. 20 ps (20 frames) are dropped as burn-in (every
walker starts at 0.05 nm, far below its equilibrium energy; the energy relaxes ~ exp(-4 t/ps)).

A fine point: at the step boundary the scheme's x and v are correlated (corr = omega*dt/2 = 0.029; their
variances are exact), so rescaling v at a swap leaves E[v | x] off by a fraction 0.029 (sqrt(T'/T) - 1) of its
spread for a few steps, a perturbation of the next frames' energies of order (omega*dt)^2 ~ 1e-3 relative that
relaxes -- far below what these tests resolve (the mean energy per rung to ~0.6 %; five other seeds gave
uniform-looking p-values).

False-alarm rates (fixed seeds, so each verdict is deterministic; the rates say how unlucky a seed would have
to be for a correct implementation to fail):

* distribution: per rung, a Kolmogorov-Smirnov test of the per-particle energies against Gamma(3/2, kT) and an
  exact test of their mean (a sum of m iid Gamma(3/2, kT) is Gamma(3m/2, kT)); alpha = 1e-3 for the whole run,
  Bonferroni over 2 tests x 4 rungs (1.25e-4 each);
* acceptance: per neighbour pair, a two-sided t test of the accepted fraction against the analytic expectation,
  with the variance from batch means (batches of 20 ps, >> the 1 ps correlation time of the attempts, which
  are correlated at the 0.2 ps exchange interval); alpha = 1e-3 for the run, Bonferroni over 3 pairs.
"""
import csv
import os

import numpy as np
import pytest
from scipy import integrate, stats

import torch  # noqa: F401  (torch before openmm)

from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.ensemble import exchange as exchange_module
from flashschnet.openmm.ensemble.block import WalkerBlock
from flashschnet.openmm.ensemble.demux import rung_trajectory
from flashschnet.openmm.ensemble.driver import EnsemblePlan, LocalBlocks, block_specs, check_plan, drive
from flashschnet.openmm.ensemble.exchange import Exchanger
from flashschnet.openmm.ladder import parse_temperatures
from flashschnet.openmm.units import BOLTZMANN_KJ_MOL_K
from tests.helpers.ensemble_systems import HarmonicBuilder, _topology

KB = 0.00831446261815324          # kJ/mol/K

PARTICLES = 20                    # per walker: U ~ Gamma(30, kT)
K_SPRING = 100.0                  # kJ/mol/nm^2
MASS = 12.0                       # amu
DT_FS = 20.0
FRICTION = 4.0                    # 1/ps
LADDER = "300:600:4"              # geometric, ratio 2**(1/3): expected acceptance 0.37 between neighbours
STEPS = 50_000                    # 1 ns
EXCHANGE = 10                     # steps (0.2 ps)
REPORT = 50                       # steps (1 ps)
BURN_FRAMES = 20                  # 20 ps
BATCH_STEPS = 1_000               # 20 ps: acceptance batches
SEED = 11

ALPHA = 1e-3                      # false-alarm rate of each check, for a whole run
#: a sabotaged run must be rejected far beyond ALPHA (its Bonferroni-combined p-value below this)
OVERWHELMING = 1e-8


# -- running ----------------------------------------------------------------------------------------------------
def run_pt(out, seed=SEED):
    """One parallel-tempering run of the harmonic walkers (one block), to ``out``; the driver's result."""
    os.makedirs(out, exist_ok=True)
    p = EnsemblePlan(out=str(out), steps=STEPS, temperatures_K=parse_temperatures(LADDER), exchange_interval=EXCHANGE,
                     report_interval=REPORT, checkpoint_interval=STEPS, dt_fs=DT_FS, friction_per_ps=FRICTION,
                     seed=seed, blocks=1)
    check_plan(p)
    specs = block_specs(p)
    blocks = LocalBlocks(HarmonicBuilder(particles=PARTICLES, k=K_SPRING, mass=MASS), specs)
    try:
        return drive(p, blocks, specs, resume=False, progress=False, echo=lambda s: None,
                     trajectory_topology=_topology(PARTICLES))
    finally:
        blocks.close()


# -- the checks -------------------------------------------------------------------------------------------------
def rung_energies(out, t_kelvin):
    """Per-particle potential energies (kJ/mol) of rung ``t_kelvin``'s frames after the burn-in, [frames*n]."""
    x = read_dcd(rung_trajectory(str(out), t_kelvin))[1 + BURN_FRAMES:]      # the step-0 frame and the burn-in
    assert len(x) == STEPS // REPORT - BURN_FRAMES
    return (0.5 * K_SPRING * (x * x).sum(axis=-1)).ravel()


def boltzmann_check(out):
    """Per rung: (KS p-value, exact mean-energy p-value, mean energy / (3/2 kT)); and the run's combined
    p-value (Bonferroni: the smallest times the number of tests, at most 1)."""
    rows = []
    for t in parse_temperatures(LADDER):
        e = rung_energies(out, t)
        kt = KB * t
        p_ks = stats.kstest(e, stats.gamma(1.5, scale=kt).cdf).pvalue
        total = stats.gamma(1.5 * e.size, scale=kt)      # the sum of e.size iid Gamma(3/2, kT)
        p_mean = min(1.0, 2.0 * min(total.cdf(e.sum()), total.sf(e.sum())))
        rows.append((t, p_ks, p_mean, e.mean() / (1.5 * kt)))
    combined = min(1.0, 2 * len(rows) * min(min(r[1], r[2]) for r in rows))
    return rows, combined


def expected_acceptance(shape, t_lo, t_hi):
    """E[min(1, exp((b_lo - b_hi)(U_lo - U_hi)))] for independent U ~ Gamma(shape, kT) at the two temperatures.

    With D = (b_lo - b_hi)(U_lo - U_hi): exchanging U_lo and U_hi negates D and multiplies the joint density by
    exp(D), so D's density obeys p(-d) = p(d) exp(d), E[exp(D); D < 0] = P(D > 0) and E[min(1, exp(D))] =
    2 P(D > 0) = 2 P(U_lo > U_hi); U_lo/U_hi = (T_lo/T_hi) X with X ~ BetaPrime(shape, shape), i.e. X/(1+X) ~
    Beta(shape, shape): 2 P(B > T_hi/(T_lo + T_hi)).
    """
    return 2.0 * stats.beta(shape, shape).sf(t_hi / (t_lo + t_hi))


def attempts_by_pair(out):
    with open(os.path.join(str(out), "exchanges.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: [(int(r["step"]), int(r["accepted"]), float(r["probability"])) for r in rows if int(r["pair"]) == k]
            for k in range(len(parse_temperatures(LADDER)) - 1)}


def acceptance_check(out):
    """Per pair: (observed accepted fraction, expected, t-test p-value); and the combined p-value (Bonferroni).

    Attempts after the burn-in, in batches of BATCH_STEPS steps; t = (mean - expected) / (sd of the batch
    means / sqrt(batches)), two-sided, batches - 1 degrees of freedom."""
    temps = parse_temperatures(LADDER)
    rows = []
    for k, attempts in attempts_by_pair(out).items():
        a = np.asarray([(s, acc) for s, acc, _ in attempts if s > BURN_FRAMES * REPORT], dtype=float)
        batch = ((a[:, 0] - BURN_FRAMES * REPORT - 1) // BATCH_STEPS).astype(int)
        means = np.asarray([a[batch == b, 1].mean() for b in range(batch.max() + 1)])
        expected = expected_acceptance(1.5 * PARTICLES, temps[k], temps[k + 1])
        observed = a[:, 1].mean()
        se = means.std(ddof=1) / np.sqrt(len(means))
        t = (means.mean() - expected) / se if se > 0 else (np.inf if means.mean() != expected else 0.0)
        rows.append((observed, expected, float(2.0 * stats.t.sf(abs(t), len(means) - 1))))
    combined = min(1.0, len(rows) * min(r[2] for r in rows))
    return rows, combined


def describe(boltzmann, acceptance):
    b, pb = boltzmann
    a, pa = acceptance
    return ("rungs (T, p_KS, p_mean, <U>/(3/2 kT)): " + "; ".join(f"{t:.1f} {p1:.3g} {p2:.3g} {r:.4f}" for t, p1, p2, r in b)
            + f" [combined {pb:.3g}] | pairs (observed, expected, p): "
            + "; ".join(f"{o:.4f} {e:.4f} {p:.3g}" for o, e, p in a) + f" [combined {pa:.3g}]")


@pytest.fixture(scope="module")
def correct_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pt_correct")
    result = run_pt(out)
    return out, result


# -- tests ------------------------------------------------------------------------------------------------------
def test_expected_acceptance_formula():
    """The closed form used for the expected acceptance is the integral the issue defines,
    E[min(1, exp((b_i - b_j)(U_i - U_j)))] with U ~ Gamma(3n/2, kT) independent: checked against a numerical
    integration (scipy.integrate.quad, 1e-9) and a 4-million-sample Monte Carlo (fixed seed; within 5 standard
    errors: false-alarm rate 6e-7 per case). Also: our kB is the package's."""
    assert BOLTZMANN_KJ_MOL_K == pytest.approx(KB, rel=1e-9)
    rng = np.random.default_rng(20240611)
    for shape, t_lo, t_hi in [(30.0, 300.0, 377.98), (1.5, 300.0, 450.0), (75.0, 300.0, 330.0), (30.0, 300.0, 301.0)]:
        b_lo, b_hi = 1 / (KB * t_lo), 1 / (KB * t_hi)
        closed = expected_acceptance(shape, t_lo, t_hi)

        # E over U_lo of [P(U_hi <= U_lo) + E(exp(-(b_lo-b_hi)(U_hi-U_lo)); U_hi > U_lo)]; the second term is
        # exp((b_lo-b_hi) u) (T_lo/T_hi)^shape SF_lo(u) (the tilted gamma of U_hi is the gamma at T_lo)
        g_lo, g_hi = stats.gamma(shape, scale=KB * t_lo), stats.gamma(shape, scale=KB * t_hi)

        def integrand(u):
            tail = np.exp((b_lo - b_hi) * u + shape * np.log(t_lo / t_hi) + g_lo.logsf(u))
            return g_lo.pdf(u) * (g_hi.cdf(u) + tail)

        lo, hi = g_lo.ppf(1e-14), g_lo.isf(1e-14)
        quad, _ = integrate.quad(integrand, lo, hi, epsabs=1e-12, epsrel=1e-12, limit=500)
        assert quad == pytest.approx(closed, abs=1e-9)

        n = 4_000_000
        u_lo, u_hi = g_lo.rvs(n, random_state=rng), g_hi.rvs(n, random_state=rng)
        acc = np.minimum(1.0, np.exp(np.minimum((b_lo - b_hi) * (u_lo - u_hi), 0.0)))
        assert abs(acc.mean() - closed) < 5 * acc.std() / np.sqrt(n)


def test_every_rung_samples_boltzmann(correct_run):
    """Every rung's demultiplexed trajectory (T*.dcd) samples the exact Boltzmann distribution: per rung, the
    per-particle energies (980 independent frames x 20 particles) pass a KS test against Gamma(3/2, kT) and an
    exact test of their mean. False-alarm rate 1e-3 for the run (Bonferroni over 8 tests)."""
    out, result = correct_run
    b = boltzmann_check(out)
    assert result.steps_done == STEPS and result.rung_frames == [STEPS // REPORT + 1] * 4     # + step 0
    print(describe(b, acceptance_check(out)))
    assert b[1] > ALPHA, describe(b, acceptance_check(out))


def test_acceptance_matches_analytic(correct_run):
    """Each neighbour pair's accepted fraction matches the analytic expectation 2 P(Beta(3n/2, 3n/2) > T_hi/(T_lo +
    T_hi)) (see :func:`expected_acceptance`; ~0.37 here) by a batch-means t test, false-alarm rate 1e-3 for the run
    (Bonferroni over 3 pairs); the driver's reported acceptance is the accepted fraction of exchanges.csv."""
    out, result = correct_run
    a = acceptance_check(out)
    by_pair = attempts_by_pair(out)
    assert result.acceptance == pytest.approx([np.mean([acc for _, acc, _ in by_pair[k]]) for k in range(3)], abs=1e-12)
    # every exchange tried its parity's pairs: even exchanges (0,1) and (2,3), odd ones (1,2)
    for k, attempts in by_pair.items():
        assert [s for s, _, _ in attempts] == [s for s in range(EXCHANGE, STEPS + 1, EXCHANGE)
                                               if (s // EXCHANGE) % 2 == k % 2]
    print(describe(boltzmann_check(out), a))
    assert a[1] > ALPHA, describe(boltzmann_check(out), a)


def _sabotaged(tmp_path):
    out = tmp_path / "pt"
    run_pt(out)
    b, a = boltzmann_check(out), acceptance_check(out)
    print(describe(b, a))
    return b, a


def test_swaps_with_wrong_walkers_energies_are_rejected(tmp_path, monkeypatch):
    """Sabotage: the exchange is given each walker's neighbour's energy (energies rolled by one walker). Both the
    distribution check and the acceptance check must reject it, far beyond their 1e-3 false-alarm rate (combined
    p-value < 1e-8): so these checks would catch swaps that use the wrong energies."""
    original = Exchanger.exchange

    def wrong(self, step, number, energies, active=None):
        return original(self, step, number, np.roll(np.asarray(energies, dtype=float), 1), active)

    monkeypatch.setattr(Exchanger, "exchange", wrong)
    b, a = _sabotaged(tmp_path)
    assert b[1] < OVERWHELMING and a[1] < OVERWHELMING, describe(b, a)


def test_swaps_with_reversed_temperatures_are_rejected(tmp_path, monkeypatch):
    """Sabotage: the swap probability uses the two rungs' inverse temperatures the wrong way round
    (min(1, exp((b_hi - b_lo)(U_lo - U_hi)))). Both checks must reject it, combined p-values < 1e-8."""
    real = exchange_module.swap_probability
    monkeypatch.setattr(exchange_module, "swap_probability", lambda b_lo, b_hi, u_lo, u_hi: real(b_hi, b_lo, u_lo, u_hi))
    b, a = _sabotaged(tmp_path)
    assert b[1] < OVERWHELMING and a[1] < OVERWHELMING, describe(b, a)


def test_temperatures_not_handed_to_the_blocks_are_rejected(tmp_path, monkeypatch):
    """Sabotage: accepted swaps are recorded (walkers.csv, the demultiplexed files) but the blocks keep every
    walker at its starting thermostat temperature. The distribution check must reject it (the end rungs get
    frames of the wrong temperature) and so must the acceptance check (a recorded-but-not-done swap is undone
    with probability ~0.9 at the pair's next attempt), each at the 1e-3 false-alarm rate the correct run passes.

    The effect is smaller than the other sabotages' (a recorded swap is soon undone, so only ~20 % of the end
    rungs' frames are of the wrong temperature, 26 % away): z ~ 8 and ~ 7 for the two end rungs' mean
    energies (critical 3.8) and t ~ 6-8 per pair (critical 3.9) with seed 11, so a seed for which either check
    passed would be a fluke of < 1e-4; the combined p-values of seed 11 are ~1e-14 and ~1e-10 (seeds 1-4:
    1e-13 .. 1e-20 and 1e-10 .. 1e-13), and at least one of them must be below 1e-8."""
    monkeypatch.setattr(WalkerBlock, "set_temperatures", lambda self, temperatures_K: None)
    b, a = _sabotaged(tmp_path)
    assert b[1] < ALPHA and a[1] < ALPHA and min(b[1], a[1]) < OVERWHELMING, describe(b, a)
