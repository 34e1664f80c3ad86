"""The model options: how a CGSchNet model file becomes the network a run computes with.

:class:`ModelOptions` holds every choice that changes the network (its implementation, arithmetic, weight
storage, filter tables and step replay), :meth:`ModelOptions.validate` checks them in one place, and
:func:`prepare_model` applies them in one order::

    load (backend, precision, device, skin, matmul, cuda_graph) -> compress (filter tables) -> quantize (16-bit weights)

Every front end goes through them: ``flashschnet-simulate`` (:mod:`flashschnet.openmm.simulate`), the OpenMM-ML
potential (:mod:`flashschnet.openmm.mlpotential`), the benchmark worker and the device checks. Messages name the
fields as Python spells them; a front end passes its own spellings (``--compress-knots``, ``compressKnots``) to
:meth:`~ModelOptions.validate`. How OpenMM calls the network (TorchForce or PythonForce) is not a model option: it
belongs to :mod:`flashschnet.openmm.force`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Mapping, Optional

import torch

from .errors import InputError
from .names import BACKENDS, COMPRESSIONS, MATMULS, PRECISIONS, VARIANTS


@dataclass
class ModelOptions:
    """The options that decide the network a model file becomes (all optional; the defaults compute exactly).

    Attributes
    ----------
    backend : str or None
        Implementation of energies and forces, one of :data:`flashschnet.names.BACKENDS` ("reference", "torch",
        "triton"); None (default): triton on CUDA, torch otherwise (:func:`flashschnet.backends.resolve_backend`).
    precision : str
        Network arithmetic, "single" (float32, default) or "double" (float64).
    quantize : str
        16-bit filter- and output-network weights, a variant of :data:`flashschnet.names.VARIANTS`: "none"
        (default), "fp16", "bf16" (float32 scale per output channel), "fp16-cast", "bf16-cast" (plain cast);
        see :func:`flashschnet.quantize`.
    compress : str
        Every block's filter network replaced by a table of the pair distance stored as "float32", "float16" or
        "bfloat16"; "none" (default): the exact filters. Applied before ``quantize``; see :func:`flashschnet.compress`.
    compress_knots : int or None
        Knots per filter table, an integer >= 4, only with ``compress``; None (default): 256
        (:data:`flashschnet.names.DEFAULT_KNOTS`).
    matmul : str
        Precision of the triton backend's filter-network products, one of :data:`flashschnet.names.MATMULS`:
        "auto" (default), "ieee", "tf32", "bf16", "fp16"; the other backends compute exactly.
    cuda_graph : bool
        Replay each step of a fused backend on CUDA as a CUDA graph (speed only; default False).
    skin : float or None
        Verlet skin of the fused backends' neighbour lists in the model's length unit (Angstrom for mlcg models),
        >= 0 (speed only); None (default): a fraction of the cutoff (:data:`flashschnet.config.DEFAULT_SKIN_FRACTION`).
    """

    backend: Optional[str] = None
    precision: str = "single"
    quantize: str = "none"
    compress: str = "none"
    compress_knots: Optional[int] = None
    matmul: str = "auto"
    cuda_graph: bool = False
    skin: Optional[float] = None

    @classmethod
    def of(cls, settings) -> "ModelOptions":
        """The model options among the attributes of ``settings`` (e.g. a run's settings); those it lacks keep
        their defaults."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls) if hasattr(settings, f.name)})

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype of :attr:`precision`."""
        return getattr(torch, PRECISIONS[self.precision])

    def validate(self, names: Optional[Mapping[str, str]] = None) -> None:
        """Raise a one-line :class:`~flashschnet.errors.InputError` naming the first bad option.

        ``names``: a front end's spelling of the fields (e.g. ``{"compress_knots": "--compress-knots"}``); a field
        it does not list is named as it is. The knots' upper bound and the tables' accuracy are checked when the
        tables are made (:func:`flashschnet.compress`)."""
        name = (lambda field: names.get(field, field)) if names else (lambda field: field)

        def one_of(field: str, allowed, extra: str = "") -> None:
            value = getattr(self, field)
            if value not in allowed:
                raise InputError(f"{name(field)} must be one of {', '.join(allowed)}{extra}, got {value!r}")

        if self.backend is not None:
            one_of("backend", BACKENDS, " (or None: triton on CUDA, torch otherwise)")
        if self.precision not in PRECISIONS:
            raise InputError(f"{name('precision')} must be {' or '.join(PRECISIONS)}, got {self.precision!r}")
        one_of("quantize", VARIANTS)
        one_of("compress", COMPRESSIONS)
        knots = self.compress_knots
        if knots is not None:
            if isinstance(knots, bool) or not isinstance(knots, int) or knots < 4:
                raise InputError(f"{name('compress_knots')} must be an integer >= 4, got {knots!r}")
            if self.compress == "none":
                raise InputError(f"{name('compress_knots')} needs a compression: pass {name('compress')} float32, "
                                 "float16 or bfloat16")
        one_of("matmul", MATMULS)
        if not isinstance(self.cuda_graph, bool):
            raise InputError(f"{name('cuda_graph')} must be True or False, got {self.cuda_graph!r}")
        skin = self.skin
        if skin is not None and (isinstance(skin, bool) or not isinstance(skin, (int, float))
                                 or not (math.isfinite(skin) and skin >= 0.0)):
            raise InputError(f"{name('skin')} must be a non-negative length (model unit) or None, got {skin!r}")


def prepare_model(source, options: Optional[ModelOptions] = None, device="cpu"):
    """The network of ``source`` as ``options`` make it: loaded, compressed, then quantized.

    Parameters
    ----------
    source : str, PathLike, LoadedModel or CGSchNet
        A model file (a flashschnet checkpoint or an mlcg export, read with ``weights_only=True``), or a model in
        memory: its hyper-parameters, units, weights, priors and metadata are taken, its backend, dtype, device and
        the other options are ``options``' (it is not modified).
    options : ModelOptions or None
        Validated first (messages name the fields); None: the defaults.
    device : str or torch.device
        Where the network runs (``"cpu"``, ``"cuda"``); also chooses the default backend.

    Returns
    -------
    LoadedModel
        A new model: the network in eval mode and what its file carries (priors, prior tables, metadata).
    """
    from .checkpoint import build_model, load_model
    from .loaded import as_loaded
    from .transforms import apply_compression, apply_variant

    options = options if options is not None else ModelOptions()
    options.validate()
    build = dict(backend=options.backend, dtype=options.dtype, device=device, skin=options.skin,
                 matmul=options.matmul, cuda_graph=bool(options.cuda_graph))
    if isinstance(source, (str, os.PathLike)):
        model = load_model(source, **build)
    else:
        given = as_loaded(source)
        net = given.network
        ckpt = {"config": net.config, "units": net.units, "state_dict": net.state_dict()}
        model = given.with_network(build_model(ckpt, given.source_path or "<model>", **build))
    return apply_variant(apply_compression(model, options.compress, options.compress_knots), options.quantize)
