"""Data model of the mlcg prior terms: :class:`PriorTerm` (one functional form over a list of bead tuples) and
:class:`PriorSet` (all terms of one prior, with units, the fingerprint of the CG molecule it was made for,
plain-dict (de)serialization and the check that a prior applies to a given CG molecule).

Parameters are stored as float64 tensors in mlcg's units: positions/lengths in Angstrom, energies in kcal/mol
(see :mod:`flashschnet.priors` for the functional form of each kind). Bead indices are 0-based ``torch.long``.

This module never imports openmm.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import InputError

__all__ = ["KINDS", "PriorTerm", "PriorSet"]

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

