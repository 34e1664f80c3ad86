"""The exchange step of parallel tempering: Metropolis swaps of temperatures between walkers at neighbouring
rungs of the ladder, from the walkers' potential energies.

Walker ``w`` at rung ``k`` samples exp(-U(x_w) / kT_k). A swap of the temperatures of the walkers at rungs
``k`` and ``k+1`` (energies U_k, U_{k+1}) is accepted with probability

    min(1, exp((beta_k - beta_{k+1}) (U_k - U_{k+1})))

(beta = 1/kT), which keeps the product of the rungs' Boltzmann distributions stationary (detailed balance:
:func:`swap_probability`). Velocities are rescaled by sqrt(T_new / T_old) (the caller does that: the walker
keeps its momenta's direction, its kinetic energy follows the new temperature).

Exchange ``n`` (at step ``n * interval``) tries the pairs (0,1), (2,3), ... when ``n`` is even and (1,2),
(3,4), ... when odd; the pairs of one exchange are disjoint, so they are independent moves. A pair with a
dropped walker is not tried. One uniform random number is drawn per tried pair, from the run's own
generator (:class:`numpy.random.Generator`, PCG64) whose state is checkpointed with the run, so a resumed run
draws the same numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..units import BOLTZMANN_KJ_MOL_K


def swap_probability(beta_lo: float, beta_hi: float, u_lo: float, u_hi: float) -> float:
    """Metropolis probability of swapping the temperatures of two walkers.

    Parameters
    ----------
    beta_lo, beta_hi : float
        1/kT (mol/kJ) of the two rungs (any order).
    u_lo, u_hi : float
        Potential energies (kJ/mol) of the walkers at those rungs.

    Returns
    -------
    float
        ``min(1, exp((beta_lo - beta_hi) * (u_lo - u_hi)))``; 0 when either energy is not finite.
    """
    u_lo, u_hi = float(u_lo), float(u_hi)           # numpy scalars would warn on inf - inf
    if not (math.isfinite(u_lo) and math.isfinite(u_hi)):
        return 0.0
    delta = (float(beta_lo) - float(beta_hi)) * (u_lo - u_hi)     # may overflow to +-inf: still ordered
    return 1.0 if delta >= 0.0 else math.exp(delta)


@dataclass
class Attempt:
    """One tried swap: rungs ``pair`` and ``pair + 1``, the walkers there before the swap, the probability and
    whether it was accepted."""

    step: int
    pair: int
    walker_lo: int
    walker_hi: int
    probability: float
    accepted: bool


class Exchanger:
    """Which walker is at which rung, and the exchange moves.

    Parameters
    ----------
    temperatures_K : sequence of float
        The ladder, increasing.
    seed : int
        Seeds the exchange generator (independently of the integrators' seeds).

    Attributes
    ----------
    walker_at : ndarray, int, [K]
        ``walker_at[k]``: the walker at rung ``k`` (starts as ``k``).
    attempts, accepts : ndarray, int, [K-1]
        Per neighbour pair (``k``, ``k+1``).
    """

    def __init__(self, temperatures_K: Sequence[float], seed: int):
        self.temperatures = np.asarray(temperatures_K, dtype=np.float64)
        self.betas = 1.0 / (BOLTZMANN_KJ_MOL_K * self.temperatures)
        k = len(self.temperatures)
        self.walker_at = np.arange(k)
        self.attempts = np.zeros(k - 1, dtype=np.int64)
        self.accepts = np.zeros(k - 1, dtype=np.int64)
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x5EED_0E7C])))

    @property
    def rungs(self) -> int:
        return len(self.temperatures)

    def rung_of(self) -> np.ndarray:
        """``rung_of[w]``: the rung of walker ``w`` [K]."""
        out = np.empty_like(self.walker_at)
        out[self.walker_at] = np.arange(self.rungs)
        return out

    def walker_temperatures(self) -> np.ndarray:
        """Each walker's temperature (K) [K]."""
        return self.temperatures[self.rung_of()]

    def exchange(self, step: int, number: int, energies: Sequence[float],
                 active: Optional[Sequence[bool]] = None) -> List[Attempt]:
        """Exchange number ``number`` (0, 1, ... : its parity picks the pairs) at ``step``.

        Parameters
        ----------
        energies : sequence of float, [K]
            Potential energy (kJ/mol) of each *walker* (indexed by walker, not rung).
        active : sequence of bool, [K], optional
            Walkers still running (a dropped walker's pairs are not tried).

        Returns
        -------
        list of Attempt
            The tried pairs, in rung order; :attr:`walker_at` is updated.
        """
        energies = np.asarray(energies, dtype=np.float64)
        active = np.ones(self.rungs, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        out = []
        for k in range(int(number) % 2, self.rungs - 1, 2):
            lo, hi = int(self.walker_at[k]), int(self.walker_at[k + 1])
            if not (active[lo] and active[hi]):
                continue
            p = swap_probability(self.betas[k], self.betas[k + 1], energies[lo], energies[hi])
            accepted = bool(self.rng.random() < p)
            self.attempts[k] += 1
            if accepted:
                self.accepts[k] += 1
                self.walker_at[k], self.walker_at[k + 1] = hi, lo
            out.append(Attempt(int(step), k, lo, hi, p, accepted))
        return out

    def acceptance(self) -> np.ndarray:
        """Accepted fraction per pair [K-1] (NaN for a pair never tried)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.attempts > 0, self.accepts / np.maximum(self.attempts, 1), np.nan)

    def summary(self) -> str:
        """One line: each pair's temperatures and accepted fraction."""
        acc = self.acceptance()
        parts = [f"{self.temperatures[k]:.1f}-{self.temperatures[k + 1]:.1f} K "
                 + ("-" if np.isnan(acc[k]) else f"{acc[k]:.2f}") + f" ({self.accepts[k]}/{self.attempts[k]})"
                 for k in range(self.rungs - 1)]
        return "exchange acceptance: " + ", ".join(parts)

    # -- checkpoint ------------------------------------------------------------------------------------------
    def state(self) -> Dict[str, object]:
        """Everything a resumed run needs (JSON-able)."""
        return {"walker_at": self.walker_at.tolist(), "attempts": self.attempts.tolist(),
                "accepts": self.accepts.tolist(), "rng": self.rng.bit_generator.state}

    def load(self, state: Dict[str, object]) -> None:
        self.walker_at = np.asarray(state["walker_at"], dtype=np.int64)
        self.attempts = np.asarray(state["attempts"], dtype=np.int64)
        self.accepts = np.asarray(state["accepts"], dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
