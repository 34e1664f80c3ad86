"""Model files: our checkpoint format and mlcg export files, both read with ``weights_only=True``.

Our checkpoint is a dict of plain data::

    {"format": "flashschnet-checkpoint", "format_version": 1,
     "config": {...CGSchNet hyper-parameters...},
     "units": {"length": "angstrom", "energy": "kcal/mol"},
     "state_dict": {name: tensor},
     "priors": PriorSet.to_dict() or None,
     "metadata": {"description": str, "placeholder": bool, ...}}

A quantized model (:func:`flashschnet.quantize`) has ``config["quantization"] = {"dtype", "per_channel"}`` and
stores each 16-bit weight as ``<layer>.weight_q`` (float16/bfloat16) + ``<layer>.weight_scale`` (float32).
A compressed model (:func:`flashschnet.compress`) has ``config["compression"] = {"kind", "knots", "dtype"}`` and
stores each block's filter table as ``<block>.conv.filter_network.table`` (in the config's dtype) + ``.scale``
(float32).

An *mlcg export* is the dict layout of ``../shared/oracles/mlcg/mlcg_schnet_A.pt`` (``hyperparameters`` as
written by mlcg's constructor arguments, ``state_dict`` with mlcg's key names, optional ``model.`` prefix
from ``GradientsOut``). Pickled mlcg modules (``model_and_prior.pt``) need arbitrary code to load and are
refused with a clear message.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

import torch

from .config import DEFAULT_UNITS, check_units, normalize_config
from .errors import InputError
from .loaded import LoadedModel, as_loaded
from .nn.schnet import CGSchNet
from .safeload import load_plain

FORMAT = "flashschnet-checkpoint"
FORMAT_VERSION = 1


def _config_from_mlcg(hp: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Map mlcg StandardSchNet constructor arguments (as recorded in an export) onto our config."""

    def cutoff_spec(c: Any, what: str) -> Dict[str, Any]:
        if isinstance(c, (int, float)):
            return {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": float(c)}
        cls = str(c.get("class", ""))
        kind = {"CosineCutoff": "cosine", "IdentityCutoff": "identity"}.get(cls.rsplit(".", 1)[-1])
        if kind is None:
            raise InputError(f"{path}: unsupported {what} class {cls!r} (supported: CosineCutoff, IdentityCutoff)")
        return {"kind": kind, "cutoff_lower": float(c["cutoff_lower"]), "cutoff_upper": float(c["cutoff_upper"])}

    try:
        rbf = hp["rbf_layer"]
        rbf_cls = str(rbf["class"]).rsplit(".", 1)[-1]
        kind = {"GaussianBasis": "gaussian", "ExpNormalBasis": "expnormal"}.get(rbf_cls)
        if kind is None:
            raise InputError(f"{path}: unsupported radial basis {rbf['class']!r} (supported: GaussianBasis, ExpNormalBasis)")
        act = str(hp.get("activation", {}).get("class", "torch.nn.Tanh")).rsplit(".", 1)[-1].lower()
        rbf_spec = {"kind": kind, "num_rbf": int(rbf["num_rbf"]), "cutoff": cutoff_spec(rbf["cutoff"], "basis cutoff")}
        if kind == "expnormal" and "alpha" in rbf:
            rbf_spec["alpha"] = float(rbf["alpha"])
        cfg = {
            "hidden_channels": int(hp["hidden_channels"]),
            "num_filters": int(hp["num_filters"]),
            "num_interactions": int(hp["num_interactions"]),
            "embedding_size": int(hp["embedding_size"]),
            "output_hidden_layer_widths": [int(w) for w in hp["output_hidden_layer_widths"]],
            "activation": act,
            "rbf": rbf_spec,
            "cutoff": cutoff_spec(hp["cutoff"], "filter cutoff"),
        }
    except KeyError as exc:
        raise InputError(f"{path}: mlcg export lacks hyper-parameter {exc.args[0]!r}") from None
    if hp.get("aggr", "add") != "add":
        raise InputError(f"{path}: aggregation {hp['aggr']!r} is not supported (mlcg StandardSchNet uses 'add')")
    return cfg


def _infer_mapping(bead_types) -> Optional[str]:
    if bead_types is None:
        return None
    t = torch.as_tensor(bead_types)
    if bool(((t >= 21) & (t <= 24)).any()):
        return "5bead"
    return "ca" if len(t) and bool(((t >= 1) & (t <= 20)).all()) else None


def mlcg_export_to_checkpoint(obj: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Our checkpoint dict from an mlcg export (``hyperparameters`` + ``state_dict`` with mlcg's names, an
    optional ``model.`` prefix, optional ``bead_types`` to infer the CG mapping)."""
    sd = {k[len("model."):] if k.startswith("model.") else k: v for k, v in obj["state_dict"].items()}
    cfg = _config_from_mlcg(obj["hyperparameters"], path)
    cfg["cg_mapping"] = _infer_mapping(obj.get("bead_types"))
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": cfg,
        "units": dict(DEFAULT_UNITS),   # mlcg CG models: Angstrom and kcal/mol
        "state_dict": sd,
        "priors": None,
        "metadata": {"description": f"mlcg export {os.path.basename(path)} ({obj.get('name', '')})",
                     "source": "mlcg export", "placeholder": False},
    }


def read_model_file(path) -> Dict[str, Any]:
    """Read a model file into our checkpoint dict layout (without building the network).

    Accepts a flashschnet checkpoint or an mlcg export (``mlcg_schnet_A.pt`` layout). Raises
    :class:`InputError` with a one-line message for anything else.
    """
    path = os.fspath(path)
    obj = load_plain(path, "model")
    if obj.get("format") == FORMAT or "format_version" in obj:
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            raise InputError(f"{path}: checkpoint format_version {version!r}; this flashschnet reads version {FORMAT_VERSION}")
        for key in ("config", "units", "state_dict"):
            if key not in obj:
                raise InputError(f"{path}: checkpoint lacks {key!r}")
        ckpt = dict(obj)
    elif "hyperparameters" in obj and "state_dict" in obj:
        ckpt = mlcg_export_to_checkpoint(obj, path)
    else:
        raise InputError(
            f"{path}: not a flashschnet checkpoint or an mlcg export (keys: {', '.join(sorted(map(str, obj))[:8])})"
        )
    check_units(ckpt["units"], path)
    return ckpt


def build_model(ckpt: Dict[str, Any], path: str = "<checkpoint>", backend: Optional[str] = None,
                dtype: torch.dtype = torch.float32, device="cpu", skin: Optional[float] = None,
                matmul: str = "auto", cuda_graph: bool = False) -> CGSchNet:
    """Build a :class:`CGSchNet` from a checkpoint dict and load its weights (strictly)."""
    model = CGSchNet(normalize_config(ckpt["config"]), backend=backend, units=ckpt["units"], device=str(device),
                     skin=skin, matmul=matmul, cuda_graph=cuda_graph)
    model = model.to(dtype=dtype)          # before loading: float64 weights must not pass through float32
    own = model.state_dict()
    sd = ckpt["state_dict"]
    missing = [k for k in own if k not in sd]
    unexpected = [k for k in sd if k not in own]
    if missing or unexpected:
        what = (f"missing {', '.join(missing[:3])}" if missing else "") + \
               ("; " if missing and unexpected else "") + (f"unexpected {', '.join(unexpected[:3])}" if unexpected else "")
        raise InputError(f"{path}: weights do not fit the model's hyper-parameters ({what})")
    for k, v in own.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            raise InputError(f"{path}: weight {k} has shape {tuple(sd[k].shape)}, the config implies {tuple(v.shape)}")
        if sd[k].is_floating_point() and not bool(torch.isfinite(sd[k]).all()):
            raise InputError(f"{path}: weight {k} holds NaN or infinite values")
        if k.endswith(".weight_q") and sd[k].dtype != v.dtype:
            raise InputError(f"{path}: quantized weight {k} is stored as {sd[k].dtype}, the config says {v.dtype}")
        if k.endswith(".table") and sd[k].dtype != v.dtype:
            raise InputError(f"{path}: filter table {k} is stored as {sd[k].dtype}, the config's compression says "
                             f"{v.dtype}")
    model.load_state_dict({k: sd[k].to(v.dtype) if v.is_floating_point() else sd[k] for k, v in own.items()})
    return model.to(device=device, dtype=dtype).eval()


def load_model(path, backend: Optional[str] = None, dtype: torch.dtype = torch.float32, device="cpu",
               skin: Optional[float] = None, matmul: str = "auto", cuda_graph: bool = False) -> LoadedModel:
    """Load a CGSchNet and what its file carries from a flashschnet checkpoint or an mlcg export file.

    Parameters
    ----------
    path : str or PathLike
        The model file. Read with ``torch.load(..., weights_only=True)``: no code in it is run.
    backend : str or None
        Implementation of energies/forces (see :mod:`flashschnet.backends`); None picks the default.
    dtype : torch.dtype
        ``torch.float32`` (default, for simulation) or ``torch.float64``.
    device : str or torch.device
    skin : float or None
        Verlet skin of the fused backends (model length unit; see :class:`CGSchNet`); None: the default.
    matmul : str
        Matrix-product precision of the triton backend ("auto", "ieee", "tf32", "bf16", "fp16"; see
        :class:`CGSchNet`).
    cuda_graph : bool
        Replay each step of a fused backend on CUDA as a CUDA graph (see :class:`CGSchNet`).

    Returns
    -------
    LoadedModel
        ``.network`` (the CGSchNet, in eval mode), ``.priors`` (a :class:`flashschnet.priors.PriorSet` or None),
        ``.prior_tables`` (type-indexed tables of a converted transferable mlcg model, or None), ``.metadata``,
        ``.source_path``. ``model.energy_forces(positions [R, N, 3], bead_types [N])`` works in the model's
        units (``model.units``).
    """
    path = os.fspath(path)
    ckpt = read_model_file(path)
    network = build_model(ckpt, path, backend=backend, dtype=dtype, device=device, skin=skin, matmul=matmul,
                          cuda_graph=cuda_graph)
    priors = None
    if ckpt.get("priors") is not None:
        from .priors import PriorSet

        priors = PriorSet.from_dict(ckpt["priors"])
    return LoadedModel(network=network, priors=priors, prior_tables=ckpt.get("prior_tables"),
                       metadata=dict(ckpt.get("metadata") or {}), source_path=path)


def write_checkpoint(path, ckpt: Dict[str, Any]) -> None:
    """``torch.save`` a checkpoint dict atomically (:func:`flashschnet.atomic.atomic_write`: temporary file, fsync,
    rename); a write that fails removes the temporary file, keeps a previous ``path`` and raises
    :class:`~flashschnet.errors.OutputError`."""
    from .atomic import atomic_write

    with atomic_write(path, "wb", what="writing the model checkpoint") as f:
        torch.save(ckpt, f)


def save_checkpoint(path, model, priors="model", metadata: Optional[Dict[str, Any]] = None) -> None:
    """Write ``model`` as a flashschnet checkpoint, atomically (temporary file + rename).

    Parameters
    ----------
    path : str or PathLike
    model : LoadedModel or CGSchNet
        The network; a LoadedModel's prior tables are written too.
    priors : PriorSet, None or "model"
        The priors to store (a :class:`~flashschnet.priors.PriorSet`); ``"model"`` (default): the LoadedModel's
        own (none for a bare CGSchNet); None: no priors.
    metadata : dict or None
        None: the LoadedModel's own (empty for a bare CGSchNet).
    """
    loaded = as_loaded(model)
    if isinstance(priors, str) and priors == "model":
        priors = loaded.priors
    if metadata is None:
        metadata = loaded.metadata
    model = loaded.network
    ckpt = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": model.config,
        "units": model.units,
        "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "priors": priors.to_dict() if priors is not None else None,
        "metadata": dict(metadata or {}),
    }
    if loaded.prior_tables is not None:
        ckpt["prior_tables"] = loaded.prior_tables
    write_checkpoint(path, ckpt)
