"""A CGSchNet's hyper-parameters and units: validation and defaults (a leaf module: no network code).

The config is a plain dict (it is stored as such in checkpoints); :func:`normalize_config` checks it and fills
the defaults, :func:`check_units` checks a model's unit names. The network is built from a normalized config
by :class:`flashschnet.nn.schnet.CGSchNet`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from .errors import InputError
from .names import QUANT_DTYPES, TABLE_DTYPES, TABLE_ORDERS

#: the units of mlcg's CG models (and the default of a new model): lengths in Angstrom, energies in kcal/mol
DEFAULT_UNITS = {"length": "angstrom", "energy": "kcal/mol"}

KNOWN_LENGTH_UNITS = ("angstrom", "nanometer")
KNOWN_ENERGY_UNITS = ("kcal/mol", "kJ/mol")

#: the fused backends' Verlet skin, as a fraction of the graph cutoff, unless a model is given one
#: (``CGSchNet(..., skin=...)``): 0.15 x 15 A = 2.25 A for mlcg's transferable models
DEFAULT_SKIN_FRACTION = 0.15


def check_units(units: Dict[str, str], source: str = "the model") -> None:
    """Raise :class:`InputError` unless ``units`` names a known length and energy unit."""
    if not isinstance(units, dict) or units.get("length") not in KNOWN_LENGTH_UNITS \
            or units.get("energy") not in KNOWN_ENERGY_UNITS:
        raise InputError(f"{source}: unknown units {units!r} (length: {KNOWN_LENGTH_UNITS}, energy: "
                         f"{KNOWN_ENERGY_UNITS})")


def quant_dtype_name(dtype) -> str:
    """The name of a 16-bit storage dtype (a name, an alias fp16/half/bf16, or a torch dtype):
    one of :data:`flashschnet.names.QUANT_DTYPES`; :class:`InputError` otherwise."""
    text = str(dtype)
    name = {"fp16": "float16", "half": "float16", "bf16": "bfloat16"}.get(text, text.replace("torch.", "", 1)
                                                                            if text.startswith("torch.") else text)
    if name not in QUANT_DTYPES:
        raise InputError(f"quantization dtype must be float16 or bfloat16, got {dtype!r}")
    return name


def normalize_quantization(spec) -> Optional[Dict[str, object]]:
    """Validate the config's ``quantization`` entry: None or ``{"dtype": name, "per_channel": bool}``."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or "dtype" not in spec:
        raise InputError(f"model config: quantization must be null or {{dtype, per_channel}}, got {spec!r}")
    return {"dtype": quant_dtype_name(spec["dtype"]), "per_channel": bool(spec.get("per_channel", True))}


def normalize_compression(spec) -> Optional[Dict[str, object]]:
    """Validate the config's ``compression`` entry: None or ``{"kind", "knots", "dtype"}``."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or not {"kind", "knots", "dtype"} <= set(spec):
        raise InputError(f"model config: compression must be null or {{kind, knots, dtype}}, got {spec!r}")
    kind, dt = str(spec["kind"]), str(spec["dtype"])
    if kind not in TABLE_ORDERS:
        raise InputError(f"model config: compression kind must be one of {', '.join(TABLE_ORDERS)}, got {kind!r}")
    if dt not in TABLE_DTYPES:
        raise InputError(f"model config: compression dtype must be one of {', '.join(TABLE_DTYPES)}, got {dt!r}")
    knots = spec["knots"]
    if isinstance(knots, bool) or not isinstance(knots, int) or knots < 2:
        raise InputError(f"model config: compression knots must be an integer >= 2, got {knots!r}")
    return {"kind": kind, "knots": int(knots), "dtype": dt}


def normalize_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """Validate a CGSchNet config and fill defaults. Raises :class:`InputError` naming the bad key.

    Keys: ``hidden_channels`` H, ``num_filters`` F, ``num_interactions`` T, ``embedding_size`` (number of bead
    types + 1), ``output_hidden_layer_widths`` (default ``[H]``), ``activation`` ("tanh" default, or "silu"),
    ``rbf`` = {kind: "gaussian"|"expnormal", num_rbf K, cutoff: {kind: "cosine"|"identity", cutoff_lower,
    cutoff_upper}}, ``cutoff`` = the filter envelope {kind, cutoff_lower, cutoff_upper}, ``cg_mapping``
    ("5bead", "ca" or None), ``quantization`` (None or ``{"dtype": "float16"|"bfloat16", "per_channel":
    bool}``, see :mod:`flashschnet.nn.quant`), ``compression`` (None or ``{"kind": "quintic"|"cubic", "knots": n,
    "dtype": "float32"|"float64"|"float16"|"bfloat16"}``, see :mod:`flashschnet.nn.table`). Lengths in the
    model's length unit.
    """
    required = ["hidden_channels", "num_filters", "num_interactions", "embedding_size", "rbf", "cutoff"]
    missing = [k for k in required if k not in config]
    if missing:
        raise InputError(f"model config lacks {', '.join(missing)}; it is not a CGSchNet config")
    cfg = dict(config)
    cfg.setdefault("output_hidden_layer_widths", [cfg["hidden_channels"]])
    cfg.setdefault("activation", "tanh")
    cfg.setdefault("cg_mapping", None)
    cfg["quantization"] = normalize_quantization(cfg.get("quantization"))
    cfg["compression"] = normalize_compression(cfg.get("compression"))
    rbf = dict(cfg["rbf"])
    rbf.setdefault("kind", "gaussian")
    rbf["cutoff"] = dict(rbf["cutoff"])
    rbf["cutoff"].setdefault("kind", "cosine")
    cfg["rbf"] = rbf
    cfg["cutoff"] = dict(cfg["cutoff"])
    cfg["cutoff"].setdefault("kind", "cosine")
    for key in ["hidden_channels", "num_filters", "num_interactions", "embedding_size"]:
        if int(cfg[key]) < 1:
            raise InputError(f"model config: {key} must be a positive integer, got {cfg[key]!r}")
    if float(rbf["cutoff"]["cutoff_upper"]) <= float(rbf["cutoff"]["cutoff_lower"]):
        raise InputError("model config: the basis cutoff_upper must exceed cutoff_lower")
    return cfg
