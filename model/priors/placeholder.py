"""PLACEHOLDER prior fit to one structure (:func:`fit_priors_to_structure`) and its default force constants.

Equilibrium values come from the native structure; force constants are medians of mlcg's chignolin demo prior.
This is NOT Boltzmann inversion and is meant for example/placeholder models only (a real prior fit from
trajectories is :func:`flashschnet.train.fit_priors`).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

import numpy as np
import torch

from ..errors import InputError
from .geometry import compute_angle_cos, compute_distances, compute_torsions
from .terms import PriorSet, PriorTerm
from .tuples import REPULSION_MIN_GRAPH_DISTANCE, angle_tuples, dihedral_tuples

__all__ = ["fit_priors_to_structure", "DEFAULT_K_BOND", "DEFAULT_K_ANGLE", "DEFAULT_K_DIHEDRAL", "DEFAULT_SIGMA"]

# ----------------------------------------------------------------------------------------------------------
# Constants of the placeholder fit. All are medians over mlcg's chignolin demo prior
# (mlcg examples/h5_pl/multiple_molecules/prior.pt, exported as /work/shared/oracles/mlcg/mlcg_prior_cln.pt),
# computed once with numpy.median and hard-coded here:
# ----------------------------------------------------------------------------------------------------------

#: Median ``k`` of the 48 harmonic bonds (n_term/bulk/c_term_bonds), kcal/mol/A^2 (U = k (d - x0)^2).
DEFAULT_K_BOND = 262.6513366699219

#: Median ``k`` of the 65 harmonic angles (n_term/bulk/c_term_angles), kcal/mol (U = k (cos theta - x0)^2).
DEFAULT_K_ANGLE = 132.52108764648438

#: Per dihedral type, median amplitude ``sqrt(k1s_sin[0]^2 + k2s_cos[0]^2)`` of the n=1 Fourier term,
#: kcal/mol (phi: the 9 *_phi tuples; psi: the 9 *_psi tuples; omega: pro_omega + non_pro_omega;
#: gamma_1, gamma_2: those terms; ca_dihedral (CA mapping, not in the chignolin prior): median over all 45).
DEFAULT_K_DIHEDRAL: Dict[str, float] = {
    "phi": 3.1738664887919072,
    "psi": 1.1139838543774447,
    "omega": 18.71258142574626,
    "gamma_1": 193.61417893915808,
    "gamma_2": 114.68993584512583,
    "ca_dihedral": 18.71258142574626,
}

#: Median repulsion ``sigma`` of the 924 non_bonded pairs, Angstrom.
DEFAULT_SIGMA = 3.0269999504089355


def fit_priors_to_structure(
    mol,
    *,
    k_bond: float = DEFAULT_K_BOND,
    k_angle: float = DEFAULT_K_ANGLE,
    k_dihedral: Union[float, Dict[str, float], None] = None,
    sigma: float = DEFAULT_SIGMA,
    sigma_fraction: float = 0.9,
    min_graph_distance: int = REPULSION_MIN_GRAPH_DISTANCE,
    description: Optional[str] = None,
) -> PriorSet:
    """PLACEHOLDER prior fitted to one structure (not Boltzmann inversion; for example/placeholder models only).

    Builds mlcg's term topology from the CG molecule and takes equilibrium values from its native positions:

    * ``bonds`` (harmonic_bond): every CG bond of ``mol.bonds``; ``x0`` = native distance, ``k = k_bond``;
    * ``angles`` (harmonic_angle_cos): every bonded path i-j-k (i < k); ``x0`` = native cos(theta),
      ``k = k_angle``;
    * dihedrals (dihedral_fourier, n_degs = 1): 5-bead mapping ``phi``, ``psi``, ``omega``, ``gamma_1``,
      ``gamma_2`` (see mlcg; same tuples as mlcg's chignolin prior), CA mapping ``ca_dihedral``
      (four consecutive bonded CAs). Each is ``U = kphi (1 - cos(phi - phi0))`` with ``phi0`` native,
      written in mlcg's Fourier form as ``v0 = kphi``, ``k2s_cos = -kphi cos(phi0)``,
      ``k1s_sin = -kphi sin(phi0)``; the minimum ``U = 0`` is at the native angle;
    * ``non_bonded`` (repulsion): every pair (i < j) at bonded-graph distance >= ``min_graph_distance``
      (mlcg: 5) or in different chains, ``sigma_ij = min(sigma, sigma_fraction * native d_ij)``.

    Parameters
    ----------
    mol : flashschnet.cg.molecule.CGMolecule
        The CG molecule (positions in Angstrom).
    k_bond : float
        kcal/mol/A^2 (default: median of mlcg's chignolin prior, :data:`DEFAULT_K_BOND`).
    k_angle : float
        kcal/mol (default :data:`DEFAULT_K_ANGLE`).
    k_dihedral : float or dict or None
        kcal/mol; a float for all dihedral types, or a dict type -> value overriding
        :data:`DEFAULT_K_DIHEDRAL` (keys ``phi``, ``psi``, ``omega``, ``gamma_1``, ``gamma_2``, ``ca_dihedral``).
    sigma : float
        Repulsion sigma upper bound, A (default :data:`DEFAULT_SIGMA`).
    sigma_fraction : float
        Each pair's sigma is at most this fraction of its native distance.
    min_graph_distance : int
        Smallest bonded-graph distance that gets a repulsion (mlcg: 5).
    description : str, optional

    Returns
    -------
    PriorSet
        float64 parameters, fingerprint ``mol.fingerprint()``.
    """
    pos = torch.as_tensor(np.asarray(mol.positions, dtype=np.float64)).reshape(1, -1, 3)
    n = int(mol.n_beads)
    if pos.shape[1] != n:
        raise InputError(f"CG molecule has {n} beads but {pos.shape[1]} positions")
    kd = dict(DEFAULT_K_DIHEDRAL)
    if isinstance(k_dihedral, dict):
        kd.update({str(k): float(v) for k, v in k_dihedral.items()})
    elif k_dihedral is not None:
        kd = {k: float(k_dihedral) for k in kd}

    bonds = np.asarray(mol.bonds, dtype=np.int64).reshape(-1, 2)
    bonds = np.sort(bonds, axis=1)
    bonds = np.unique(bonds, axis=0) if len(bonds) else bonds
    terms: List[PriorTerm] = []

    if len(bonds):
        bi = torch.as_tensor(bonds)
        d = compute_distances(pos, bi)[0]
        terms.append(PriorTerm("bonds", "harmonic_bond", bi,
                               {"x0": d, "k": torch.full_like(d, float(k_bond))}))
    angles = angle_tuples(n, bonds)
    if angles:
        ai = torch.tensor(angles, dtype=torch.long)
        c = compute_angle_cos(pos, ai)[0]
        terms.append(PriorTerm("angles", "harmonic_angle_cos", ai, {"x0": c, "k": torch.full_like(c, float(k_angle))}))
    for name, tuples in dihedral_tuples(mol).items():
        if not tuples:
            continue
        di = torch.tensor(tuples, dtype=torch.long)
        phi0 = compute_torsions(pos, di)[0]
        k = torch.full_like(phi0, kd[name])
        terms.append(PriorTerm(name, "dihedral_fourier", di, {
            "k1s_sin": (-k * torch.sin(phi0)).unsqueeze(1),
            "k2s_cos": (-k * torch.cos(phi0)).unsqueeze(1),
            "v0": k.clone(),
        }))
    far = int(min_graph_distance)
    gd = np.asarray(mol.bond_graph_distances(max_distance=far))
    iu, ju = np.triu_indices(n, 1)
    sel = gd[iu, ju] >= far
    if sel.any():
        pi = torch.as_tensor(np.stack([iu[sel], ju[sel]], axis=1))
        d = (pos[0, pi[:, 1]] - pos[0, pi[:, 0]]).norm(dim=-1)
        s = torch.clamp(float(sigma_fraction) * d, max=float(sigma))
        terms.append(PriorTerm("non_bonded", "repulsion", pi, {"sigma": s}))
    if description is None:
        src = getattr(mol, "source", "") or "a structure"
        description = (f"placeholder prior fitted to the native structure of {src} (equilibrium values from the "
                       f"structure, force constants = medians of mlcg's chignolin prior; NOT Boltzmann inversion)")
    return PriorSet(terms=terms, n_beads=n, units={"length": "angstrom", "energy": "kcal/mol"},
                    fingerprint=mol.fingerprint(), description=description)

