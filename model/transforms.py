"""Model-level transforms: a model in, a new model out (the input is never modified).

* :func:`quantize` -- channel-wise 16-bit filter- and output-network weights (:mod:`flashschnet.nn.quant`);
* :func:`compress` -- every block's filter network replaced by a table of the distance (:mod:`flashschnet.nn.table`);
* :func:`apply_variant` -- the same by the variant names of the command-line tools
  (:data:`flashschnet.names.VARIANTS`).
"""
from __future__ import annotations

import threading
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .errors import InputError
from .loaded import LoadedModel
from .names import COMPRESSIONS, DEFAULT_KNOTS, VARIANTS
from .config import normalize_compression
from .nn.quant import QuantLinear, dtype_name
from .nn.schnet import CGSchNet
from .nn.table import ORDERS, TABLE_DTYPES, encode, knot_data, table_end, table_lookup

#: the interpolant of :func:`compress` unless given (docs/compression.md: quintic beats cubic at equal bytes)
DEFAULT_KIND = "quintic"
#: the largest relative RMS error of a table's filter or filter derivative :func:`compress` accepts, per
#: table dtype (16-bit tables are limited by their own rounding: 2^-11 float16, 2^-8 bfloat16)
TOLERANCE = {"float64": 1e-5, "float32": 1e-5, "float16": 1e-2, "bfloat16": 5e-2}
#: check points per interval where the table is compared with the exact network
_CHECK_T = (0.125, 0.375, 0.625, 0.875)
#: held while filters are tabulated (threads building Systems at once tabulate one after the other)
_TABULATING = threading.Lock()


def quantize(model, dtype=torch.float16, per_channel: bool = True):
    """A copy of a model with channel-wise 16-bit filter- and output-network weights.

    Parameters
    ----------
    model : LoadedModel or CGSchNet
        Not quantized yet (its weights in float32 or float64). It is not modified.
    dtype : torch.float16 or torch.bfloat16 (or "float16"/"fp16"/"bfloat16"/"bf16")
    per_channel : bool
        One float32 scale per output channel (default) or the plain cast (scale 1).

    Returns
    -------
    LoadedModel or CGSchNet (as given)
        Same backend, skin, matmul, cuda_graph, dtype and device; ``config["quantization"]`` records the scheme, so
        :func:`flashschnet.save_checkpoint` / :func:`flashschnet.load_model` round-trip it bit for bit. A
        LoadedModel keeps its priors, prior tables and metadata.
    """
    if isinstance(model, LoadedModel):
        return model.with_network(quantize(model.network, dtype, per_channel))
    if not isinstance(model, CGSchNet):
        raise TypeError(f"quantize expects a flashschnet LoadedModel or CGSchNet, got {type(model).__name__}")
    cfg = model.config
    if cfg.get("quantization"):
        raise InputError(f"the model is already quantized ({cfg['quantization']}); quantize the unquantized one")
    name = dtype_name(dtype)
    cfg["quantization"] = {"dtype": name, "per_channel": bool(per_channel)}
    ref_param = model.embedding_layer.weight
    new = CGSchNet(cfg, backend=model.backend, units=model.units, device=ref_param.device.type, skin=model.skin,
                   matmul=model.matmul, cuda_graph=model.cuda_graph)
    new = new.to(dtype=ref_param.dtype, device=ref_param.device)
    src = dict(model.named_modules())
    with torch.no_grad():
        for mod_name, mod in new.named_modules():
            if isinstance(mod, QuantLinear):
                mod.set_from(src[mod_name], per_channel)
        own = new.state_dict()
        plain = {k: v for k, v in model.state_dict().items() if k in own}
        new.load_state_dict(plain, strict=False)
    return new.eval()


def variant(name: str) -> Optional[Tuple[str, bool]]:
    """``(dtype name, per_channel)`` of a named variant (see :data:`flashschnet.names.VARIANTS`); None for
    "none"."""
    if name not in VARIANTS:
        raise InputError(f"unknown quantization {name!r} (known: {', '.join(VARIANTS)})")
    return VARIANTS[name]


def apply_variant(model, name: str):
    """The model quantized as the named variant ("none": unchanged; an already-quantized model is only
    accepted with "none")."""
    spec = variant(name)
    if spec is None:
        return model
    return quantize(model, spec[0], spec[1])


def describe(config: Dict[str, object]) -> str:
    """One-line description of a model config's quantization ("none" or e.g. "float16, per-channel scales")."""
    q = config.get("quantization")
    if not q:
        return "none"
    return f"{q['dtype']}, {'per-channel scales' if q['per_channel'] else 'plain cast (no scales)'}"


def filter_function(model: CGSchNet, block):
    """The exact filter of a block as a function of distances [P] -> [P, F] (the reference modules)."""
    def fn(r: torch.Tensor) -> torch.Tensor:
        return block.conv.filter_network(model.rbf_layer(r)) * model.cutoff(r).unsqueeze(-1)
    return fn


def table_errors(model: CGSchNet, tables, r_end: float):
    """Per block ``(W error, dW/dr error)``: relative RMS over the check points of every interval (float64;
    RMS of the difference over RMS of the exact value) of the tables ``[(table, scale)]`` against ``model``'s
    exact filters."""
    n = tables[0][0].shape[0]
    h = r_end / (n - 1)
    t = torch.tensor(_CHECK_T, dtype=torch.float64)
    r = ((torch.arange(n - 1, dtype=torch.float64).unsqueeze(1) + t) * h).reshape(-1)
    out = []
    for block, (table, scale) in zip(model.interaction_blocks, tables):
        exact = knot_data(filter_function(model, block), r, 2)
        W, dW = table_lookup(r, table, scale, r_end)
        rms = lambda x: float(x.pow(2).mean().sqrt())
        out.append((rms(W - exact[:, 0]) / max(rms(exact[:, 0]), 1e-300),
                    rms(dW - exact[:, 1]) / max(rms(exact[:, 1]), 1e-300)))
    return out


def compress(model, knots: Optional[int] = None, dtype="float32", kind: str = DEFAULT_KIND,
             tolerance: Optional[float] = None):
    """A copy of a model whose filter networks are tables of the pair distance (filter compression).

    Parameters
    ----------
    model : LoadedModel or CGSchNet
        Not compressed yet (float32 or float64; quantized filter weights are tabulated as dequantized). It is
        not modified.
    knots : int or None
        Knots per table, uniform on ``[0, r_end]`` (:func:`flashschnet.nn.table.table_end`); default
        :data:`DEFAULT_KNOTS`.
    dtype : str or torch.dtype
        Table storage: "float32" (default), "float64", or "float16"/"bfloat16" (one float32 scale per channel
        and derivative order).
    kind : str
        "quintic" (default; value, first and second derivatives at the knots) or "cubic" (value and first).
    tolerance : float or None
        The largest relative RMS error of a block's filter or its derivative (on 4 check points per interval
        over the whole table) that is accepted; default :data:`TOLERANCE` for the dtype.

    Returns
    -------
    LoadedModel or CGSchNet (as given)
        Same backend, skin, matmul, cuda_graph, dtype, device and non-filter weights (bitwise);
        ``config["compression"]`` records the table, so :func:`flashschnet.save_checkpoint` /
        :func:`flashschnet.load_model` round-trip it.

    Raises
    ------
    InputError
        An already compressed model, a bad ``knots``/``dtype``/``kind``, or tables that miss the tolerance
        (the message names the block, the error and what to do).
    """
    if isinstance(model, LoadedModel):
        return model.with_network(compress(model.network, knots, dtype, kind, tolerance))
    tables, spec = tabulate(model, knots, dtype, kind, tolerance)
    return with_tables(model, tables, spec)


def tabulate(model: CGSchNet, knots: Optional[int] = None, dtype="float32", kind: str = DEFAULT_KIND,
             tolerance: Optional[float] = None) -> Tuple[List[Tuple[torch.Tensor, torch.Tensor]], Dict[str, object]]:
    """The filter tables of an exact network, checked against it (the work of :func:`compress`).

    Parameters are those of :func:`compress` (``model`` a :class:`CGSchNet`).

    Returns
    -------
    (tables, spec)
        ``tables``: per interaction block ``(table [knots, Q, F] in the table dtype, scale [Q, F] float32)``, on
        the CPU; ``spec``: ``{"kind", "knots", "dtype"}``, the ``config["compression"]`` they make
        (:func:`with_tables`).

    Raises
    ------
    InputError
        As :func:`compress`.
    """
    if not isinstance(model, CGSchNet):
        raise TypeError(f"compress expects a flashschnet LoadedModel or CGSchNet (whose filters are functions of the "
                        f"pair distance alone), got {type(model).__name__}")
    cfg = model.config
    if cfg.get("compression"):
        raise InputError(f"the model is already compressed ({cfg['compression']}); compress the exact model")
    knots = DEFAULT_KNOTS if knots is None else knots
    if isinstance(knots, bool) or not isinstance(knots, int) or not 4 <= knots <= 65536:
        raise InputError(f"knots must be an integer between 4 and 65536, got {knots!r}")
    if kind not in ORDERS:
        raise InputError(f"kind must be one of {', '.join(ORDERS)}, got {kind!r}")
    name = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
            torch.bfloat16: "bfloat16"}.get(dtype, dtype)
    name = {"f32": "float32", "f64": "float64", "fp16": "float16", "bf16": "bfloat16"}.get(name, name)
    if name not in TABLE_DTYPES:
        raise InputError(f"table dtype must be one of {', '.join(TABLE_DTYPES)}, got {dtype!r}")
    tol = TOLERANCE[name] if tolerance is None else float(tolerance)
    Q = ORDERS[kind]
    r_end = table_end(cfg)
    h = r_end / (knots - 1)
    r = torch.arange(knots, dtype=torch.float64) * h
    # the last knot's derivatives are its left limits (at r_end the envelope's mask gives the right ones: 0)
    r[-1] = r_end * (1.0 - 1e-12)
    # tabulated from a float64 copy on the CPU, whatever the model's dtype and device
    p0 = next(model.parameters())
    exact = model if (p0.dtype == torch.float64 and p0.device.type == "cpu") else _float64_cpu_copy(model)
    tables = []
    with _TABULATING, torch.no_grad():        # forward-mode autograd's levels are process-wide: one at a time
        for block in exact.interaction_blocks:
            tables.append(encode(knot_data(filter_function(exact, block), r, Q).detach(), h, name))
        for b, (eW, edW) in enumerate(table_errors(exact, tables, r_end)):
            if max(eW, edW) > tol:
                raise InputError(f"a {kind} {name} table with {knots} knots misses the error bound in block {b}: "
                                 f"filter {eW:.2e}, derivative {edW:.2e} relative RMS (> {tol:.0e}); use more knots "
                                 f"(default {DEFAULT_KNOTS}) or pass a larger tolerance")
    return tables, {"kind": kind, "knots": int(knots), "dtype": name}


def with_tables(model, tables: Sequence[Tuple[torch.Tensor, torch.Tensor]], spec: Dict[str, object]):
    """A copy of an exact model whose filter networks are the given tables (from :func:`tabulate`, or a cache
    of its results: :mod:`flashschnet.tablecache`); the model is not modified.

    Parameters
    ----------
    model : LoadedModel or CGSchNet
        Not compressed.
    tables : sequence of (table, scale)
        One per interaction block, as :func:`tabulate` returns them.
    spec : dict
        ``{"kind", "knots", "dtype"}`` of the tables.

    Returns
    -------
    LoadedModel or CGSchNet (as given)
        As :func:`compress` returns it.

    Raises
    ------
    InputError
        A spec, table count, shape or dtype that does not fit the model (one line saying which).
    """
    if isinstance(model, LoadedModel):
        return model.with_network(with_tables(model.network, tables, spec))
    cfg = model.config
    if cfg.get("compression"):
        raise InputError(f"the model is already compressed ({cfg['compression']}); compress the exact model")
    cfg["compression"] = normalize_compression(dict(spec))
    ref_param = model.embedding_layer.weight
    new = CGSchNet(cfg, backend=model.backend, units=model.units, device=ref_param.device.type, skin=model.skin,
                   matmul=model.matmul, cuda_graph=model.cuda_graph)
    new = new.to(dtype=ref_param.dtype, device=ref_param.device)
    if len(tables) != len(new.interaction_blocks):
        raise InputError(f"{len(tables)} filter tables for a model of {len(new.interaction_blocks)} interaction blocks")
    for b, (block, (table, scale)) in enumerate(zip(new.interaction_blocks, tables)):
        for what, given, own in (("table", table, block.conv.filter_network.table),
                                 ("scale", scale, block.conv.filter_network.scale)):
            if not isinstance(given, torch.Tensor) or given.shape != own.shape or given.dtype != own.dtype:
                shown = (f"{tuple(given.shape)} {given.dtype}" if isinstance(given, torch.Tensor)
                         else type(given).__name__)
                raise InputError(f"filter {what} of block {b} is {shown}; the model needs {tuple(own.shape)} "
                                 f"{own.dtype}")
            if not bool(torch.isfinite(given.float()).all()):
                raise InputError(f"filter {what} of block {b} holds NaN or infinite values")
    own = new.state_dict()
    with torch.no_grad():
        new.load_state_dict({k: v for k, v in model.state_dict().items() if k in own}, strict=False)
        for block, (table, scale) in zip(new.interaction_blocks, tables):
            block.conv.filter_network.table.copy_(table)          # (copy_ moves them to the model's device)
            block.conv.filter_network.scale.copy_(scale)
    return new.eval()


def _float64_cpu_copy(model: CGSchNet) -> CGSchNet:
    import copy

    return copy.deepcopy(model).to(device="cpu", dtype=torch.float64)


def apply_compression(model, name: str = "none", knots: Optional[int] = None):
    """The model compressed with tables of the named dtype (:data:`COMPRESSIONS`; "none": unchanged) and
    ``knots`` (None: :data:`DEFAULT_KNOTS`). Applied before :func:`apply_variant`, so a quantized variant keeps
    the exact filters' tables and quantizes the output network."""
    if name not in COMPRESSIONS or name == "auto":
        raise InputError(f"unknown compression {name!r} (known: {', '.join(c for c in COMPRESSIONS if c != 'auto')}; "
                         "'auto' is decided by flashschnet.options.resolve_compression)")
    if name == "none":
        if knots is not None:
            raise InputError("knots given without a compression; pass a table dtype (float32, float16, bfloat16)")
        return model
    return compress(model, knots=knots, dtype=name)


def describe_compression(config: Dict[str, object]) -> str:
    """One-line description of a model config's compression ("none" or e.g. "quintic float32 table, 256 knots")."""
    c = config.get("compression")
    if not c:
        return "none"
    return f"{c['kind']} {c['dtype']} table, {c['knots']} knots"
