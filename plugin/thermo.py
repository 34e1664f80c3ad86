"""Thermodynamics across the temperatures of a parallel-tempering run: MBAR (pymbar 4) over every rung at once.

Each sampled temperature ``T_k`` contributes its own series of potential energies ``U`` (kJ/mol, one per frame,
in time order) and, optionally, observables per frame (Q, Rg, RMSD, ...). Per state:

* equilibration and correlation (:func:`decorrelate`): ``pymbar.timeseries.detect_equilibration`` finds the
  start ``t0`` that maximises the number of uncorrelated samples and the statistical inefficiency ``g`` of the
  rest; ``pymbar.timeseries.subsample_correlated_data`` keeps every ~g-th frame after ``t0``. Series shorter than
  :data:`MIN_DECORRELATE` frames (or with a constant energy) are used whole (``g = 1``, said in the state's row);
* MBAR (:class:`ThermoFit`): reduced potentials ``u_k(x_n) = U(x_n) / (kB T_k)`` of every uncorrelated sample
  ``n`` at every sampled temperature; ``pymbar.MBAR`` solves for the reduced free energies ``f_k``. The potential
  is taken as it is at every temperature (the CG force field has no temperature dependence in the simulation).

At any temperature ``T`` inside the sampled range (:meth:`ThermoFit.table`):

* ``<A>(T)`` for ``A`` = U and every observable, with MBAR's asymptotic uncertainty
  (``MBAR.compute_expectations`` with the target states' reduced potentials);
* the configurational heat capacity ``C(T) = (<U^2> - <U>^2) / (kB T^2)`` (kJ/mol/K), its uncertainty propagated
  from MBAR's covariance of ``<U>`` and ``<U^2>`` (``MBAR.compute_multiple_expectations``);
* the reduced free energy ``f(T) = -ln Z(T)`` relative to the first target, with its uncertainty
  (``MBAR.compute_perturbed_free_energies``);
* the effective number of samples behind the estimate, ``(sum w)^2 / sum w^2`` of the MBAR weights.

Melting temperatures (:meth:`ThermoFit.melting`): the heat-capacity maximum and the temperature where ``<Q>``
crosses 0.5, each on a fine grid (:data:`FINE_GRID` points) over the requested range; a maximum at the edge of the
range, or no crossing, is None (not a temperature). Their uncertainties are bootstrap standard deviations: the
uncorrelated samples of each state are resampled with replacement, MBAR solved again, and the temperatures
found again, ``bootstrap`` times (fixed seed).

How much neighbouring temperatures' samples overlap (:meth:`ThermoFit.neighbour_overlap`, from pymbar's overlap
matrix) is one of the checks of :func:`flashschnet.openmm.analyze_sufficiency.mbar_sufficiency`.

Reweighted free-energy surfaces (:meth:`ThermoFit.free_energy_surface`): ``F(x, y) = -kB T ln p_T(x, y)`` from a
histogram of every frame after equilibration weighted by its MBAR weight at ``T``
(``w_n(T) ~ exp(-u_T(x_n)) / sum_k N'_k exp(f_k - u_k(x_n))``, ``N'_k`` those frames per state, ``f_k`` from the
fit), F = 0 at the most probable bin, unsampled bins NaN.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .units import BOLTZMANN_KJ_MOL_K

#: a state's series shorter than this is used whole (too short to estimate a correlation time)
MIN_DECORRELATE = 10
#: points of the grid the melting temperatures are located on
FINE_GRID = 301
#: the observable whose 0.5 crossing is a melting temperature
Q_NAME = "Q"


class ThermoError(RuntimeError):
    """MBAR found no solution for these samples (the one line says why)."""


def _pymbar():
    """pymbar, quiet (it logs on import and per solve); a missing pymbar is the ``analysis`` extra's."""
    logging.getLogger("pymbar").setLevel(logging.ERROR)      # before the import: it logs there (no jax)
    import pymbar
    from pymbar import timeseries  # noqa: F401

    return pymbar


def decorrelate(energies: np.ndarray) -> Tuple[int, float, np.ndarray]:
    """Equilibration and correlation of one state's energy series.

    Parameters
    ----------
    energies : array [frames]
        Potential energies in time order (kJ/mol).

    Returns
    -------
    t0 : int
        Frames dropped as equilibration.
    g : float
        Statistical inefficiency of the frames after ``t0`` (1 when the series is used whole).
    indices : array of int
        The uncorrelated samples (indices into ``energies``).
    """
    u = np.asarray(energies, dtype=np.float64)
    if len(u) < MIN_DECORRELATE or not np.ptp(u) > 0:
        return 0, 1.0, np.arange(len(u))
    timeseries = _pymbar().timeseries
    t0, g, _ = timeseries.detect_equilibration(u)
    t0 = int(t0)
    idx = np.asarray(timeseries.subsample_correlated_data(u[t0:], g=g), dtype=int) + t0
    return t0, float(g), idx


def _covariance(theta: np.ndarray, n: int) -> np.ndarray:
    """The covariance [n, n] of ``MBAR.compute_multiple_expectations``' n estimates from its ``Theta`` [2n, 2n], as
    pymbar computes their ``sigma`` (its diagonal). Not its ``covariances``: pymbar 4.0.3 returns the unscaled
    Theta block there, not the covariance of the estimates (the exact-answer test of the heat capacity caught it)."""
    theta = np.asarray(theta, dtype=np.float64)
    return theta[:n, :n] + theta[n:, n:] - theta[:n, n:] - theta[n:, :n]


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    from scipy.special import logsumexp

    return logsumexp(a, axis=axis)


class ThermoFit:
    """MBAR over the sampled temperatures (module docstring).

    Parameters
    ----------
    temperatures_K : sequence of float
        The sampled temperatures, one per state.
    energies : sequence of arrays
        Per state, the potential energy of each frame (kJ/mol), in time order.
    observables : dict {name: sequence of arrays}, optional
        Per observable, per state, its value at each frame (the frames of ``energies``).

    Attributes
    ----------
    states : list of dict
        Per state: ``temperature_K``, ``frames``, ``equilibration_frames``, ``statistical_inefficiency``,
        ``samples`` (uncorrelated, used by MBAR).
    f_k : array
        MBAR's reduced free energies of the sampled states (the first is 0).
    """

    def __init__(self, temperatures_K: Sequence[float], energies: Sequence[np.ndarray],
                 observables: Optional[Dict[str, Sequence[np.ndarray]]] = None):
        pymbar = _pymbar()
        self.temperatures = np.asarray(temperatures_K, dtype=np.float64)
        if len(self.temperatures) < 2 or len(energies) != len(self.temperatures):
            raise InputError(f"MBAR needs the energies of at least 2 temperatures, got {len(energies)}")
        observables = observables or {}
        self.names = list(observables)
        self.states: List[Dict[str, object]] = []
        kept, equilibrated = [], []
        for k, u in enumerate(energies):
            u = np.asarray(u, dtype=np.float64)
            if not np.isfinite(u).all():
                raise InputError(f"the energies at {self.temperatures[k]:.1f} K are not all finite; the run "
                                 "blew up there (analyse the frames before it)")
            t0, g, idx = decorrelate(u)
            cols = [u] + [np.asarray(observables[n][k], dtype=np.float64) for n in self.names]
            kept.append(np.stack([c[idx] for c in cols]))
            equilibrated.append(np.stack([c[t0:] for c in cols]))
            self.states.append({"temperature_K": float(self.temperatures[k]), "frames": int(len(u)),
                                "equilibration_frames": t0, "statistical_inefficiency": g, "samples": int(len(idx))})
        self._samples = kept                            # per state [1 + observables, samples]
        self.n_k = np.array([s.shape[1] for s in kept])
        self.data = np.concatenate(kept, axis=1)        # [1 + observables, N]
        self._frames = np.concatenate(equilibrated, axis=1)
        self.n_frames_k = np.array([s.shape[1] for s in equilibrated])
        # started from BAR between neighbouring rungs: from zeros, pymbar 4.0.3's solvers stall (the W_nk underflow)
        # when the rungs' f differ by hundreds, as a protein's do (trp-cage 300-450 K: f_450 - f_300 = -250)
        with np.errstate(all="ignore"):
            try:
                self.mbar = pymbar.MBAR(self._reduced(self.data[0], self.temperatures), self.n_k, initialize="BAR")
            except NameError as exc:        # pymbar 4.0's BAR start, when BAR does not converge, names an exception
                if "ConvergenceError" not in str(exc):  # it never imported (a NameError, not its warning)
                    raise
                raise ThermoError("BAR between neighbouring temperatures did not converge (too few samples, or "
                                  "energies that do not overlap); run longer") from None
        self.f_k = np.asarray(self.mbar.f_k, dtype=np.float64)
        norm = (np.asarray(self.mbar.W_nk, dtype=np.float64)).sum(axis=0)
        if not np.allclose(norm, 1.0, atol=1e-6):
            raise ThermoError(f"MBAR did not converge (weights summing to {norm.min():.3g}-{norm.max():.3g} instead "
                              "of 1); neighbouring temperatures' energies may not overlap")

    @property
    def energies(self) -> np.ndarray:
        return self.data[0]

    @staticmethod
    def _reduced(u_n: np.ndarray, temps: np.ndarray) -> np.ndarray:
        """u_kn = U_n / (kB T_k), [len(temps), N]."""
        return np.asarray(u_n, dtype=np.float64)[None, :] / (BOLTZMANN_KJ_MOL_K * np.asarray(temps, dtype=float)[:, None])

    def check_targets(self, targets_K: Sequence[float], option: str) -> np.ndarray:
        """``targets_K`` as an array, each within the sampled range (an :class:`InputError` naming ``option``)."""
        t = np.asarray(targets_K, dtype=np.float64)
        lo, hi = float(self.temperatures.min()), float(self.temperatures.max())
        outside = [x for x in t if not lo - 1e-6 <= x <= hi + 1e-6]
        if outside:
            raise InputError(f"{option}: {outside[0]:g} K is outside the sampled temperatures ({lo:.1f}-{hi:.1f} K); "
                             "MBAR does not extrapolate: choose temperatures within the ladder")
        return t

    def neighbour_overlap(self) -> List[Dict[str, float]]:
        """Per pair of neighbouring sampled temperatures (in increasing order): ``T_lo_K``, ``T_hi_K`` and
        ``overlap``, the smaller of pymbar's overlap-matrix elements O[lo, hi] and O[hi, lo] (``compute_overlap``:
        O[i, j], the probability that a sample of state i is seen in state j)."""
        with np.errstate(all="ignore"):
            o = np.asarray(self.mbar.compute_overlap()["matrix"], dtype=np.float64)
        order = np.argsort(self.temperatures)
        return [{"T_lo_K": float(self.temperatures[i]), "T_hi_K": float(self.temperatures[j]),
                 "overlap": float(min(o[i, j], o[j, i]))} for i, j in zip(order[:-1], order[1:])]

    # -- estimates -------------------------------------------------------------------------------------------
    def _log_weights(self, u_n: np.ndarray, n_k: np.ndarray, f_k: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Normalised log MBAR weights [targets, N] of samples with energies ``u_n`` (``n_k`` per state)."""
        with np.errstate(divide="ignore"):
            log_n = np.log(n_k.astype(float))
        log_den = _logsumexp(log_n[:, None] + f_k[:, None] - self._reduced(u_n, self.temperatures), axis=0)
        logw = -self._reduced(u_n, targets) - log_den[None, :]
        return logw - _logsumexp(logw, axis=1)[:, None]

    def table(self, targets_K: Sequence[float]) -> Dict[str, np.ndarray]:
        """The estimates at each target temperature (module docstring).

        Returns
        -------
        dict of arrays [targets]
            ``temperature_K``, ``potential_energy_kJ_mol``, ``heat_capacity_kJ_mol_K``, each observable by its
            name, ``reduced_free_energy`` (relative to the first target), each with ``<key>_err`` (one standard
            error), and ``effective_samples``.
        """
        with np.errstate(divide="ignore", invalid="ignore"):    # pymbar takes log(A) of zero values of A
            return self._table(np.asarray(targets_K, dtype=np.float64))

    def _table(self, t: np.ndarray) -> Dict[str, np.ndarray]:
        u_ln = self._reduced(self.energies, t)
        out: Dict[str, np.ndarray] = {"temperature_K": t}
        for key, row in [("potential_energy_kJ_mol", 0)] + [(n, 1 + i) for i, n in enumerate(self.names)]:
            r = self.mbar.compute_expectations(self.data[row], u_kn=u_ln)
            out[key], out[key + "_err"] = np.asarray(r["mu"], dtype=float), np.asarray(r["sigma"], dtype=float)
        du = self.energies - self.energies.mean()          # C is shift-invariant; this keeps <U^2> well conditioned
        cv, cv_err = np.empty(len(t)), np.empty(len(t))
        for i in range(len(t)):
            r = self.mbar.compute_multiple_expectations(np.vstack([du, du * du]), u_ln[i], return_theta=True)
            m1, m2 = np.asarray(r["mu"], dtype=float)
            kt2 = BOLTZMANN_KJ_MOL_K * t[i] ** 2
            grad = np.array([-2.0 * m1, 1.0]) / kt2
            cv[i] = (m2 - m1 * m1) / kt2
            cv_err[i] = np.sqrt(max(float(grad @ _covariance(r["Theta"], 2) @ grad), 0.0))
        out["heat_capacity_kJ_mol_K"], out["heat_capacity_kJ_mol_K_err"] = cv, cv_err
        r = self.mbar.compute_perturbed_free_energies(u_ln)
        out["reduced_free_energy"] = np.asarray(r["Delta_f"], dtype=float)[0]
        out["reduced_free_energy_err"] = np.asarray(r["dDelta_f"], dtype=float)[0]
        w = np.exp(self._log_weights(self.energies, self.n_k, self.f_k, t))
        out["effective_samples"] = 1.0 / (w * w).sum(axis=1)
        return out

    # -- melting temperatures --------------------------------------------------------------------------------
    def _curves(self, data: np.ndarray, n_k: np.ndarray, f_k: np.ndarray, grid: np.ndarray):
        """C(T) and <Q>(T) (None without Q) on ``grid`` from samples ``data`` [1 + observables, N]."""
        w = np.exp(self._log_weights(data[0], n_k, f_k, grid))
        du = data[0] - data[0].mean()
        m1 = w @ du
        cv = (w @ (du * du) - m1 * m1) / (BOLTZMANN_KJ_MOL_K * grid ** 2)
        q = w @ data[1 + self.names.index(Q_NAME)] if Q_NAME in self.names else None
        return cv, q

    @staticmethod
    def _peak(grid: np.ndarray, cv: np.ndarray) -> Optional[float]:
        """The temperature of C's maximum (a parabola through the top grid point and its neighbours), or None when
        the maximum is at an end of the grid."""
        i = int(np.nanargmax(cv))
        if i == 0 or i == len(grid) - 1:
            return None
        y0, y1, y2 = cv[i - 1], cv[i], cv[i + 1]
        den = y0 - 2 * y1 + y2
        shift = 0.5 * (y0 - y2) / den if den < 0 else 0.0
        return float(grid[i] + shift * (grid[i + 1] - grid[i]))

    @staticmethod
    def _crossing(grid: np.ndarray, q: Optional[np.ndarray]) -> Optional[float]:
        """The first temperature where ``q`` crosses 0.5 (linear between grid points), or None."""
        if q is None:
            return None
        d = q - 0.5
        hit = np.nonzero((d[:-1] == 0) | (np.sign(d[:-1]) * np.sign(d[1:]) < 0))[0]
        if len(hit) == 0:
            return None
        i = int(hit[0])
        if d[i] == 0:
            return float(grid[i])
        return float(grid[i] + (grid[i + 1] - grid[i]) * d[i] / (d[i] - d[i + 1]))

    def melting(self, t_min: float, t_max: float, bootstrap: int = 100, seed: int = 1) -> Dict[str, object]:
        """The melting temperatures in [t_min, t_max] (module docstring).

        Returns
        -------
        dict
            ``heat_capacity_peak_K`` and ``q_half_K`` (None when not inside the range / no Q), their ``*_err_K``
            (bootstrap standard deviations; None without a value or with fewer than 2 replicates that found one),
            ``bootstrap_replicates`` and, per temperature, how many replicates found one (``*_replicates``).
        """
        grid = np.linspace(float(t_min), float(t_max), FINE_GRID)
        cv, q = self._curves(self.data, self.n_k, self.f_k, grid)
        out: Dict[str, object] = {"heat_capacity_peak_K": self._peak(grid, cv), "q_half_K": self._crossing(grid, q),
                                  "range_K": [float(t_min), float(t_max)], "bootstrap_replicates": int(bootstrap),
                                  "uncertainty": f"bootstrap standard deviation over {int(bootstrap)} resamplings of "
                                                 "each temperature's uncorrelated samples (MBAR solved again each time)"}
        found: Dict[str, List[float]] = {"heat_capacity_peak_K": [], "q_half_K": []}
        if bootstrap > 0 and (out["heat_capacity_peak_K"] is not None or out["q_half_K"] is not None):
            pymbar = _pymbar()
            rng = np.random.default_rng(seed)
            for _ in range(int(bootstrap)):
                data = np.concatenate([s[:, rng.integers(0, s.shape[1], s.shape[1])] for s in self._samples], axis=1)
                with np.errstate(all="ignore"):
                    fit = pymbar.MBAR(self._reduced(data[0], self.temperatures), self.n_k, initial_f_k=self.f_k)
                cv_b, q_b = self._curves(data, self.n_k, np.asarray(fit.f_k, dtype=float), grid)
                for key, value in (("heat_capacity_peak_K", self._peak(grid, cv_b)), ("q_half_K", self._crossing(grid, q_b))):
                    if value is not None:
                        found[key].append(value)
        for key, values in found.items():
            out[key.replace("_K", "_replicates")] = len(values)
            ok = out[key] is not None and len(values) >= 2
            out[key.replace("_K", "_err_K")] = float(np.std(values, ddof=1)) if ok else None
        return out

    # -- reweighted free-energy surfaces -----------------------------------------------------------------------
    def free_energy_surface(self, t_kelvin: float, x: str, y: str, bins: int) -> Dict[str, object]:
        """F(x, y) at ``t_kelvin`` (kJ/mol) from every frame after equilibration, reweighted (module docstring).

        Parameters
        ----------
        x, y : str
            Observable names (given to the constructor).
        bins : int
            Bins per axis.

        Returns
        -------
        dict
            ``temperature_K``, ``x``, ``y``, ``bins``, ``x_edges``, ``y_edges``, ``free_energy_kJ_mol`` [bins, bins]
            (NaN: no frame), ``effective_frames``.
        """
        data = self._frames
        logw = self._log_weights(data[0], self.n_frames_k, self.f_k, np.array([float(t_kelvin)]))[0]
        w = np.exp(logw)
        xs, ys = data[1 + self.names.index(x)], data[1 + self.names.index(y)]
        edges = []
        for v in (xs, ys):
            lo, hi = float(v.min()), float(v.max())
            pad = 0.05 * (hi - lo) if hi > lo else max(1e-3, 1e-3 * abs(lo))
            edges.append(np.linspace(lo - pad, hi + pad, int(bins) + 1))
        h, xe, ye = np.histogram2d(xs, ys, bins=edges, weights=w)
        with np.errstate(divide="ignore"):
            f = -BOLTZMANN_KJ_MOL_K * float(t_kelvin) * np.log(h / h.sum())
        f[h <= 0] = np.nan
        f -= np.nanmin(f)
        return {"temperature_K": float(t_kelvin), "x": x, "y": y, "bins": int(bins), "x_edges": xe, "y_edges": ye,
                "free_energy_kJ_mol": f, "effective_frames": float(1.0 / (w * w).sum())}
