"""Unit tests of the exchange step (:mod:`flashschnet.openmm.ensemble.exchange`) and of the temperature ladder
(:mod:`flashschnet.openmm.ladder`): exact detailed balance on an enumerated discrete system, the
Metropolis draws, the pair schedule, dropped walkers, the bookkeeping, the checkpoint round trip and the
``--temperatures`` parser. No OpenMM run; a few seconds in all."""
import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import torch  # noqa: F401  (torch before openmm)

from flashschnet.errors import InputError
from flashschnet.openmm.ensemble import exchange as exchange_module
from flashschnet.openmm.ensemble.exchange import Exchanger, swap_probability
from flashschnet.openmm.ladder import (check_ladder, check_names, geometric_ladder, parse_temperatures,
                                                rung_name)
from flashschnet.openmm.units import BOLTZMANN_KJ_MOL_K as KB


# -- an enumerable system: each walker is in one of a few energy levels with degeneracies -----------------------
class Levels:
    """A walker has ``len(E)`` levels of energies ``E`` (kJ/mol) and degeneracies ``g``; ``K`` walkers on a
    ladder ``temps``. A joint state is (walker_at, level of each walker); its weight is
    prod_k g[l[w_k]] exp(-beta_k E[l[w_k]]) with w_k = walker_at[k] (walker w_k sampling rung k's Boltzmann)."""

    def __init__(self, energies, degeneracies, temps):
        self.E = np.asarray(energies, dtype=float)
        self.g = np.asarray(degeneracies, dtype=float)
        self.temps = np.asarray(temps, dtype=float)
        self.beta = 1.0 / (KB * self.temps)
        self.K = len(temps)
        self.states = [(perm, lev) for perm in itertools.permutations(range(self.K))
                       for lev in itertools.product(range(len(self.E)), repeat=self.K)]
        self.index = {s: i for i, s in enumerate(self.states)}
        w = np.asarray([self.log_weight(s) for s in self.states])
        self.pi = np.exp(w - w.max())
        self.pi /= self.pi.sum()

    def log_weight(self, state):
        perm, lev = state
        return sum(math.log(self.g[lev[w]]) - self.beta[k] * self.E[lev[w]] for k, w in enumerate(perm))

    def walker_energies(self, state):
        return [float(self.E[l]) for l in state[1]]

    def pairs(self, parity):
        return list(range(parity, self.K - 1, 2))

    @staticmethod
    def swapped(state, pairs):
        perm = list(state[0])
        for k in pairs:
            perm[k], perm[k + 1] = perm[k + 1], perm[k]
        return tuple(perm), state[1]

    def matrix(self, probability):
        """The transition matrix of one exchange of each parity, the tried pairs (disjoint) accepted
        independently with ``probability(state, k)``; {parity: [S, S]}."""
        out = {}
        for parity in (0, 1):
            pairs = self.pairs(parity)
            P = np.zeros((len(self.states), len(self.states)))
            for i, s in enumerate(self.states):
                p = [probability(s, k) for k in pairs]
                for accepted in itertools.product((False, True), repeat=len(pairs)):
                    weight = np.prod([pk if a else 1.0 - pk for pk, a in zip(p, accepted)])
                    P[i, self.index[self.swapped(s, [k for k, a in zip(pairs, accepted) if a])]] += weight
            out[parity] = P
        return out

    def exchanger_matrix(self):
        """The same matrices from :meth:`Exchanger.exchange` itself: for every state and every accept/reject
        pattern, the generator's draws are forced (0.0: accepted whenever p > 0; 1.0: never accepted), and the
        transition's weight is the product of the probabilities the Exchanger reports, its target the
        Exchanger's new ``walker_at``."""
        out = {}
        for parity in (0, 1):
            pairs = self.pairs(parity)
            P = np.zeros((len(self.states), len(self.states)))
            for i, s in enumerate(self.states):
                for accepted in itertools.product((False, True), repeat=len(pairs)):
                    ex = Exchanger(self.temps, seed=1)
                    ex.walker_at = np.asarray(s[0])
                    ex.rng = _Draws([0.0 if a else 1.0 for a in accepted])
                    attempts = ex.exchange(step=10, number=parity + 2, energies=self.walker_energies(s))
                    assert [a.pair for a in attempts] == pairs
                    assert [a.accepted for a in attempts] == list(accepted)
                    assert [(a.walker_lo, a.walker_hi) for a in attempts] == [(s[0][k], s[0][k + 1]) for k in pairs]
                    weight = np.prod([a.probability if a.accepted else 1.0 - a.probability for a in attempts])
                    P[i, self.index[(tuple(int(w) for w in ex.walker_at), s[1])]] += weight
            out[parity] = P
        return out


class _Draws:
    """A stand-in for the Exchanger's generator: ``random()`` returns the given numbers in order."""

    def __init__(self, values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


SYSTEMS = {
    "3 rungs, 4 levels": Levels([0.0, 1.7, 3.1, 4.4], [1, 3, 2, 6], [150.0, 300.0, 600.0]),
    "4 rungs, 3 levels": Levels([0.0, 2.3, 2.9], [2, 1, 5], [200.0, 260.0, 400.0, 700.0]),
}


def detailed_balance_error(system, P):
    """max |pi(a) P(a->b) - pi(b) P(b->a)| (pi normalised)."""
    flow = system.pi[:, None] * P
    return np.abs(flow - flow.T).max()


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_exchange_obeys_detailed_balance_exactly(name):
    """The exchange move keeps the product of the rungs' Boltzmann distributions stationary, exactly: on an
    enumerated joint state space (walker permutation x every walker's level), the transition matrix of an even and
    of an odd exchange -- built from swap_probability, and again from Exchanger.exchange's own bookkeeping (its
    probabilities, its new walker_at) -- is stochastic, satisfies pi(a) P(a->b) = pi(b) P(b->a) to 1e-12 and
    pi P = pi; the alternation of both keeps pi stationary too. swap_probability equals the Metropolis
    min(1, pi(b)/pi(a)) computed from the joint weights (an independent formula). Deterministic."""
    system = SYSTEMS[name]

    def metropolis(state, k):          # from the joint weights, not from swap_probability's formula
        return min(1.0, math.exp(system.log_weight(system.swapped(state, [k])) - system.log_weight(state)))

    def from_swap_probability(state, k):
        e = system.walker_energies(state)
        return swap_probability(system.beta[k], system.beta[k + 1], e[state[0][k]], e[state[0][k + 1]])

    reference = system.matrix(metropolis)
    built = system.matrix(from_swap_probability)
    exchanger = system.exchanger_matrix()
    for parity in (0, 1):
        for P in (built[parity], exchanger[parity]):
            np.testing.assert_allclose(P, reference[parity], rtol=0, atol=1e-13)
            np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-13)
            assert detailed_balance_error(system, P) < 1e-12
            np.testing.assert_allclose(system.pi @ P, system.pi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(system.pi @ exchanger[0] @ exchanger[1], system.pi, rtol=0, atol=1e-12)
    p = np.asarray([from_swap_probability(s, k) for s in system.states for k in range(system.K - 1)])
    assert ((p > 0.05) & (p < 0.95)).mean() > 0.2          # not a trivial pass: many real 0 < p < 1 choices


def test_detailed_balance_check_catches_wrong_temperatures(monkeypatch):
    """The detailed-balance check above has teeth: with the two rungs' inverse temperatures swapped in the
    probability (the sabotage of test_sampling), or the energies taken from the wrong walkers, the Exchanger's
    matrix violates detailed balance by far more than 1e-12 (and pi is no longer stationary)."""
    system = SYSTEMS["3 rungs, 4 levels"]
    real = exchange_module.swap_probability
    monkeypatch.setattr(exchange_module, "swap_probability", lambda b_lo, b_hi, u_lo, u_hi: real(b_hi, b_lo, u_lo, u_hi))
    P = system.exchanger_matrix()[0]
    assert detailed_balance_error(system, P) > 1e-3
    assert np.abs(system.pi @ P - system.pi).max() > 1e-3

    monkeypatch.setattr(exchange_module, "swap_probability", real)
    original = Exchanger.exchange
    monkeypatch.setattr(Exchanger, "exchange", lambda self, step, number, energies, active=None:
                        original(self, step, number, np.roll(energies, 1), active))
    P = system.exchanger_matrix()[1]
    assert detailed_balance_error(system, P) > 1e-3


def test_accepted_frequency_matches_swap_probability():
    """Exchanger.exchange accepts a swap with the probability it reports: 100,000 attempts of one pair at fixed
    rung energies (p = 0.367) are accepted at a frequency that passes an exact two-sided binomial test at
    false-alarm rate 1e-4 (fixed seed), and every accept/reject is exactly ``u < p`` for the run's own
    generator's next uniform (one draw per tried pair)."""
    temps = [300.0, 400.0]
    ex = Exchanger(temps, seed=2024)
    u_lo, u_hi = 0.0, 10.0                      # the colder rung holds the lower energy: p < 1
    p_expected = swap_probability(ex.betas[0], ex.betas[1], u_lo, u_hi)
    assert p_expected == pytest.approx(math.exp(-(1 / (KB * 300) - 1 / (KB * 400)) * 10.0), rel=1e-14)
    assert 0.36 < p_expected < 0.37
    twin = np.random.Generator(np.random.PCG64())
    twin.bit_generator.state = ex.rng.bit_generator.state
    n = 100_000
    accepted = 0
    energies = np.zeros(2)
    for i in range(n):
        energies[ex.walker_at[0]], energies[ex.walker_at[1]] = u_lo, u_hi
        (attempt,) = ex.exchange(step=i, number=2 * i, energies=energies)
        assert attempt.probability == p_expected
        assert attempt.accepted == (twin.random() < p_expected)
        accepted += attempt.accepted
    assert ex.attempts.tolist() == [n] and ex.accepts.tolist() == [accepted]
    assert stats.binomtest(accepted, n, p_expected).pvalue > 1e-4, (accepted / n, p_expected)


# -- swap_probability -------------------------------------------------------------------------------------------
B_LO, B_HI = 1 / (KB * 300.0), 1 / (KB * 360.0)


@pytest.mark.parametrize("u_lo,u_hi", [(float("nan"), 1.0), (1.0, float("nan")), (float("inf"), 1.0),
                                       (1.0, float("inf")), (float("-inf"), 1.0), (1.0, float("-inf")),
                                       (float("inf"), float("inf")), (float("nan"), float("nan"))])
def test_swap_probability_of_a_non_finite_energy_is_zero(u_lo, u_hi):
    """A walker whose energy is NaN or infinite never swaps (probability exactly 0), whichever side it is on and
    whatever the temperatures (equal ones too: 0 * inf is NaN)."""
    assert swap_probability(B_LO, B_HI, u_lo, u_hi) == 0.0
    assert swap_probability(B_HI, B_LO, u_lo, u_hi) == 0.0
    assert swap_probability(B_LO, B_LO, u_lo, u_hi) == 0.0


def test_swap_probability_branches():
    """The Metropolis min(1, exp(delta)), delta = (b_lo - b_hi)(u_lo - u_hi): equal temperatures or equal energies
    give exactly 1; the colder walker holding more energy (delta > 0) gives exactly 1; delta < 0 gives exp(delta)
    (and underflows quietly to 0 for a huge gap)."""
    assert swap_probability(B_LO, B_LO, 5.0, -300.0) == 1.0
    assert swap_probability(B_LO, B_HI, 7.0, 7.0) == 1.0
    assert swap_probability(B_LO, B_HI, 2.0, 1.0) == 1.0                  # colder walker has more energy
    assert swap_probability(B_HI, B_LO, 1.0, 2.0) == 1.0                  # the same pair, labelled the other way
    delta = (B_LO - B_HI) * (1.0 - 2.0)
    assert swap_probability(B_LO, B_HI, 1.0, 2.0) == pytest.approx(math.exp(delta), rel=1e-15) and delta < 0
    assert swap_probability(B_LO, B_HI, 0.0, 1e6) == 0.0                  # exp(-large) underflows, no error


finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False)
temperature = st.floats(min_value=1.0, max_value=5000.0)


@given(t1=temperature, t2=temperature, u1=finite, u2=finite)
def test_swap_probability_symmetry_and_ratio(t1, t2, u1, u2):
    """Relabelling the two rungs does not change the probability; the forward and reverse swaps' probabilities
    have the ratio exp((b_1 - b_2)(u_1 - u_2)) that detailed balance needs; the value is in [0, 1]."""
    b1, b2 = 1 / (KB * t1), 1 / (KB * t2)
    forward = swap_probability(b1, b2, u1, u2)
    assert 0.0 <= forward <= 1.0
    assert forward == swap_probability(b2, b1, u2, u1)
    reverse = swap_probability(b1, b2, u2, u1)          # after the swap rung 1 holds u2
    delta = (b1 - b2) * (u1 - u2)
    if abs(delta) < 700:
        assert forward == pytest.approx(reverse * math.exp(delta), rel=1e-12, abs=1e-300)
    assert max(forward, reverse) == 1.0


# -- Exchanger --------------------------------------------------------------------------------------------------
LADDER5 = [300.0, 330.0, 363.0, 399.3, 439.2]


def test_pairs_alternate_with_the_exchange_number():
    """Even exchange numbers try rung pairs (0,1), (2,3); odd ones (1,2), (3,4) -- by ``number``, not by
    ``step``; with equal energies every tried swap is accepted (p = 1) and walker_at follows."""
    ex = Exchanger(LADDER5, seed=3)
    e = [1.0] * 5
    attempts = ex.exchange(step=7, number=0, energies=e)
    assert [a.pair for a in attempts] == [0, 2] and all(a.accepted and a.probability == 1.0 for a in attempts)
    assert [a.step for a in attempts] == [7, 7]
    assert ex.walker_at.tolist() == [1, 0, 3, 2, 4]
    attempts = ex.exchange(step=8, number=5, energies=e)
    assert [a.pair for a in attempts] == [1, 3]
    assert [(a.walker_lo, a.walker_hi) for a in attempts] == [(0, 3), (2, 4)]
    assert ex.walker_at.tolist() == [1, 3, 0, 4, 2]
    assert ex.rung_of().tolist() == [2, 0, 4, 1, 3]
    assert ex.walker_temperatures().tolist() == [LADDER5[2], LADDER5[0], LADDER5[4], LADDER5[1], LADDER5[3]]
    assert ex.attempts.tolist() == [1, 1, 1, 1] and ex.accepts.tolist() == [1, 1, 1, 1]
    assert [a.pair for a in Exchanger([300.0, 310.0], 1).exchange(0, 1, [0.0, 0.0])] == []   # no odd pair


def test_dropped_walkers_pairs_are_not_tried():
    """A pair with an inactive walker (on either side) is not tried: not counted, not swapped, and no random
    number is drawn for it (so the other pairs' draws are those of a run without it)."""
    ex = Exchanger(LADDER5, seed=9)
    reference = Exchanger(LADDER5, seed=9)
    e = [5.0, 1.0, 2.0, 3.0, 9.0]
    active = [True, True, False, True, True]        # walker 2 (at rung 2) dropped: pairs (1,2), (2,3) out
    attempts = ex.exchange(step=10, number=0, energies=e, active=active)
    assert [a.pair for a in attempts] == [0]
    attempts = ex.exchange(step=20, number=1, energies=e, active=active)
    assert [a.pair for a in attempts] == [3]
    assert ex.attempts.tolist() == [1, 0, 0, 1]
    assert ex.walker_at[2] == 2 and sorted(ex.walker_at.tolist()) == list(range(5))
    reference.rng.random(2)                        # two tried pairs, two draws
    assert ex.rng.bit_generator.state == reference.rng.bit_generator.state
    assert ex.exchange(step=30, number=0, energies=e, active=[False, False, True, True, True])[0].pair == 2
    acc = ex.acceptance()
    assert np.isnan(acc[1]) and not np.isnan(acc[0])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf, on purpose
def test_walker_at_stays_a_permutation():
    """Over many exchanges with random energies (NaN and inf among them) and random drops, walker_at stays a
    permutation of the walkers, rung_of is its inverse, counters add up, and a walker's energy is used at its own
    rung (the reported probability is recomputed from the walker ids)."""
    rng = np.random.default_rng(5)
    ex = Exchanger(LADDER5, seed=5)
    tried = np.zeros(4, dtype=int)
    for n in range(2000):
        e = rng.normal(0.0, 3.0, 5)
        e[rng.random(5) < 0.02] = np.nan
        e[rng.random(5) < 0.02] = np.inf
        active = rng.random(5) > 0.1
        before = ex.walker_at.copy()
        for a in ex.exchange(step=n, number=n, energies=e, active=active):
            assert (a.walker_lo, a.walker_hi) == (before[a.pair], before[a.pair + 1])
            assert active[a.walker_lo] and active[a.walker_hi]
            assert a.probability == swap_probability(ex.betas[a.pair], ex.betas[a.pair + 1], e[a.walker_lo], e[a.walker_hi])
            if not np.isfinite(e[a.walker_lo]) or not np.isfinite(e[a.walker_hi]):
                assert not a.accepted
            tried[a.pair] += 1
        assert sorted(ex.walker_at.tolist()) == list(range(5))
        assert (ex.rung_of()[ex.walker_at] == np.arange(5)).all()
    assert ex.attempts.tolist() == tried.tolist() and (ex.accepts <= ex.attempts).all() and ex.accepts.min() > 0


def test_state_round_trip_reproduces_future_draws():
    """state() is JSON-able; loaded (after json.dumps/loads) into an Exchanger of another seed, it gives the same
    future: the same attempts (probabilities, accept/reject), walker_at and counters, draw for draw. The state
    is a snapshot: exchanging afterwards does not change it."""
    rng = np.random.default_rng(8)
    energies = rng.normal(0.0, 2.0, (300, 5))
    a = Exchanger(LADDER5, seed=123)
    for n in range(100):
        a.exchange(step=10 * n, number=n, energies=energies[n])
    state = a.state()
    text = json.dumps(state)
    b = Exchanger(LADDER5, seed=999)
    b.load(json.loads(text))
    future_a = [a.exchange(step=10 * n, number=n, energies=energies[n]) for n in range(100, 300)]
    future_b = [b.exchange(step=10 * n, number=n, energies=energies[n]) for n in range(100, 300)]
    assert future_a == future_b
    assert a.walker_at.tolist() == b.walker_at.tolist()
    assert a.attempts.tolist() == b.attempts.tolist() and a.accepts.tolist() == b.accepts.tolist()
    assert json.dumps(state) == text                  # unchanged by the later exchanges
    assert a.rng.random() == b.rng.random()
    c = Exchanger(LADDER5, seed=999)                  # another seed, not loaded: other draws
    assert [x.accepted for n in range(100, 300) for x in c.exchange(10 * n, n, energies[n])] != \
        [x.accepted for f in future_a for x in f]
    assert b.walker_at.dtype.kind == "i" and b.attempts.dtype.kind == "i"


def test_seed_fixes_the_draws():
    """The same seed gives the same draws; a different seed, different ones."""
    assert Exchanger([300.0, 310.0], 4).rng.random(5).tolist() == Exchanger([300.0, 310.0], 4).rng.random(5).tolist()
    assert Exchanger([300.0, 310.0], 4).rng.random(5).tolist() != Exchanger([300.0, 310.0], 5).rng.random(5).tolist()


def test_acceptance_and_summary():
    """acceptance(): accepted/attempted per pair, NaN for a pair never tried; summary(): one line naming each
    pair's temperatures, its fraction and counts ('-' for an untried pair)."""
    ex = Exchanger([300.0, 330.0, 363.0], seed=1)
    ex.rng = _Draws([0.0, 1.0, 0.0])
    # pair 0 at p < 1: accepted (draw 0.0) then rejected (draw 1.0), pair 1 never tried
    ex.exchange(0, 0, [1.0, 5.0, 0.0])
    assert ex.walker_at.tolist() == [1, 0, 2]
    ex.exchange(1, 2, [5.0, 1.0, 0.0])      # walker 1 (1.0) at rung 0, walker 0 (5.0) at rung 1: p < 1
    assert ex.walker_at.tolist() == [1, 0, 2]
    acc = ex.acceptance()
    assert acc[0] == 0.5 and np.isnan(acc[1])
    assert ex.summary() == "exchange acceptance: 300.0-330.0 K 0.50 (1/2), 330.0-363.0 K - (0/0)"
    assert "\n" not in ex.summary()
    ex.exchange(2, 1, [0.0, 0.0, 0.0])
    assert ex.acceptance().tolist() == [0.5, 1.0]


# -- ladder -----------------------------------------------------------------------------------------------------
def test_geometric_ladder():
    """TMIN:TMAX:N is geometric: a constant ratio between neighbours, both ends exact."""
    temps = parse_temperatures("300:450:8")
    assert len(temps) == 8 and temps[0] == 300.0 and temps[-1] == 450.0
    ratios = np.asarray(temps[1:]) / np.asarray(temps[:-1])
    np.testing.assert_allclose(ratios, (450.0 / 300.0) ** (1 / 7), rtol=1e-13)
    assert all(isinstance(t, float) for t in temps)
    assert parse_temperatures(" 300 : 600 : 2 ") == [300.0, 600.0]
    assert geometric_ladder(273.15, 373.15, 11)[-1] == 373.15
    assert parse_temperatures("300:600:4")[1] == pytest.approx(300 * 2 ** (1 / 3), rel=1e-14)


def test_explicit_ladder():
    """A comma-separated increasing list is taken as it is (floats; blanks and a trailing comma tolerated)."""
    assert parse_temperatures("300,320,345") == [300.0, 320.0, 345.0]
    assert parse_temperatures(" 300.5, 320 ,345,") == [300.5, 320.0, 345.0]
    assert check_ladder([300, 310]) == [300.0, 310.0]


@pytest.mark.parametrize("text", ["300", "300,", "300:450:1", "300:450:0", "300:450:-3", "300,300", "320,300",
                                  "300,320,310", "0,300", "-5,300", "300:-1:4", "nan,300", "300,nan", "300,inf",
                                  "300:inf:4", "inf:500:4", "450:300:4", "abc", "300;320", "300:450", "300:450:8:2",
                                  "300:450:x", "300:450:2.5", "", "   ", "300,,abc", "1e400,2e400"])
def test_bad_ladders_are_input_errors(text):
    """One temperature, non-increasing (duplicates included), non-positive, NaN/inf, garbage text: a one-line
    InputError naming the option."""
    with pytest.raises(InputError) as info:
        parse_temperatures(text)
    message = str(info.value)
    assert "--temperatures" in message and "\n" not in message


@pytest.mark.parametrize("temps", [[300.0], [], [300.0, 300.0], [310.0, 300.0], [0.0, 300.0], [-1.0, 300.0],
                                   [float("nan"), 300.0], [300.0, float("inf")]])
def test_check_ladder_rejects(temps):
    with pytest.raises(InputError):
        check_ladder(temps)


def test_rung_names_must_differ():
    """Every rung names its own file (T300.0.dcd, one decimal): temperatures closer than the names' 0.1 K
    resolution are an InputError of check_names, explicit or geometric; 0.1 K apart is fine."""
    assert rung_name(300.0) == "T300.0" and rung_name(412.345) == "T412.3"
    check_names([300.0, 300.1, 450.0])
    check_names(parse_temperatures("300:450:8"))
    with pytest.raises(InputError, match="T300.0"):
        check_names(parse_temperatures("300,300.04,310"))
    with pytest.raises(InputError):
        check_names(parse_temperatures("300:300.3:5"))
