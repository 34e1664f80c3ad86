"""What :func:`flashschnet.load_model` returns: the network together with what its file carries beside it.

A checkpoint holds more than the network's weights -- its priors (per tuple, or as type tables of a converted
transferable mlcg model), free-form metadata and the path it came from. :class:`LoadedModel` keeps them
together as named fields, so nothing is bolted onto the ``nn.Module`` and every consumer (``build_system``,
OpenMM-ML, training, the command-line tools) reads the same fields.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import torch

from .fused.engine import running_engine
from .nn.schnet import CGSchNet

if TYPE_CHECKING:
    from .priors import PriorSet


@dataclass
class LoadedModel:
    """A CGSchNet with its priors and metadata.

    Attributes
    ----------
    network : CGSchNet
        The network (in eval mode), in the model's units (``network.units``; mlcg: Angstrom, kcal/mol).
    priors : PriorSet or None
        Per-tuple prior terms for the structure the model was made for.
    prior_tables : list of dict or None
        Type-indexed prior tables of a converted transferable mlcg model; :meth:`priors_for` applies them to a
        molecule.
    metadata : dict
        Free-form description (``description``, ``placeholder``, ``source``, ...).
    source_path : str or None
        The file it was read from (for messages).
    notes : list of str
        What making it did that its user should hear of (:func:`flashschnet.options.prepare_model`: the filter
        tables chosen by default and how to opt out, a cache entry rebuilt); front ends print each as a
        ``note:`` line. Empty for a model as its file stores it.
    """

    network: CGSchNet
    priors: Optional["PriorSet"] = None
    prior_tables: Optional[List[Dict[str, Any]]] = None
    metadata: Dict[str, Any] = field(default_factory=dict)
    source_path: Optional[str] = None
    notes: List[str] = field(default_factory=list)

    # -- the network's own description ------------------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        """The network's hyper-parameters (a fresh dict)."""
        return self.network.config

    @property
    def units(self) -> Dict[str, str]:
        """``{"length": ..., "energy": ...}`` of the network and of :meth:`energy_forces`."""
        return self.network.units

    @property
    def backend(self) -> str:
        """The network's backend (see :mod:`flashschnet.backends`): what was asked for."""
        return self.network.backend

    @property
    def engine(self) -> str:
        """The engine a step runs where the network's weights are, in their dtype: what :attr:`backend` asked for,
        except "torch" for backend "triton" with exact products on CUDA
        (:func:`flashschnet.fused.engine.running_engine`, which also takes another device)."""
        return running_engine(self.network)

    # -- computing -----------------------------------------------------------------------------------------
    def energy_forces(self, positions: torch.Tensor, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The network's energies ``[R]`` and forces ``[R, N, 3]`` in the model's units (priors not included;
        see :meth:`CGSchNet.energy_forces`)."""
        return self.network.energy_forces(positions, bead_types)

    def to(self, *args, **kwargs) -> "LoadedModel":
        """Move or convert the network in place (as ``nn.Module.to``); returns self."""
        self.network.to(*args, **kwargs)
        return self

    def with_network(self, network: CGSchNet) -> "LoadedModel":
        """A LoadedModel with another network (e.g. quantized) and copies of the priors, tables and metadata
        (changing one model's never changes the other's)."""
        return replace(self, network=network, priors=copy.deepcopy(self.priors),
                       prior_tables=copy.deepcopy(self.prior_tables), metadata=copy.deepcopy(self.metadata),
                       notes=list(self.notes))

    # -- priors --------------------------------------------------------------------------------------------
    def priors_for(self, mol) -> Optional["PriorSet"]:
        """The priors this model brings for the CG molecule ``mol``: its per-tuple :attr:`priors`, else its
        type tables applied to ``mol``, else None."""
        if self.priors is not None:
            return self.priors
        if self.prior_tables and mol is not None:
            from .priors import priors_for_molecule

            return priors_for_molecule(self.prior_tables, mol, self.source_path or "the model")
        return None

    def check_bead_types(self, bead_types, source: str = "the structure") -> None:
        """Raise :class:`~flashschnet.errors.InputError` if a bead type is outside the network's table."""
        self.network.check_bead_types(bead_types, source)


def as_loaded(model) -> LoadedModel:
    """``model`` as a :class:`LoadedModel`: a LoadedModel as it is, a bare CGSchNet with no priors."""
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, CGSchNet):
        return LoadedModel(network=model)
    raise TypeError(f"expected a flashschnet LoadedModel (flashschnet.load_model) or CGSchNet, got "
                    f"{type(model).__name__}")
