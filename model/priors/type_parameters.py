"""Type-indexed prior tables (a converted transferable mlcg model's ``prior_tables``) applied to a molecule.

mlcg's transferable models keep their priors as parameter tables indexed by bead type, not per tuple;
:func:`priors_for_molecule` builds the molecule's tuples of each term (:func:`~flashschnet.priors.tuples.
mlcg_term_tuples`, mlcg's own rules) and looks their parameters up (:func:`specialize_prior_tables`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from ..errors import InputError
from .terms import PriorSet, PriorTerm
from .tuples import mlcg_term_tuples


def specialize_prior_tables(tables: List[Dict[str, Any]], tuples: Dict[str, torch.Tensor],
                            bead_types: torch.Tensor, mapping: Optional[str] = None,
                            description: str = "") -> PriorSet:
    """Type-table priors -> a PriorSet for one molecule.

    Parameters
    ----------
    tables : list of dict
        ``prior_tables`` of a converted checkpoint: ``{"name", "kind", "order", "tables"}`` with ``tables`` the
        sparse form written by :mod:`flashschnet.convert` (type keys [nnz, order] and the parameters there).
    tuples : dict name -> LongTensor [n, order]
        The molecule's tuples of each term (0-based bead indices); terms without an entry or with none are
        dropped.
    bead_types : LongTensor [N]
    mapping : str, optional
        The CG mapping of the molecule (``"5bead"``, ``"ca"``), recorded in the prior set's fingerprint.

    Returns
    -------
    PriorSet
        Per-tuple parameters looked up as ``table[t_i, t_j, ...]`` (mlcg's tuple indexing).
    """
    terms = []
    types = torch.as_tensor(bead_types).long()
    for t in tables:
        idx = tuples.get(t["name"])
        if idx is None or len(idx) == 0:
            continue
        order, tab = t["order"], t["tables"]
        idx = torch.as_tensor(idx).long().reshape(-1, order)
        T = int(tab["n_types"])
        tt = types[idx]
        if int(tt.max()) >= T:
            raise InputError(f"prior term {t['name']!r}: bead type {int(tt.max())} is outside its {T} types")
        weights = T ** torch.arange(order - 1, -1, -1)
        codes = (tab["keys"].long() * weights).sum(1)                 # sorted (nonzero() is row-major)
        want = (tt * weights).sum(1)
        pos = torch.searchsorted(codes, want).clamp(max=max(len(codes) - 1, 0))
        found = (codes[pos] == want) if len(codes) else torch.zeros(len(want), dtype=torch.bool)
        params = {}
        for name, v in tab["params"].items():
            got = v[pos] if len(codes) else torch.zeros((len(want),) + tuple(v.shape[1:]), dtype=torch.float64)
            mask = found.reshape((-1,) + (1,) * (got.dim() - 1))
            params[name] = torch.where(mask, got, torch.zeros_like(got))   # a missing key is 0, as in mlcg
        terms.append(PriorTerm(name=t["name"], kind=t["kind"], indices=idx, params=params))
    return PriorSet(terms=terms, n_beads=len(types), units={"length": "angstrom", "energy": "kcal/mol"},
                    fingerprint=(mapping, types.tolist()) if mapping else None, description=description)


#: term names :func:`flashschnet.priors.mlcg_term_tuples` knows how to build tuples for
def _known_term(name: str) -> bool:
    from ..cg.residue_data import STANDARD_RESIDUES

    fixed = {f"{w}_{k}" for w in ("n_term", "bulk", "c_term") for k in ("bonds", "angles")}
    fixed |= {"pro_omega", "non_pro_omega", "gamma_1", "gamma_2", "non_bonded"}
    fixed |= {f"{r}_{a}" for r in STANDARD_RESIDUES for a in ("phi", "psi")}
    return name in fixed


def priors_for_molecule(tables: List[Dict[str, Any]], mol, source: str = "the model") -> PriorSet:
    """A transferable mlcg model's type-table priors applied to a CG molecule (5-bead mapping): the tuples of
    each term from :func:`flashschnet.priors.mlcg_term_tuples`, the parameters from the tables.

    Raises :class:`InputError` when a table's name is not one whose tuples we know how to build, or when the
    molecule needs a term the model does not have (e.g. a residue type it was not trained with).
    """
    unknown = [t["name"] for t in tables if not _known_term(t["name"])]
    if unknown:
        raise InputError(f"{source}: prior term(s) {', '.join(unknown[:5])} follow no naming this converter knows "
                         "(n_term/bulk/c_term_bonds|angles, RES_phi|psi, pro_omega, non_pro_omega, gamma_1, gamma_2, "
                         "non_bonded); cannot tell which beads they act on")
    tuples = mlcg_term_tuples(mol)
    have = {t["name"] for t in tables}
    missing = sorted(k for k, v in tuples.items() if len(v) and k not in have)
    if missing:
        raise InputError(f"{source}: has no prior for {', '.join(missing[:5])} needed by {mol.source or 'the molecule'} "
                         "(a residue or term the model was not trained with)")
    return specialize_prior_tables(tables, tuples, torch.as_tensor(mol.bead_types), mapping=mol.mapping,
                                   description=f"type-table priors of {source} applied to {mol.source or 'the molecule'}")
