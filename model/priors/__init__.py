"""mlcg prior terms: data model, plain-PyTorch reference energies/forces, mlcg import and a placeholder fit.

mlcg models are trained as ``U_total = U_prior + U_net``. The prior is a sum of simple physical terms whose
functional forms are reproduced here EXACTLY as mlcg (ClementiGroup/mlcg, commit 434da19) evaluates them:

=====================  =====================================================================================
kind                   energy of one tuple (positions in Angstrom, energies in kcal/mol)
=====================  =====================================================================================
``harmonic_bond``      ``U = k (d - x0)^2``  (no factor 1/2), ``d = |r_j - r_i|``
``harmonic_angle_cos`` ``U = k (cos(theta) - x0)^2``, ``theta`` at the middle bead ``j`` of ``(i, j, k)``,
                       ``x0 = cos(theta0)`` (dimensionless)
``dihedral_fourier``   ``U = v0 + sum_{n=1..D} k1s_sin[n-1] sin(n phi) + k2s_cos[n-1] cos(n phi)``;
                       ``phi`` is mlcg's ``compute_torsions`` = mdtraj/IUPAC dihedral in ``(-pi, pi]``
``repulsion``          ``U = (sigma / d)^6`` on the listed pairs, no cutoff, no shift
=====================  =====================================================================================

Dihedral sign convention (verified against mlcg's oracle energies, which contain odd ``sin`` terms):
``phi = atan2(|b2| b1 . (b2 x b3), (b1 x b2) . (b2 x b3))`` with ``b1 = r_j - r_i``, ``b2 = r_k - r_j``,
``b3 = r_l - r_k``; this equals mdtraj's ``compute_dihedrals`` and OpenMM's torsion angle ``theta``
(``CustomTorsionForce``/``PeriodicTorsionForce``), so no sign flip is needed anywhere.

Modules (each imports only those listed above it; every public name is re-exported here):

=====================  =====================================================================================
:mod:`.terms`          data model: :class:`PriorTerm`, :class:`PriorSet` (serialization, fingerprint checks),
                       :data:`KINDS`
:mod:`.geometry`       :func:`compute_distances`, :func:`compute_angle_cos`, :func:`compute_torsions`
:mod:`.energy`         :func:`per_term_energy`, :func:`prior_energy`, :func:`prior_energy_forces`
:mod:`.tuples`         mlcg's term tuples: :func:`angle_tuples`, :func:`dihedral_tuples`,
                       :func:`mlcg_term_tuples`, :data:`REPULSION_MIN_GRAPH_DISTANCE`
:mod:`.fit`            placeholder fit :func:`fit_priors_to_structure` and its ``DEFAULT_*`` force constants
:mod:`.io`             :func:`load_priors`, :func:`save_priors`
:mod:`.tables`         type-indexed tables of a transferable model: :func:`priors_for_molecule`,
                       :func:`specialize_prior_tables`
=====================  =====================================================================================

This package never imports openmm; :mod:`flashschnet.openmm.priors` turns a :class:`PriorSet` into OpenMM forces.
"""
from .energy import per_term_energy, prior_energy, prior_energy_forces
from .placeholder import DEFAULT_K_ANGLE, DEFAULT_K_BOND, DEFAULT_K_DIHEDRAL, DEFAULT_SIGMA, fit_priors_to_structure
from .geometry import compute_angle_cos, compute_distances, compute_torsions
from .io import load_priors, save_priors
from .type_parameters import priors_for_molecule, specialize_prior_tables
from .terms import KINDS, PriorSet, PriorTerm
from .tuples import REPULSION_MIN_GRAPH_DISTANCE, angle_tuples, dihedral_tuples, mlcg_term_tuples

__all__ = [
    "KINDS",
    "PriorTerm",
    "PriorSet",
    "prior_energy",
    "prior_energy_forces",
    "per_term_energy",
    "compute_distances",
    "compute_angle_cos",
    "compute_torsions",
    "fit_priors_to_structure",
    "angle_tuples",
    "dihedral_tuples",
    "mlcg_term_tuples",
    "load_priors",
    "save_priors",
    "priors_for_molecule",
    "specialize_prior_tables",
    "REPULSION_MIN_GRAPH_DISTANCE",
    "DEFAULT_K_BOND",
    "DEFAULT_K_ANGLE",
    "DEFAULT_K_DIHEDRAL",
    "DEFAULT_SIGMA",
]
