"""Model-level transforms: a model in, a new model out (the input is never modified).

* :func:`quantize` -- channel-wise 16-bit filter- and output-network weights (:mod:`flashschnet.nn.quant`);
* :func:`apply_variant` -- the same by the variant names of the command-line tools
  (:data:`flashschnet.names.VARIANTS`).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch

from .errors import InputError
from .loaded import LoadedModel
from .names import VARIANTS
from .nn.quant import QuantLinear, dtype_name
from .nn.schnet import CGSchNet


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
