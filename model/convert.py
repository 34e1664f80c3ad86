"""mlcg pickled models -> our checkpoint, without mlcg (``flashschnet-convert``).

Input: a ``torch.save``'d mlcg ``SumOut`` of ``GradientsOut`` modules (``model_and_prior.pt``: one
``StandardSchNet`` plus prior terms), or a tuple ``(SumOut, configurations)`` (mlcg.simulation's "specialized
model and config" file). It is read by :mod:`flashschnet.mlcg_pickle` (stubs only, no code from the file).

Output: our checkpoint (``format_version`` 1): the network's hyper-parameters and weights (mlcg's own
parameter and buffer values, e.g. the stored ExpNormal means/betas), units (Angstrom, kcal/mol), and the priors:

* specialized files (``Static*`` terms, per-tuple parameters, tuples in the stored configurations): a
  :class:`~flashschnet.priors.PriorSet` for the first stored structure, which the OpenMM system builder adds as
  native forces;
* type-table priors (``GeneralBonds``, ``GeneralAngles``, ``Dihedral``, ``Repulsion`` with parameters indexed by
  bead type) as ``prior_tables`` (dense float64 tables per term) -- mlcg keeps no tuples in these files;
  :func:`flashschnet.priors.specialize_prior_tables` turns them into a PriorSet given each term's tuples.

Every term class is dispatched on its class, never on its (free-form) name; an unknown class is refused with
a one-line error naming it.
"""
from __future__ import annotations

import os
from typing import Any, Dict

import torch

from .errors import InputError
from .mlcg_pickle import Stub, read_pickle
from .priors import PriorSet, PriorTerm, specialize_prior_tables

SCHNET = "mlcg.nn.schnet.StandardSchNet"
GRADIENTS_OUT = "mlcg.nn.gradients.GradientsOut"
SUM_OUT = "mlcg.nn.gradients.SumOut"

#: mlcg prior classes -> our kind
STATIC_KINDS = {
    "mlcg.simulation.specialize_prior.StaticGeneralBonds": "harmonic_bond",
    "mlcg.simulation.specialize_prior.StaticHarmonicBonds": "harmonic_bond",
    "mlcg.simulation.specialize_prior.StaticGeneralAngles": "harmonic_angle_cos",
    "mlcg.simulation.specialize_prior.StaticHarmonicAngles": "harmonic_angle_cos",
    "mlcg.simulation.specialize_prior.StaticDihedral": "dihedral_fourier",
}
TABLE_KINDS = {
    "mlcg.nn.prior.harmonic.GeneralBonds": "harmonic_bond",
    "mlcg.nn.prior.harmonic.HarmonicBonds": "harmonic_bond",
    "mlcg.nn.prior.harmonic.GeneralAngles": "harmonic_angle_cos",
    "mlcg.nn.prior.harmonic.HarmonicAngles": "harmonic_angle_cos",
    "mlcg.nn.prior.fourier_series.Dihedral": "dihedral_fourier",
    "mlcg.nn.prior.repulsion.Repulsion": "repulsion",
}
ORDER = {"harmonic_bond": 2, "harmonic_angle_cos": 3, "dihedral_fourier": 4, "repulsion": 2}


def _tensors(stub: Stub, prefix: str = "") -> Dict[str, torch.Tensor]:
    """mlcg's state_dict of a module stub: parameters and buffers, recursively, with dotted names."""
    out: Dict[str, torch.Tensor] = {}
    for kind in ("_parameters", "_buffers"):
        for name, t in (stub.attr(kind) or {}).items():
            if isinstance(t, torch.Tensor):
                out[prefix + name] = t
    for name, child in stub.modules.items():
        if isinstance(child, Stub):
            out.update(_tensors(child, prefix + name + "."))
    return out


def _cutoff(stub, where: str) -> Dict[str, Any]:
    if isinstance(stub, (int, float)):
        return {"class": "mlcg.nn.cutoff.CosineCutoff", "cutoff_lower": 0.0, "cutoff_upper": float(stub)}
    if not isinstance(stub, Stub):
        raise InputError(f"{where}: cut-off is a {type(stub).__name__}, expected an mlcg cut-off module")
    return {"class": stub.cls, "cutoff_lower": float(stub.attr("cutoff_lower")),
            "cutoff_upper": float(stub.attr("cutoff_upper"))}


def _schnet_export(net: Stub, path: str) -> Dict[str, Any]:
    """The mlcg-export dict (``hyperparameters`` + ``state_dict``, mlcg names) of a StandardSchNet stub."""
    m = net.modules
    try:
        blocks = [b for _, b in sorted(m["interaction_blocks"].modules.items(), key=lambda kv: int(kv[0]))]
        conv = blocks[0].modules["conv"]
        out_layers = [l for _, l in sorted(m["output_network"].modules["layers"].modules.items(),
                                           key=lambda kv: int(kv[0]))]
        linears = [l for l in out_layers if l.cls.endswith(".Linear")]
        acts = {l.cls for l in out_layers if not l.cls.endswith(".Linear")} | {blocks[0].modules["activation"].cls}
        rbf = m["rbf_layer"]
        hp = {
            "hidden_channels": int(m["embedding_layer"].attr("embedding_dim")),
            "embedding_size": int(m["embedding_layer"].attr("num_embeddings")),
            "num_filters": int(conv.modules["lin1"].attr("out_features")),
            "num_interactions": len(blocks),
            "output_hidden_layer_widths": [int(l.attr("out_features")) for l in linears[:-1]],
            "activation": {"class": acts.pop() if len(acts) == 1 else "mixed"},
            "aggr": conv.attr("aggr", "add"),
            "rbf_layer": {"class": rbf.cls, "num_rbf": int(rbf.attr("num_rbf")),
                          "cutoff": _cutoff(rbf.modules.get("cutoff", rbf.attr("cutoff")), path)},
            "cutoff": _cutoff(conv.modules.get("cutoff"), path),
        }
        if rbf.attr("alpha") is not None:
            hp["rbf_layer"]["alpha"] = float(rbf.attr("alpha"))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise InputError(f"{path}: the StandardSchNet in this file lacks {exc} (an mlcg version this converter "
                         "does not know)") from None
    if hp["activation"]["class"] not in ("torch.nn.modules.activation.Tanh",):
        raise InputError(f"{path}: activation {hp['activation']['class']!r} is not supported (mlcg's default Tanh is)")
    if bool(net.attr("self_interaction", False)):
        raise InputError(f"{path}: StandardSchNet with self_interaction=True is not supported")
    hp["activation"]["class"] = "torch.nn.Tanh"
    return {"hyperparameters": hp, "state_dict": _tensors(net)}


def _static_term(name: str, kind: str, prior: Stub, index: torch.Tensor, path: str) -> PriorTerm:
    """A PriorSet term from a Static* prior: the first ``n`` parameter rows belong to the first structure."""
    b = prior.buffers
    n = index.shape[1]
    idx = index.t().contiguous().long()
    if kind == "dihedral_fourier":
        k1, k2, v0 = (b[k].double()[:n] for k in ("k1s", "k2s", "v_0"))
        params = {"k1s_sin": k1, "k2s_cos": k2, "v0": v0[:, 0] if v0.dim() == 2 else v0}
    else:
        v0 = b.get("V0")
        if v0 is not None and bool((v0.double()[:n] != 0).any()):
            raise InputError(f"{path}: prior term {name!r} has a non-zero offset V0, which our forces do not carry")
        params = {"x0": b["x0"].double()[:n], "k": b["k"].double()[:n]}
    return PriorTerm(name=name, kind=kind, indices=idx, params=params)


def _table(prior: Stub, kind: str) -> Dict[str, Any]:
    """A type-indexed prior table in sparse form: the type keys with any non-zero parameter and the values
    there (mlcg: a missing key means 0). ``{"n_types", "keys" [nnz, order], "params" {name: [nnz(, D)]}}``."""
    b = prior.buffers
    if kind == "dihedral_fourier":
        dense = {"k1s_sin": b["k1s"].double().movedim(0, -1), "k2s_cos": b["k2s"].double().movedim(0, -1),
                 "v0": b["v_0"].double()}
        nz = (dense["k1s_sin"] != 0).any(-1) | (dense["k2s_cos"] != 0).any(-1) | (dense["v0"] != 0)
    elif kind == "repulsion":
        dense = {"sigma": b["sigma"].double()}
        nz = dense["sigma"] != 0
    else:
        dense = {"x0": b["x_0"].double(), "k": b["k"].double()}
        nz = (dense["x0"] != 0) | (dense["k"] != 0)
    keys = nz.nonzero()
    return {"n_types": int(nz.shape[0]), "keys": keys,
            "params": {name: v[tuple(keys.t())].clone() for name, v in dense.items()}}


def convert_mlcg(path) -> Dict[str, Any]:
    """Read an mlcg pickled model; return our checkpoint dict (see the module docstring)."""
    from .checkpoint import mlcg_export_to_checkpoint

    path = os.fspath(path)
    obj, _ = read_pickle(path)
    configurations = None
    if isinstance(obj, tuple) and len(obj) == 2:
        obj, configurations = obj
    if not isinstance(obj, Stub) or obj.cls != SUM_OUT:
        what = obj.cls if isinstance(obj, Stub) else type(obj).__name__
        raise InputError(f"{path}: holds {what}, not an mlcg SumOut model (model_and_prior.pt)")
    terms = obj.modules.get("models")
    if not isinstance(terms, Stub):
        raise InputError(f"{path}: the SumOut has no models")
    nets, priors = [], []
    for key, grad in terms.modules.items():
        inner = grad.modules.get("model") if isinstance(grad, Stub) and grad.cls == GRADIENTS_OUT else None
        if inner is None:
            raise InputError(f"{path}: term {key!r} is a {getattr(grad, 'cls', type(grad).__name__)}, not an mlcg GradientsOut")
        if inner.cls == SCHNET:
            nets.append((key, inner))
        elif inner.cls in STATIC_KINDS or inner.cls in TABLE_KINDS:
            priors.append((key, inner))
        else:
            raise InputError(f"{path}: term {key!r} is a {inner.cls}, which this converter does not know "
                             f"(known: StandardSchNet, {', '.join(sorted(c.rsplit('.', 1)[-1] for c in {**STATIC_KINDS, **TABLE_KINDS}))})")
    if len(nets) != 1:
        raise InputError(f"{path}: expected one StandardSchNet term, found {len(nets)}")

    export = _schnet_export(nets[0][1], path)
    # the structure(s) a specialized file carries
    structure = None
    if configurations:
        first = configurations[0]
        store = first.attr("_store") if isinstance(first, Stub) else None
        mapping = store.attr("_mapping") if isinstance(store, Stub) else None
        if not isinstance(mapping, dict):
            raise InputError(f"{path}: the stored configurations are not mlcg AtomicData")
        structure = mapping
        export["bead_types"] = mapping["atom_types"].long()
    ckpt = mlcg_export_to_checkpoint(export, path)
    ckpt["metadata"].update({"description": f"mlcg model {os.path.basename(path)} (converted by flashschnet-convert)",
                             "source": "mlcg pickle", "source_file": os.path.basename(path)})

    static_terms, tables = [], []
    for key, prior in priors:
        if prior.cls in STATIC_KINDS or (prior.cls in TABLE_KINDS and structure is not None):
            if structure is None:
                raise InputError(f"{path}: specialized prior {key!r} without stored configurations")
            nl = structure.get("neighbor_list", {}).get(key)
            if nl is None:
                raise InputError(f"{path}: no neighbour list {key!r} in the stored configurations")
            index = nl["index_mapping"].long()
            kind = STATIC_KINDS.get(prior.cls) or TABLE_KINDS[prior.cls]
            if prior.cls in STATIC_KINDS:
                static_terms.append(_static_term(key, kind, prior, index, path))
            else:
                tab = [{"name": key, "kind": kind, "order": ORDER[kind], "tables": _table(prior, kind)}]
                static_terms.extend(specialize_prior_tables(tab, {key: index.t()}, structure["atom_types"]).terms)
        else:
            kind = TABLE_KINDS[prior.cls]
            tables.append({"name": key, "kind": kind, "order": ORDER[kind], "tables": _table(prior, kind)})
    if static_terms:
        types = structure["atom_types"].long()
        mapping = ckpt["config"].get("cg_mapping")
        ckpt["priors"] = PriorSet(terms=static_terms, n_beads=len(types),
                                  units={"length": "angstrom", "energy": "kcal/mol"},
                                  fingerprint=(mapping, types.tolist()) if mapping else None,
                                  description=f"priors of {os.path.basename(path)} for its first stored structure").to_dict()
    if tables:
        ckpt["prior_tables"] = tables
    return ckpt
