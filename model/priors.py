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

This module never imports openmm; :mod:`flashschnet.openmm.priors` turns a :class:`PriorSet` into OpenMM forces.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .errors import InputError
from .safeload import load_plain

__all__ = [
    "KINDS",
    "PriorTerm",
    "PriorSet",
    "prior_energy",
    "prior_energy_forces",
    "per_term_energy",
    "compute_torsions",
    "fit_priors_to_structure",
    "mlcg_term_tuples",
    "REPULSION_MIN_GRAPH_DISTANCE",
    "DEFAULT_K_BOND",
    "DEFAULT_K_ANGLE",
    "DEFAULT_K_DIHEDRAL",
    "DEFAULT_SIGMA",
]

#: kind -> tuple order (number of beads per tuple).
KINDS: Dict[str, int] = {"harmonic_bond": 2, "harmonic_angle_cos": 3, "dihedral_fourier": 4, "repulsion": 2}

#: Parameter names per kind (and the number of dimensions of each parameter tensor).
_PARAMS: Dict[str, Dict[str, int]] = {
    "harmonic_bond": {"x0": 1, "k": 1},
    "harmonic_angle_cos": {"x0": 1, "k": 1},
    "dihedral_fourier": {"k1s_sin": 2, "k2s_cos": 2, "v0": 1},
    "repulsion": {"sigma": 1},
}

_FORMAT = "flashschnet-priors-v1"

# ----------------------------------------------------------------------------------------------------------
# Constants of the placeholder fit. All are medians over mlcg's chignolin demo prior
# (mlcg examples/h5_pl/multiple_molecules/prior.pt, exported as /work/shared/oracles/mlcg/mlcg_prior_cln.pt),
# computed once with numpy.median and hard-coded here:
# ----------------------------------------------------------------------------------------------------------

#: mlcg excludes from the repulsion every pair up to 4 bonds apart: repulsion acts on pairs whose bonded-graph
#: distance is >= 5. Verified on chignolin: >= 5 gives exactly the oracle's 924 ``non_bonded`` pairs
#: (>= 4 would give 992).
REPULSION_MIN_GRAPH_DISTANCE = 5

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

_ALPHABET = "ACDEFGHIKLMNPQRSTVWY"  # 1-based index = residue-specific bead type (mlcg OPEPS types)


@dataclass
class PriorTerm:
    """One prior term: one functional form applied to a list of bead tuples with per-tuple parameters.

    Attributes
    ----------
    name : str
        Term name (e.g. ``"bulk_bonds"``, ``"gamma_1"``, ``"non_bonded"``).
    kind : str
        One of ``"harmonic_bond"``, ``"harmonic_angle_cos"``, ``"dihedral_fourier"``, ``"repulsion"``.
    indices : torch.LongTensor, shape [n, order]
        0-based bead indices of each tuple; order 2 (bonds, repulsion), 3 (angles) or 4 (dihedrals).
    params : dict of str -> torch.Tensor (float64)
        ``harmonic_bond``: ``x0`` [n] (A), ``k`` [n] (kcal/mol/A^2);
        ``harmonic_angle_cos``: ``x0`` [n] (cos theta0, dimensionless), ``k`` [n] (kcal/mol);
        ``dihedral_fourier``: ``k1s_sin`` [n, D], ``k2s_cos`` [n, D], ``v0`` [n] (kcal/mol);
        ``repulsion``: ``sigma`` [n] (A).
    """

    name: str
    kind: str
    indices: torch.Tensor
    params: Dict[str, torch.Tensor]

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InputError(f"prior term {self.name!r}: unknown kind {self.kind!r} (expected one of {sorted(KINDS)})")
        idx = torch.as_tensor(self.indices, dtype=torch.long).reshape(-1, KINDS[self.kind]).clone()
        self.indices = idx
        n = idx.shape[0]
        params = {}
        for pname, ndim in _PARAMS[self.kind].items():
            if pname not in self.params:
                raise InputError(f"prior term {self.name!r} ({self.kind}) lacks parameter {pname!r}")
            p = torch.as_tensor(self.params[pname], dtype=torch.float64).clone()
            if ndim == 2 and p.dim() == 1:
                p = p.reshape(n, -1)
            if p.dim() != ndim or p.shape[0] != n:
                raise InputError(f"prior term {self.name!r}: parameter {pname!r} has shape {tuple(p.shape)}, "
                                 f"expected {n} rows ({ndim}-D)")
            params[pname] = p
        if self.kind == "dihedral_fourier" and params["k1s_sin"].shape != params["k2s_cos"].shape:
            raise InputError(f"prior term {self.name!r}: k1s_sin {tuple(params['k1s_sin'].shape)} and "
                             f"k2s_cos {tuple(params['k2s_cos'].shape)} differ in shape")
        self.params = params

    @property
    def n_tuples(self) -> int:
        return int(self.indices.shape[0])

    @property
    def n_degs(self) -> int:
        """Number of Fourier harmonics D (dihedrals only; 0 otherwise)."""
        return int(self.params["k1s_sin"].shape[1]) if self.kind == "dihedral_fourier" else 0


@dataclass
class PriorSet:
    """A full prior: a list of :class:`PriorTerm` plus units and the molecule it was made for.

    Attributes
    ----------
    terms : list of PriorTerm
    n_beads : int
        Number of beads of the CG molecule the indices refer to.
    units : dict
        ``{"length": "angstrom", "energy": "kcal/mol"}`` (the only units used by mlcg's CG data).
    fingerprint : (str, tuple of int) or None
        ``(mapping name, bead types in order)`` of the CG molecule the per-tuple parameters were made for
        (see :meth:`flashschnet.cg.molecule.CGMolecule.fingerprint`); ``None`` = not topology-specific.
    description : str
        Free text: where the prior came from.
    """

    terms: List[PriorTerm]
    n_beads: int
    units: Dict[str, str] = field(default_factory=lambda: {"length": "angstrom", "energy": "kcal/mol"})
    fingerprint: Optional[Tuple[str, Tuple[int, ...]]] = None
    description: str = ""

    def __post_init__(self):
        self.n_beads = int(self.n_beads)
        if self.fingerprint is not None:
            mapping, types = self.fingerprint
            self.fingerprint = (str(mapping), tuple(int(t) for t in types))
        names = [t.name for t in self.terms]
        if len(set(names)) != len(names):
            raise InputError(f"prior set has duplicate term names: {names}")
        for t in self.terms:
            if t.n_tuples and int(t.indices.max()) >= self.n_beads:
                raise InputError(f"prior term {t.name!r} refers to bead {int(t.indices.max())} but the prior set "
                                 f"has only {self.n_beads} beads")
            if t.n_tuples and int(t.indices.min()) < 0:
                raise InputError(f"prior term {t.name!r} has a negative bead index")

    # ---------------------------------------------------------------------------------------------- access
    def term(self, name: str) -> PriorTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)

    def terms_of_kind(self, kind: str) -> List[PriorTerm]:
        return [t for t in self.terms if t.kind == kind]

    @property
    def max_index(self) -> int:
        """Largest bead index used by any term (-1 when there are no tuples)."""
        m = [int(t.indices.max()) for t in self.terms if t.n_tuples]
        return max(m) if m else -1

    # ---------------------------------------------------------------------------------------- serialization
    def to_dict(self) -> dict:
        """Plain dict (tensors, str, int, float, list, dict, None) that survives
        ``torch.save`` + ``torch.load(weights_only=True)``."""
        fp = None
        if self.fingerprint is not None:
            fp = {"mapping": self.fingerprint[0],
                  "bead_types": torch.tensor(self.fingerprint[1], dtype=torch.long)}
        return {
            "format": _FORMAT,
            "n_beads": int(self.n_beads),
            "units": dict(self.units),
            "fingerprint": fp,
            "description": str(self.description),
            "terms": [
                {"name": t.name, "kind": t.kind, "indices": t.indices.clone(),
                 "params": {k: v.clone() for k, v in t.params.items()}}
                for t in self.terms
            ],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "PriorSet":
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, dict) or d.get("format") != _FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise InputError(f"not a flashschnet prior set (format {got!r}, expected {_FORMAT!r})")
        fp = d.get("fingerprint")
        fingerprint = None
        if fp is not None:
            fingerprint = (str(fp["mapping"]), tuple(int(x) for x in torch.as_tensor(fp["bead_types"]).tolist()))
        terms = [PriorTerm(name=str(t["name"]), kind=str(t["kind"]), indices=t["indices"], params=dict(t["params"]))
                 for t in d["terms"]]
        return cls(terms=terms, n_beads=int(d["n_beads"]), units=dict(d.get("units") or {}),
                   fingerprint=fingerprint, description=str(d.get("description", "")))

    @classmethod
    def from_mlcg_oracle(cls, d: dict, mapping: str = "5bead") -> "PriorSet":
        """Build from the dict stored in mlcg's prior export (``mlcg_prior_cln.pt``, format
        ``mlcg-prior-oracle-v1``): one :class:`PriorTerm` per non-empty term, in the file's order.

        Parameters
        ----------
        d : dict
            ``torch.load(path, weights_only=True)`` of the export: ``bead_types`` [N] int64,
            ``terms`` {name: {kind, atom_indices [n, order], x0/k | k1s_sin/k2s_cos/v0 | sigma}}.
        mapping : str
            Mapping name recorded in the fingerprint (the chignolin prior is 5-bead).
        """
        fmt = d.get("format", "")
        if not str(fmt).startswith("mlcg-prior-oracle"):
            raise InputError(f"not an mlcg prior export (format {fmt!r}, expected 'mlcg-prior-oracle-v1')")
        bead_types = torch.as_tensor(d["bead_types"]).reshape(-1)
        terms = []
        for name, t in d["terms"].items():
            idx = torch.as_tensor(t["atom_indices"], dtype=torch.long)
            if idx.numel() == 0:
                continue
            kind = str(t["kind"])
            if kind not in KINDS:
                raise InputError(f"mlcg prior term {name!r} has unsupported kind {kind!r}")
            params = {p: torch.as_tensor(t[p], dtype=torch.float64) for p in _PARAMS[kind]}
            terms.append(PriorTerm(name=name, kind=kind, indices=idx, params=params))
        desc = f"mlcg prior {d.get('source_prior', '')} (mlcg commit {d.get('mlcg_commit', '?')})".strip()
        return cls(terms=terms, n_beads=int(bead_types.numel()),
                   units={"length": "angstrom", "energy": "kcal/mol"},
                   fingerprint=(mapping, tuple(int(x) for x in bead_types.tolist())), description=desc)

    # ---------------------------------------------------------------------------------------------- checks
    def check_applies_to(self, mol) -> None:
        """Raise :class:`~flashschnet.errors.InputError` (one line) when this prior was made for another
        CG molecule than ``mol`` (a :class:`flashschnet.cg.molecule.CGMolecule`), or refers to beads it lacks.
        """
        n = int(mol.n_beads)
        if self.fingerprint is not None:
            mapping, types = self.fingerprint
            mol_mapping, mol_types = mol.fingerprint()
            if (mapping, tuple(types)) != (mol_mapping, tuple(mol_types)):
                what = _describe_fingerprint(mapping, types)
                if mapping != mol_mapping:
                    why = f"it uses the {mol_mapping!r} mapping, not {mapping!r}"
                elif len(types) != len(mol_types):
                    why = "the bead counts differ"
                else:
                    i = next(k for k, (a, b) in enumerate(zip(types, mol_types)) if a != b)
                    why = (f"bead {i} ({_bead_label(mol, i)}) has type {int(mol_types[i])}, "
                           f"the prior expects type {int(types[i])}")
                seq = _sequence_of(mol)
                seq = f" ({_short(seq)})" if seq else ""
                raise InputError(
                    f"the model's priors were made for {what}, not this {n}-bead {mol_mapping} molecule{seq}: "
                    f"{why}; per-tuple prior parameters only apply to the molecule they were fitted on "
                    f"(use a model made for this protein, or fit new priors to it)")
        if self.max_index >= n:
            raise InputError(f"the model's priors refer to bead {self.max_index} but this molecule has only {n} "
                             f"beads; the priors were made for a {self.n_beads}-bead molecule")


# ------------------------------------------------------------------------------------------------- helpers
def _short(seq: str, n: int = 10) -> str:
    return seq if len(seq) <= n else seq[:n] + "..."


def _bead_label(mol, i: int) -> str:
    try:
        return mol.bead_label(i)
    except Exception:  # noqa: BLE001 - a label is only cosmetic
        return f"bead {i}"


def _sequence_of(mol) -> str:
    try:
        return str(mol.sequence())
    except Exception:  # noqa: BLE001
        return ""


def _sequence_from_types(mapping: str, types: Sequence[int]) -> str:
    """Best-effort one-letter sequence from bead types (5-bead: N=21 starts a residue, CB type or Gly CA=6
    names it; ca: the CA type is the residue type). Empty string when it cannot be read."""
    types = [int(t) for t in types]
    if mapping == "ca":
        if all(1 <= t <= 20 for t in types):
            return "".join(_ALPHABET[t - 1] for t in types)
        return ""
    if mapping == "5bead":
        seq = []
        for pos, t in enumerate(types):
            if t == 21:
                seq.append("?")
            elif 1 <= t <= 20 and seq:
                seq[-1] = _ALPHABET[t - 1]
        return "".join(seq) if "?" not in seq else ""
    return ""


def _describe_fingerprint(mapping: str, types: Sequence[int]) -> str:
    seq = _sequence_from_types(mapping, types)
    seq = f" ({_short(seq)})" if seq else ""
    return f"a {len(types)}-bead {mapping} molecule{seq}"


# ------------------------------------------------------------------------------------------ energy functions
def compute_distances(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """|r_j - r_i| [R, n] of the pairs ``idx`` [n, 2] in positions [R, N, 3]."""
    return (pos[:, idx[:, 1]] - pos[:, idx[:, 0]]).norm(dim=-1)


def compute_angle_cos(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """cos(theta) [R, n] at the middle bead ``j`` of the triples ``idx`` [n, 3] = (i, j, k)."""
    v1 = pos[:, idx[:, 0]] - pos[:, idx[:, 1]]
    v2 = pos[:, idx[:, 2]] - pos[:, idx[:, 1]]
    return (v1 * v2).sum(-1) / (v1.norm(dim=-1) * v2.norm(dim=-1))


def compute_torsions(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """mlcg/mdtraj (IUPAC) dihedral angles.

    Parameters
    ----------
    pos : torch.Tensor, float, shape [R, N, 3]
        Positions (any length unit).
    idx : torch.LongTensor, shape [n, 4]

    Returns
    -------
    torch.Tensor, shape [R, n], radians in (-pi, pi]
        ``phi = atan2(-m . n2, n1 . n2)`` with ``b1 = r_j - r_i``, ``b2 = r_k - r_j``, ``b3 = r_l - r_k``
        normalised, ``n1 = b1 x b2``, ``n2 = b2 x b3``, ``m = n1 x b2`` (mlcg ``compute_torsions``); trans = pi.
        Same sign as OpenMM's torsion angle.
    """
    p0, p1, p2, p3 = (pos[:, idx[:, a]] for a in range(4))
    b1 = p1 - p0
    b2 = p2 - p1
    b3 = p3 - p2
    b1 = b1 / b1.norm(dim=-1, keepdim=True)
    b2 = b2 / b2.norm(dim=-1, keepdim=True)
    b3 = b3 / b3.norm(dim=-1, keepdim=True)
    n1 = torch.cross(b1, b2, dim=-1)
    n2 = torch.cross(b2, b3, dim=-1)
    m = torch.cross(n1, b2, dim=-1)
    x = (n1 * n2).sum(-1)
    y = -(m * n2).sum(-1)
    return torch.atan2(y, x)


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


# -------------------------------------------------------------------------------------- placeholder fitting
def _dihedral_tuples(mol) -> Dict[str, List[Tuple[int, int, int, int]]]:
    """mlcg's dihedral tuples for a CG molecule, keyed by dihedral type.

    5-bead mapping, residue i (inter-residue ones only when C_i-N_{i+1} is a CG bond):
    phi (C_{i-1}, N_i, CA_i, C_i), psi (N_i, CA_i, C_i, N_{i+1}), omega (CA_i, C_i, N_{i+1}, CA_{i+1}),
    gamma_1 (N_i, CB_i, C_i, CA_i) for residues with a CB, gamma_2 (CA_i, O_i, N_{i+1}, C_i).
    CA mapping: (CA_i, CA_{i+1}, CA_{i+2}, CA_{i+3}) along bonded consecutive CAs.
    """
    bonds = {(int(min(a, b)), int(max(a, b))) for a, b in np.asarray(mol.bonds).reshape(-1, 2)}

    def bonded(a, b):
        return (min(a, b), max(a, b)) in bonds

    n_res = len(mol.residues)
    beads: List[Dict[str, int]] = [dict() for _ in range(n_res)]
    for i, (name, r) in enumerate(zip(mol.bead_names, np.asarray(mol.bead_residue))):
        beads[int(r)][str(name)] = i
    out: Dict[str, List[Tuple[int, int, int, int]]] = {}
    if mol.mapping == "ca":
        ca = [b.get("CA") for b in beads]
        tup = []
        for r in range(n_res - 3):
            q = ca[r:r + 4]
            if None in q or not all(bonded(q[k], q[k + 1]) for k in range(3)):
                continue
            tup.append(tuple(q))
        out["ca_dihedral"] = tup
        return out
    if mol.mapping != "5bead":
        raise InputError(f"cannot build prior dihedrals for mapping {mol.mapping!r} (expected '5bead' or 'ca')")

    def linked(r):  # residue r peptide-bonded to r + 1
        if r < 0 or r + 1 >= n_res:
            return False
        c, n = beads[r].get("C"), beads[r + 1].get("N")
        return c is not None and n is not None and bonded(c, n)

    phi, psi, omega, g1, g2 = [], [], [], [], []
    for r in range(n_res):
        b = beads[r]
        N, CA, CB, C, O = (b.get(k) for k in ("N", "CA", "CB", "C", "O"))
        if linked(r - 1) and None not in (N, CA, C):
            phi.append((beads[r - 1]["C"], N, CA, C))
        if linked(r):
            nxt = beads[r + 1]
            if None not in (N, CA, C):
                psi.append((N, CA, C, nxt["N"]))
            if CA is not None and nxt.get("CA") is not None:
                omega.append((CA, C, nxt["N"], nxt["CA"]))
            if None not in (CA, O):
                g2.append((CA, O, nxt["N"], C))
        if None not in (N, CB, C, CA):
            g1.append((N, CB, C, CA))
    out.update(phi=phi, psi=psi, omega=omega, gamma_1=g1, gamma_2=g2)
    return out


def _angle_tuples(n_beads: int, bonds: np.ndarray) -> List[Tuple[int, int, int]]:
    """All bonded paths i-j-k of length 2 (i < k), sorted."""
    adj: List[set] = [set() for _ in range(n_beads)]
    for a, b in bonds:
        adj[int(a)].add(int(b))
        adj[int(b)].add(int(a))
    out = []
    for j in range(n_beads):
        nb = sorted(adj[j])
        for x in range(len(nb)):
            for y in range(x + 1, len(nb)):
                out.append((nb[x], j, nb[y]))
    return sorted(out)


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
    angles = _angle_tuples(n, bonds)
    if angles:
        ai = torch.tensor(angles, dtype=torch.long)
        c = compute_angle_cos(pos, ai)[0]
        terms.append(PriorTerm("angles", "harmonic_angle_cos", ai, {"x0": c, "k": torch.full_like(c, float(k_angle))}))
    for name, tuples in _dihedral_tuples(mol).items():
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


def _three_letter(mol, r: int) -> str:
    from .cg.tables import ALPHABET, STANDARD_RESIDUES

    one = {v: k for k, v in STANDARD_RESIDUES.items()}
    seq = mol.sequence() if hasattr(mol, "sequence") else None
    if seq:
        return one[seq[r]]
    return str(mol.residues[r].resname)


def mlcg_term_tuples(mol, min_graph_distance: int = REPULSION_MIN_GRAPH_DISTANCE) -> Dict[str, torch.Tensor]:
    """The tuples of each prior term of a transferable mlcg 5-bead model, for a CG molecule.

    Term names and rules are those of mlcg's published priors (checked against mlcg's own chignolin neighbour
    lists in tests/data/oracles/real/oracle_S.pt):

    * ``n_term_bonds`` / ``c_term_bonds`` / ``bulk_bonds``: CG bonds with a bead in the first / last residue of
      its chain / neither (first wins);
    * ``n_term_angles`` / ``c_term_angles`` / ``bulk_angles``: bonded paths i-j-k, classified the same way;
    * ``<RES>_phi`` (C_{i-1}, N_i, CA_i, C_i) and ``<RES>_psi`` (N_i, CA_i, C_i, N_{i+1}) by residue i's name;
    * ``pro_omega`` / ``non_pro_omega`` (CA_i, C_i, N_{i+1}, CA_{i+1}) by whether residue i+1 is proline;
    * ``gamma_1`` (N_i, CB_i, C_i, CA_i), ``gamma_2`` (CA_i, O_i, N_{i+1}, C_i);
    * ``non_bonded``: pairs at bonded-graph distance >= ``min_graph_distance`` (mlcg: 5).

    Returns
    -------
    dict name -> LongTensor [n, order]
        0-based bead indices.
    """
    if mol.mapping != "5bead":
        raise InputError(f"mlcg transferable priors need the 5-bead mapping, not {mol.mapping!r}")
    n = int(mol.n_beads)
    bead_res = np.asarray(mol.bead_residue, dtype=np.int64)
    chain = np.asarray(mol.chain_of_residue, dtype=np.int64)
    first = {c: int(np.flatnonzero(chain == c).min()) for c in np.unique(chain)}
    last = {c: int(np.flatnonzero(chain == c).max()) for c in np.unique(chain)}

    def where(beads) -> str:
        res = [int(bead_res[b]) for b in beads]
        if any(r == first[int(chain[r])] for r in res):
            return "n_term"
        if any(r == last[int(chain[r])] for r in res):
            return "c_term"
        return "bulk"

    out: Dict[str, List[Tuple[int, ...]]] = {}
    bonds = np.asarray(mol.bonds, dtype=np.int64).reshape(-1, 2)
    for a, b in bonds:
        out.setdefault(f"{where((a, b))}_bonds", []).append((int(a), int(b)))
    for t in _angle_tuples(n, bonds):
        out.setdefault(f"{where(t)}_angles", []).append(t)
    dih = _dihedral_tuples(mol)
    for t in dih["phi"]:
        out.setdefault(f"{_three_letter(mol, int(bead_res[t[1]]))}_phi", []).append(t)
    for t in dih["psi"]:
        out.setdefault(f"{_three_letter(mol, int(bead_res[t[0]]))}_psi", []).append(t)
    for t in dih["omega"]:
        pro = _three_letter(mol, int(bead_res[t[3]])) == "PRO"
        out.setdefault("pro_omega" if pro else "non_pro_omega", []).append(t)
    out["gamma_1"], out["gamma_2"] = list(dih["gamma_1"]), list(dih["gamma_2"])
    far = int(min_graph_distance)
    gd = np.asarray(mol.bond_graph_distances(max_distance=far))
    iu, ju = np.triu_indices(n, 1)
    sel = gd[iu, ju] >= far
    out["non_bonded"] = list(zip(iu[sel].tolist(), ju[sel].tolist()))
    def order(name: str) -> int:
        return 2 if name.endswith("_bonds") or name == "non_bonded" else 3 if name.endswith("_angles") else 4

    return {k: torch.tensor(v, dtype=torch.long).reshape(-1, order(k)) for k, v in out.items()}


def load_priors(path) -> PriorSet:
    """Read a prior file: a flashschnet prior set (``PriorSet.to_dict()`` saved with ``torch.save``) or an
    mlcg prior export (``mlcg_prior_cln.pt`` layout). Read with ``weights_only=True``; errors are one-line
    :class:`~flashschnet.errors.InputError` naming the file."""
    path = os.fspath(path)
    d = load_plain(path, "prior")
    try:
        if str(d.get("format", "")).startswith("mlcg-prior-oracle"):
            return PriorSet.from_mlcg_oracle(d)
        return PriorSet.from_dict(d)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise InputError(f"{path}: malformed prior file ({type(exc).__name__}: {str(exc)[:120]})") from None


def save_priors(prior_set: PriorSet, path) -> None:
    """Write ``prior_set`` for :func:`load_priors`."""
    torch.save(prior_set.to_dict(), path)
