"""The model options: how a CGSchNet model file becomes the network a run computes with.

:class:`ModelOptions` holds every choice that changes the network (its implementation, arithmetic, weight
storage, filter tables and step replay), :meth:`ModelOptions.validate` checks them in one place, and
:func:`prepare_model` applies them in one order::

    load (backend, precision, device, skin, matmul, cuda_graph) -> compress (filter tables) -> quantize (16-bit weights)

**The default network is the fastest accurate one.** ``compress="auto"`` (the default) is decided by
:func:`resolve_compression`, the one place that choice is written: float32 filter tables
(:data:`flashschnet.names.AUTO_TABLES`) where a fused backend (``torch``, ``triton``) computes in float32 -- their
error against float64 is float32 rounding's (docs/compression.md) and they are several times faster -- and the exact
filter network where the user asked for something the tables would replace or that wants exact filters:
``backend="reference"`` (mlcg's autograd path), ``precision="double"``, 16-bit filter weights (``quantize``) or a
product precision (``matmul`` other than "auto"). ``compress="none"`` opts out. A model file's tables are built once
and cached by the file's sha256 (:mod:`flashschnet.tablecache`); :func:`default_network` applies the same choice to
a model in memory (``flashschnet.openmm.build_system``). :func:`flashschnet.load_model` itself returns the model as
its file stores it (exact): the parity tests against mlcg and every caller that wants the stored network use it.

Every front end goes through them: ``flashschnet-simulate`` (:mod:`flashschnet.openmm.simulate`), the OpenMM-ML
potential (:mod:`flashschnet.openmm.mlpotential`), the benchmark worker and the device checks. Messages name the
fields as Python spells them; a front end passes its own spellings (``--compress-knots``, ``compressKnots``) to
:meth:`~ModelOptions.validate`. How OpenMM calls the network (TorchForce or PythonForce) is not a model option: it
belongs to :mod:`flashschnet.openmm.force`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace
from typing import Mapping, Optional

import torch

from .errors import InputError
from .names import AUTO_TABLES, BACKENDS, COMPRESSIONS, DEFAULT_KNOTS, MATMULS, PRECISIONS, VARIANTS


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
        "bfloat16"; "none": the exact filters; "auto" (default): float32 tables or the exact filters, as
        :func:`resolve_compression` decides. Applied before ``quantize``; see :func:`flashschnet.compress`.
    compress_knots : int or None
        Knots per filter table, an integer >= 4, only with tables; None (default): 256
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
    compress: str = "auto"
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
        one_of("matmul", MATMULS)
        knots = self.compress_knots
        if knots is not None:
            if isinstance(knots, bool) or not isinstance(knots, int) or knots < 4:
                raise InputError(f"{name('compress_knots')} must be an integer >= 4, got {knots!r}")
            if resolve_compression(self) == "none":
                why = "" if self.compress == "none" else f" ({name('compress')} auto runs the exact filters here)"
                raise InputError(f"{name('compress_knots')} needs a compression{why}: pass {name('compress')} "
                                 "float32, float16 or bfloat16")
        if not isinstance(self.cuda_graph, bool):
            raise InputError(f"{name('cuda_graph')} must be True or False, got {self.cuda_graph!r}")
        skin = self.skin
        if skin is not None and (isinstance(skin, bool) or not isinstance(skin, (int, float))
                                 or not (math.isfinite(skin) and skin >= 0.0)):
            raise InputError(f"{name('skin')} must be a non-negative length (model unit) or None, got {skin!r}")


def resolve_compression(options: ModelOptions) -> str:
    """The filter tables ``options`` ask for: ``options.compress`` unless it is "auto", then
    :data:`~flashschnet.names.AUTO_TABLES` ("float32") or "none".

    "auto" gives float32 tables where a fused backend (``backend`` None, "torch" or "triton") computes in
    float32 (``precision`` "single") with the exact weights of the file (``quantize`` "none") and default products
    (``matmul`` "auto"); otherwise the exact filter network: the reference backend is mlcg's own computation,
    double precision asks for exact arithmetic, and 16-bit filter weights or a product precision are settings of
    the filter network that tables would replace. The one place this choice is made (every front end, the
    benchmark's default rows and :func:`default_network` call it).

    Parameters
    ----------
    options : ModelOptions
        Not validated here (an unknown ``compress`` is returned as it is, for :meth:`ModelOptions.validate`).

    Returns
    -------
    str
        "none", "float32", "float16" or "bfloat16".
    """
    if options.compress != "auto":
        return options.compress
    fused = options.backend in (None, "torch", "triton")
    plain = options.precision == "single" and options.quantize == "none" and options.matmul == "auto"
    return AUTO_TABLES if fused and plain else "none"


def _say(names: Optional[Mapping[str, str]], field: str) -> str:
    return (names or {}).get(field, field)


def _tabulated(model, compress: str, knots: Optional[int], path: Optional[str], sha256: Optional[str],
               tables, by_default: bool, names: Optional[Mapping[str, str]]):
    """``model`` with ``compress`` tables (shipped ``tables``, else the cache's for a file's ``sha256``, else built
    now) and the notes to print; under "auto" a model whose tables miss their error bound keeps the exact filters
    (a note says so) instead of failing."""
    from .tablecache import cached_tables
    from .transforms import DEFAULT_KIND

    knots = DEFAULT_KNOTS if knots is None else knots
    spec = {"kind": DEFAULT_KIND, "knots": int(knots), "dtype": compress}
    opt_out = f"{_say(names, 'compress')} none for the exact filter network"
    try:
        if tables is not None:
            if tables.spec != spec:
                raise InputError(f"the tables given ({tables.spec}) are not the ones asked for ({spec})")
            found = tables
        else:
            found = cached_tables(model.network, spec, sha256=sha256, source=path)
        made = found.apply(model)
    except InputError as exc:
        if not by_default or tables is not None:
            raise
        why = str(exc).split("; use more knots")[0]          # (the advice is for an explicit compress)
        return replace(model, notes=model.notes + [f"network: the exact filter network ({compress} filter tables by "
                                                   f"default, but {why})"])
    made.notes.extend(found.notes)
    if by_default:
        made.notes.append(f"network: {compress} filter tables by default ({spec['kind']}, {knots} knots; "
                          f"{found.origin}); {opt_out}")
    return made


def default_network(model, compress: str = "auto", knots: Optional[int] = None):
    """A model in memory as the default path runs it: with filter tables where :func:`resolve_compression` chooses
    them for the model's backend, arithmetic, weights and products (``compress`` "auto"), as given otherwise.

    Parameters
    ----------
    model : LoadedModel or CGSchNet
        A model in memory (e.g. :func:`flashschnet.load_model`'s; it is not modified). One already compressed is
        returned as it is.
    compress : str
        "auto" (default), "none" (the model as given), or a table dtype ("float32", "float16", "bfloat16").
    knots : int or None
        Knots per table; None: :data:`flashschnet.names.DEFAULT_KNOTS`.

    Returns
    -------
    LoadedModel
        The model with tables (tabulated now: a model in memory has no file to key a cache by), or the one given.
    """
    from .loaded import as_loaded

    model = as_loaded(model)
    cfg = model.config
    dtype = next(model.network.parameters()).dtype
    q = cfg.get("quantization")
    variant = "none" if not q else next((k for k, v in VARIANTS.items() if v == (q["dtype"], q["per_channel"])),
                                          "fp16")
    as_options = ModelOptions(backend=model.backend, precision="double" if dtype == torch.float64 else "single",
                              quantize=variant, compress=compress, compress_knots=knots, matmul=model.network.matmul)
    as_options.validate()
    choice = resolve_compression(as_options)
    if choice == "none" or cfg.get("compression"):
        return model
    return _tabulated(model, choice, knots, None, None, None, compress == "auto", None)


def prepare_model(source, options: Optional[ModelOptions] = None, device="cpu", tables=None,
                  names: Optional[Mapping[str, str]] = None):
    """The network of ``source`` as ``options`` make it: loaded, compressed, then quantized.

    Parameters
    ----------
    source : str, PathLike, LoadedModel or CGSchNet
        A model file (a flashschnet checkpoint or an mlcg export, read with ``weights_only=True``), or a model in
        memory: its hyper-parameters, units, weights, priors and metadata are taken, its backend, dtype, device and
        the other options are ``options``' (it is not modified).
    options : ModelOptions or None
        Validated first (messages name the fields); None: the defaults (float32 filter tables on the fused
        backends: :func:`resolve_compression`).
    device : str or torch.device
        Where the network runs (``"cpu"``, ``"cuda"``); also chooses the default backend.
    tables : flashschnet.tablecache.FilterTables or None
        Filter tables made elsewhere for this model file (an ensemble's driver ships its tables to its workers, so
        every block computes with the same ones); they must be the ones ``options`` ask for. None: from the cache
        (:mod:`flashschnet.tablecache`; a model in memory: tabulated now).
    names : mapping or None
        A front end's spelling of the fields, for the messages and notes (e.g. ``{"compress": "--compress"}``).

    Returns
    -------
    LoadedModel
        A new model: the network in eval mode and what its file carries (priors, prior tables, metadata);
        ``notes``: what a front end should print (the tables chosen by default and how to opt out, a cache entry
        rebuilt, a cache that cannot be written).
    """
    from .checkpoint import build_model, load_model
    from .loaded import as_loaded
    from .tablecache import file_sha256
    from .transforms import apply_variant

    options = options if options is not None else ModelOptions()
    options.validate(names=names)
    compress = resolve_compression(options)
    build = dict(backend=options.backend, dtype=options.dtype, device=device, skin=options.skin,
                 matmul=options.matmul, cuda_graph=bool(options.cuda_graph))
    path = sha256 = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        keyed = compress != "none" and tables is None and os.path.isfile(path)
        sha256 = file_sha256(path) if keyed else None
        model = load_model(path, **build)
        if sha256 is not None and file_sha256(path) != sha256:
            sha256 = None                      # the file changed while it was read: its tables are not cached
    else:
        given = as_loaded(source)
        net = given.network
        ckpt = {"config": net.config, "units": net.units, "state_dict": net.state_dict()}
        model = given.with_network(build_model(ckpt, given.source_path or "<model>", **build))
        model.notes = []
    if compress != "none":
        model = _tabulated(model, compress, options.compress_knots, path, sha256, tables,
                           options.compress == "auto", names)
    return apply_variant(model, options.quantize)
