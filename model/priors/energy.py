"""Plain-PyTorch reference energies and forces of a :class:`~flashschnet.priors.terms.PriorSet`.

Positions are [R, N, 3] (R replicas, N beads) in Angstrom, float32 or float64; energies are kcal/mol per
replica in the dtype of the positions, forces ``-dE/dr`` in kcal/mol/A (autograd). Functional forms: see
:mod:`flashschnet.priors`.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from ..errors import InputError
from .geometry import compute_angle_cos, compute_distances, compute_torsions
from .terms import PriorSet, PriorTerm

__all__ = ["per_term_energy", "prior_energy", "prior_energy_forces"]


def _term_energy(term: PriorTerm, pos: torch.Tensor) -> torch.Tensor:
    """Energy [R] of one term for positions [R, N, 3] (A) in kcal/mol."""
    R = pos.shape[0]
    if term.n_tuples == 0:
        return pos.new_zeros(R)
    idx = term.indices.to(pos.device)
    prm = {k: v.to(device=pos.device, dtype=pos.dtype) for k, v in term.params.items()}
    if term.kind in ("harmonic_bond", "repulsion"):
        d = compute_distances(pos, idx)  # [R, n]
        if term.kind == "harmonic_bond":
            e = prm["k"] * (d - prm["x0"]) ** 2
        else:
            e = (prm["sigma"] / d) ** 6
    elif term.kind == "harmonic_angle_cos":
        c = compute_angle_cos(pos, idx)
        e = prm["k"] * (c - prm["x0"]) ** 2
    else:  # dihedral_fourier
        phi = compute_torsions(pos, idx)  # [R, n]
        D = prm["k1s_sin"].shape[1]
        nphi = phi.unsqueeze(-1) * torch.arange(1, D + 1, device=pos.device, dtype=pos.dtype)  # [R, n, D]
        e = prm["v0"] + (prm["k1s_sin"] * torch.sin(nphi) + prm["k2s_cos"] * torch.cos(nphi)).sum(-1)
    return e.sum(-1)


def _as_batch(positions) -> torch.Tensor:
    pos = torch.as_tensor(positions)
    if not torch.is_floating_point(pos):
        pos = pos.to(torch.get_default_dtype())
    if pos.dim() == 2:
        raise InputError(f"positions must have shape [R, N, 3], got {tuple(pos.shape)} (add a replica axis)")
    if pos.dim() != 3 or pos.shape[-1] != 3:
        raise InputError(f"positions must have shape [R, N, 3], got {tuple(pos.shape)}")
    return pos


def per_term_energy(prior_set: PriorSet, positions: torch.Tensor) -> Dict[str, torch.Tensor]:
    """Energy of each term.

    Parameters
    ----------
    prior_set : PriorSet
    positions : torch.Tensor, float32 or float64, shape [R, N, 3]
        Positions in Angstrom; ``N`` must be > every bead index of the prior.

    Returns
    -------
    dict of str -> torch.Tensor, shape [R], dtype of ``positions``
        kcal/mol per replica; differentiable w.r.t. ``positions``.
    """
    pos = _as_batch(positions)
    if prior_set.max_index >= pos.shape[1]:
        raise InputError(f"positions have {pos.shape[1]} beads but the priors refer to bead {prior_set.max_index}")
    return {t.name: _term_energy(t, pos) for t in prior_set.terms}


def prior_energy(prior_set: PriorSet, positions: torch.Tensor) -> torch.Tensor:
    """Total prior energy.

    Parameters
    ----------
    prior_set : PriorSet
    positions : torch.Tensor, float32 or float64, shape [R, N, 3]
        Positions in Angstrom.

    Returns
    -------
    torch.Tensor, shape [R], dtype of ``positions``
        kcal/mol per replica, differentiable w.r.t. ``positions``.
    """
    pos = _as_batch(positions)
    e = pos.new_zeros(pos.shape[0])
    for v in per_term_energy(prior_set, pos).values():
        e = e + v
    return e


def prior_energy_forces(prior_set: PriorSet, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Prior energy and forces (autograd).

    Parameters
    ----------
    prior_set : PriorSet
    positions : torch.Tensor, float32 or float64, shape [R, N, 3]
        Positions in Angstrom (not modified; gradients are taken on a detached copy).

    Returns
    -------
    energy : torch.Tensor, shape [R], kcal/mol (detached)
    forces : torch.Tensor, shape [R, N, 3], kcal/mol/A, ``-dE/dr`` (detached)
    """
    pos = _as_batch(positions).detach().clone().requires_grad_(True)
    with torch.enable_grad():
        e = prior_energy(prior_set, pos)
        (g,) = torch.autograd.grad(e.sum(), pos) if e.requires_grad else (torch.zeros_like(pos),)
    return e.detach(), -g.detach()
