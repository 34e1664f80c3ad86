"""Prior terms fitted to mapped reference data by Boltzmann inversion, in mlcg's functional forms
(:mod:`flashschnet.priors`), one parameter set per tuple (a model of one protein).

* bonds ``U = k (d - x0)^2``: ``x0`` = mean distance, ``k = kT / (2 var(d))`` (the Gaussian whose Boltzmann
  distribution has the observed mean and variance);
* angles ``U = k (cos theta - x0)^2``: the same in ``cos theta``;
* dihedrals (phi, psi, omega, gamma_1, gamma_2 as mlcg defines them) ``U = v0 + sum_n k1 sin(n phi) + k2 cos(n phi)``
  (``n <= n_degs``): least-squares fit to ``-kT ln p(phi)`` on a 36-bin histogram, bins weighted by their counts;
* repulsion ``U = (sigma / d)^6`` on pairs >= 5 bonds apart (mlcg's rule), ``sigma`` per bead-type pair = the
  smallest distance observed between such beads.

Energies in kcal/mol, lengths in Angstrom.
"""
from __future__ import annotations

from typing import List

import numpy as np
import torch

from ..errors import InputError
from ..priors import (REPULSION_MIN_GRAPH_DISTANCE, PriorSet, PriorTerm, angle_tuples, dihedral_tuples,
                      compute_angle_cos, compute_distances, compute_torsions)

#: Boltzmann constant, kcal/mol/K
KB_KCAL = 0.0019872041


def _fourier_fit(phi: np.ndarray, kT: float, n_degs: int, bins: int = 36):
    """(k1s_sin [D], k2s_cos [D], v0) of ``-kT ln p(phi)`` for one dihedral's samples ``phi`` (radians)."""
    counts, edges = np.histogram(phi, bins=bins, range=(-np.pi, np.pi))
    centres = 0.5 * (edges[1:] + edges[:-1])
    p = (counts + 0.5) / (counts.sum() + 0.5 * bins)                  # half a count per bin: finite barriers
    free = -kT * np.log(p)
    cols = [np.ones_like(centres)]
    for n in range(1, n_degs + 1):
        cols += [np.sin(n * centres), np.cos(n * centres)]
    a = np.stack(cols, axis=1)
    w = np.sqrt(counts + 1.0)
    coef, *_ = np.linalg.lstsq(a * w[:, None], free * w, rcond=None)
    return coef[1::2], coef[2::2], coef[0]


def fit_priors(mol, positions: np.ndarray, temperature_K: float, n_degs: int = 3,
               min_graph_distance: int = REPULSION_MIN_GRAPH_DISTANCE, description: str = "") -> PriorSet:
    """Fit a :class:`PriorSet` for ``mol`` to CG frames ``positions`` [F, N, 3] (Angstrom) at ``temperature_K``."""
    pos = torch.as_tensor(np.asarray(positions, dtype=np.float64))
    if pos.dim() != 3 or pos.shape[1] != mol.n_beads:
        raise InputError(f"positions {tuple(pos.shape)} do not fit the molecule's {mol.n_beads} beads")
    if pos.shape[0] < 10:
        raise InputError(f"{pos.shape[0]} frames are too few to fit priors (need at least 10)")
    kT = KB_KCAL * float(temperature_K)
    terms: List[PriorTerm] = []
    bonds = np.unique(np.sort(np.asarray(mol.bonds, dtype=np.int64).reshape(-1, 2), axis=1), axis=0)
    if len(bonds):
        bi = torch.as_tensor(bonds)
        d = compute_distances(pos, bi)
        terms.append(PriorTerm("bonds", "harmonic_bond", bi,
                               {"x0": d.mean(0), "k": kT / (2.0 * d.var(0).clamp_min(1e-8))}))
    angles = angle_tuples(mol.n_beads, bonds)
    if angles:
        ai = torch.tensor(angles, dtype=torch.long)
        c = compute_angle_cos(pos, ai)
        terms.append(PriorTerm("angles", "harmonic_angle_cos", ai,
                               {"x0": c.mean(0), "k": kT / (2.0 * c.var(0).clamp_min(1e-8))}))
    for name, tuples in dihedral_tuples(mol).items():
        if not tuples:
            continue
        di = torch.tensor(tuples, dtype=torch.long)
        phi = compute_torsions(pos, di).numpy()                      # [F, n]
        fits = [_fourier_fit(phi[:, t], kT, n_degs) for t in range(len(tuples))]
        terms.append(PriorTerm(name, "dihedral_fourier", di, {
            "k1s_sin": torch.tensor(np.array([f[0] for f in fits])),
            "k2s_cos": torch.tensor(np.array([f[1] for f in fits])),
            "v0": torch.tensor([f[2] for f in fits])}))
    n = mol.n_beads
    gd = np.asarray(mol.bond_graph_distances(max_distance=min_graph_distance))
    iu, ju = np.triu_indices(n, 1)
    sel = gd[iu, ju] >= min_graph_distance
    if sel.any():
        pi = torch.as_tensor(np.stack([iu[sel], ju[sel]], axis=1))
        dmin = compute_distances(pos, pi).min(0).values
        types = np.asarray(mol.bead_types, dtype=np.int64)
        ta, tb = types[pi[:, 0].numpy()], types[pi[:, 1].numpy()]
        key = np.minimum(ta, tb) * 1000 + np.maximum(ta, tb)
        sigma = np.empty(len(key))
        for k in np.unique(key):                                      # per bead-type pair, as mlcg
            sigma[key == k] = dmin.numpy()[key == k].min()
        terms.append(PriorTerm("non_bonded", "repulsion", pi, {"sigma": torch.tensor(sigma)}))
    return PriorSet(terms=terms, n_beads=n, units={"length": "angstrom", "energy": "kcal/mol"},
                    fingerprint=mol.fingerprint(),
                    description=description or f"Boltzmann-inverted priors of {mol.source or 'a molecule'} at "
                                               f"{temperature_K:g} K from {pos.shape[0]} frames")
