"""CGSchNet: mlcg's ``StandardSchNet`` in plain PyTorch (the reference backend).

The forward pass follows ``../shared/oracles/mlcg/README.txt`` equation by equation, and the sub-module
names follow mlcg's so that an mlcg ``state_dict`` loads unchanged:

* graph: every ordered pair ``(i, j)``, ``i != j``, of the same replica with ``d_ij < r_graph``, where
  ``r_graph`` is the *basis* cutoff (``rbf_layer.cutoff.cutoff_upper``); bonded pairs are edges too;
* ``x_i^0 = embedding_layer.weight[z_i]``;
* basis ``e_ijk`` (Gaussian or ExpNormal), optionally times a cosine envelope;
* per block ``W_ij = (tanh(e_ij A1^T + a1) A2^T) * C(d_ij)``, ``m_i = sum_j (x_j L1^T) * W_ij``,
  ``x_i += tanh(m_i L2^T + b2) L^T + b``;
* ``E = sum_i MLP_out(x_i)``; forces ``F = -dE/dr`` by autograd.

Replicas: positions come as ``[R, N, 3]``; every replica is an independent copy of the same molecule (no
edges between replicas) and the whole batch is one network call.

This is the ``"reference"`` backend: it materialises the per-edge tensors ([E, K] basis, [E, F] filters)
and scatter-adds, exactly as mlcg does. It is the test oracle for the fused backends.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from ..errors import InputError
from ..ops import resolve_backend
from ..ops import fused as _fused_op  # noqa: F401  (registers flashschnet::energy_forces)
from .quant import QuantLinear, normalize_quantization

# ----------------------------------------------------------------------------------------------------------
# envelopes and radial bases
# ----------------------------------------------------------------------------------------------------------


class CosineCutoff(nn.Module):
    """mlcg ``CosineCutoff``: ``C(d) = 0.5 (cos(pi d / hi) + 1) [d < hi]`` for ``lo == 0``, else
    ``0.5 (cos(pi (2 (d - lo) / (hi - lo) + 1)) + 1)`` on ``(lo, hi)`` and 0 outside.

    ``d``: any shape, length unit of the model; returns the same shape.
    """

    def __init__(self, cutoff_lower: float, cutoff_upper: float):
        super().__init__()
        self.cutoff_lower = float(cutoff_lower)
        self.cutoff_upper = float(cutoff_upper)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        lo, hi = self.cutoff_lower, self.cutoff_upper
        if lo > 0.0:
            c = 0.5 * (torch.cos(math.pi * (2.0 * (d - lo) / (hi - lo) + 1.0)) + 1.0)
            return c * (d < hi).to(d.dtype) * (d > lo).to(d.dtype)
        return 0.5 * (torch.cos(d * (math.pi / hi)) + 1.0) * (d < hi).to(d.dtype)


class IdentityCutoff(nn.Module):
    """mlcg ``IdentityCutoff``: ``C(d) = 1`` (the graph radius still comes from ``cutoff_upper``)."""

    def __init__(self, cutoff_lower: float, cutoff_upper: float):
        super().__init__()
        self.cutoff_lower = float(cutoff_lower)
        self.cutoff_upper = float(cutoff_upper)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(d)


def _envelope(spec: Dict[str, Any]) -> nn.Module:
    kind = spec.get("kind", "cosine")
    if kind == "cosine":
        return CosineCutoff(spec["cutoff_lower"], spec["cutoff_upper"])
    if kind == "identity":
        return IdentityCutoff(spec["cutoff_lower"], spec["cutoff_upper"])
    raise InputError(f"unknown cutoff kind {kind!r} in the model config (known: cosine, identity)")


class GaussianBasis(nn.Module):
    """mlcg ``GaussianBasis``: ``e_k(d) = exp(coeff (d - offset_k)^2) * envelope(d)``.

    Buffers ``offset`` [K] (``linspace(lo, hi, K)``) and ``coeff`` [] (``-0.5 / (offset_1 - offset_0)^2``)
    are part of the state dict; a loaded checkpoint's stored values are used, not recomputed ones.
    ``forward(d [E]) -> [E, K]``.
    """

    def __init__(self, num_rbf: int, cutoff: Dict[str, Any]):
        super().__init__()
        lo, hi = float(cutoff["cutoff_lower"]), float(cutoff["cutoff_upper"])
        offset = torch.linspace(lo, hi, num_rbf, dtype=torch.float64)
        self.register_buffer("offset", offset)
        self.register_buffer("coeff", torch.tensor(-0.5 / float(offset[1] - offset[0]) ** 2, dtype=torch.float64))
        self.num_rbf = int(num_rbf)
        self.cutoff = _envelope(cutoff)

    def centers(self) -> torch.Tensor:
        return self.offset

    def widths(self) -> torch.Tensor:
        return self.coeff

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        e = torch.exp(self.coeff * (d.unsqueeze(-1) - self.offset) ** 2)
        return e * self.cutoff(d).unsqueeze(-1)


class ExpNormalBasis(nn.Module):
    """mlcg / TorchMD-Net ``ExpNormalBasis``:
    ``e_k(d) = envelope(d) * exp(-betas_k (exp(alpha (lo - d)) - means_k)^2)``, ``alpha = 5 / (hi - lo)``
    unless given. Buffers ``means`` [K], ``betas`` [K]. ``forward(d [E]) -> [E, K]``."""

    def __init__(self, num_rbf: int, cutoff: Dict[str, Any], alpha: Optional[float] = None):
        super().__init__()
        lo, hi = float(cutoff["cutoff_lower"]), float(cutoff["cutoff_upper"])
        start = math.exp(-(hi - lo))
        self.register_buffer("means", torch.linspace(start, 1.0, num_rbf, dtype=torch.float64))
        self.register_buffer(
            "betas", torch.full((num_rbf,), (2.0 / num_rbf * (1.0 - start)) ** -2, dtype=torch.float64)
        )
        self.alpha = float(alpha) if alpha is not None else 5.0 / (hi - lo)
        self.cutoff_lower = lo
        self.num_rbf = int(num_rbf)
        self.cutoff = _envelope(cutoff)

    def centers(self) -> torch.Tensor:
        return self.means

    def widths(self) -> torch.Tensor:
        return self.betas

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        x = torch.exp(self.alpha * (self.cutoff_lower - d)).unsqueeze(-1)
        return self.cutoff(d).unsqueeze(-1) * torch.exp(-self.betas * (x - self.means) ** 2)


def _basis(spec: Dict[str, Any]) -> nn.Module:
    kind = spec.get("kind", "gaussian")
    if kind == "gaussian":
        return GaussianBasis(spec["num_rbf"], spec["cutoff"])
    if kind == "expnormal":
        return ExpNormalBasis(spec["num_rbf"], spec["cutoff"], spec.get("alpha"))
    raise InputError(f"unknown radial basis {kind!r} in the model config (known: gaussian, expnormal)")


def _activation(name: str) -> nn.Module:
    if name == "tanh":
        return nn.Tanh()
    if name == "silu":
        return nn.SiLU()
    raise InputError(f"unknown activation {name!r} in the model config (known: tanh, silu)")


# ----------------------------------------------------------------------------------------------------------
# network blocks (names as in mlcg)
# ----------------------------------------------------------------------------------------------------------


class MLP(nn.Module):
    """mlcg ``MLP(widths, activation, last_bias)``: ``layers`` = Linear, act, Linear, act, ..., Linear.

    With ``qdtype`` ("float16" / "bfloat16") the Linears are :class:`~flashschnet.nn.quant.QuantLinear`
    (channel-wise 16-bit weights)."""

    def __init__(self, widths: List[int], activation: str, last_bias: bool, qdtype: Optional[str] = None):
        super().__init__()
        layers: List[nn.Module] = []
        for a, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:])):
            last = a == len(widths) - 2
            bias = last_bias or not last
            layers.append(nn.Linear(w_in, w_out, bias=bias) if qdtype is None else QuantLinear(w_in, w_out, bias, qdtype))
            if not last:
                layers.append(_activation(activation))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def fused_params(self) -> List[torch.Tensor]:
        """``[W0, c0, W1, c1, ..., W_last]`` (the last layer has no bias); quantized layers give
        ``[q, s]`` (16-bit values, float32 scales) in place of ``W``."""
        out: List[torch.Tensor] = []
        for layer in self.layers:
            if hasattr(layer, "weight"):       # a Linear (TorchScript resolves this per layer)
                out.append(layer.weight)
                bias = layer.bias
                if bias is not None:
                    out.append(bias)
            elif hasattr(layer, "weight_q"):   # a QuantLinear
                out.append(layer.weight_q)
                out.append(layer.weight_scale)
                bias = layer.bias
                if bias is not None:
                    out.append(bias)
        return out


class CFConv(nn.Module):
    """Continuous-filter convolution (mlcg ``CFConv``), reference implementation.

    ``forward(x [M, H], rbf [E, K], env [E], src [E], dst [E]) -> [M, H]`` with
    ``m_i = sum_{e: dst_e = i} (x_{src_e} L1^T) * (filter(rbf_e) * env_e)``, then ``lin2``.
    """

    def __init__(self, hidden: int, filters: int, num_rbf: int, activation: str, qdtype: Optional[str] = None):
        super().__init__()
        self.lin1 = nn.Linear(hidden, filters, bias=False)
        self.lin2 = nn.Linear(filters, hidden, bias=True)
        self.filter_network = MLP([num_rbf, filters, filters], activation, last_bias=False, qdtype=qdtype)

    def forward(self, x, rbf, env, src, dst):
        w = self.filter_network(rbf) * env.unsqueeze(-1)          # [E, F]  (materialised: reference)
        h = self.lin1(x)                                          # [M, F]
        m = torch.zeros_like(h).index_add_(0, dst, h.index_select(0, src) * w)
        return self.lin2(m)


class InteractionBlock(nn.Module):
    """mlcg ``InteractionBlock``: conv -> activation -> lin (the residual is added by the caller)."""

    def __init__(self, hidden: int, filters: int, num_rbf: int, activation: str, qdtype: Optional[str] = None):
        super().__init__()
        self.conv = CFConv(hidden, filters, num_rbf, activation, qdtype)
        self.activation = _activation(activation)
        self.lin = nn.Linear(hidden, hidden)

    def forward(self, x, rbf, env, src, dst):
        return self.lin(self.activation(self.conv(x, rbf, env, src, dst)))

    def fused_params(self) -> List[torch.Tensor]:
        """``[L1, L2, b2, L, b, A1, a1, A2]`` (quantized: ``[L1, L2, b2, L, b, A1q, A1s, a1, A2q, A2s]``)."""
        return [self.conv.lin1.weight, self.conv.lin2.weight, self.conv.lin2.bias, self.lin.weight,
                self.lin.bias] + self.conv.filter_network.fused_params()


# ----------------------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------------------

DEFAULT_UNITS = {"length": "angstrom", "energy": "kcal/mol"}


def fused_unsupported_reason(cfg: Dict[str, Any]) -> str:
    """Why the fused backends cannot run this config ("" when they can)."""
    if cfg["activation"] != "tanh":
        return f"the fused backends implement the tanh activation only (this model uses {cfg['activation']!r})"
    for what, c in (("basis", cfg["rbf"]["cutoff"]), ("filter", cfg["cutoff"])):
        if c["kind"] == "cosine" and float(c["cutoff_lower"]) != 0.0:
            return f"the fused backends support cosine cutoffs with cutoff_lower = 0 only ({what} has {c['cutoff_lower']})"
    return ""


def normalize_config(config: Dict[str, Any]) -> Dict[str, Any]:
    """Validate a CGSchNet config and fill defaults. Raises :class:`InputError` naming the bad key."""
    required = ["hidden_channels", "num_filters", "num_interactions", "embedding_size", "rbf", "cutoff"]
    missing = [k for k in required if k not in config]
    if missing:
        raise InputError(f"model config lacks {', '.join(missing)}; it is not a CGSchNet config")
    cfg = dict(config)
    cfg.setdefault("output_hidden_layer_widths", [cfg["hidden_channels"]])
    cfg.setdefault("activation", "tanh")
    cfg.setdefault("cg_mapping", None)
    cfg["quantization"] = normalize_quantization(cfg.get("quantization"))
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


class CGSchNet(nn.Module):
    """mlcg ``StandardSchNet`` for coarse-grained proteins, over several replicas at once.

    Parameters
    ----------
    config : dict
        Hyper-parameters (see :func:`normalize_config`): ``hidden_channels`` H, ``num_filters`` F,
        ``num_interactions`` T, ``embedding_size`` (number of bead types + 1), ``output_hidden_layer_widths``,
        ``activation`` ("tanh"), ``rbf`` = {kind: "gaussian"|"expnormal", num_rbf K, cutoff: {kind:
        "cosine"|"identity", cutoff_lower, cutoff_upper}}, ``cutoff`` = the filter envelope {kind,
        cutoff_lower, cutoff_upper}, ``cg_mapping`` ("5bead", "ca" or None), ``quantization`` (None or
        ``{"dtype": "float16"|"bfloat16", "per_channel": bool}``: channel-wise 16-bit filter- and
        output-network weights, see :mod:`flashschnet.nn.quant`; made by :func:`flashschnet.quantize`).
    backend : str
        Which implementation computes energies and forces; chosen in one place
        (:func:`flashschnet.ops.resolve_backend`): "reference", "torch" or "triton".
    units : dict
        ``{"length": ..., "energy": ...}`` of the model (mlcg: Angstrom and kcal/mol).

    Notes
    -----
    Lengths are in the model's length unit, energies in its energy unit; :mod:`flashschnet.openmm` converts
    from and to OpenMM's units in exactly one place.
    """

    __jit_unused_properties__ = ["config", "units"]

    def __init__(self, config: Dict[str, Any], backend: Optional[str] = None, units: Optional[Dict[str, str]] = None,
                 device: Optional[str] = None):
        super().__init__()
        cfg = normalize_config(config)
        self.backend = resolve_backend(backend, device)
        unsupported = fused_unsupported_reason(cfg)
        if self.backend != "reference" and unsupported:
            if backend is not None:
                raise InputError(f"backend {self.backend!r}: {unsupported}; use backend='reference'")
            self.backend = "reference"
        self.config_json = json.dumps(cfg, sort_keys=True)
        self.units_json = json.dumps(dict(units or DEFAULT_UNITS), sort_keys=True)
        H, F, K = int(cfg["hidden_channels"]), int(cfg["num_filters"]), int(cfg["rbf"]["num_rbf"])
        act = cfg["activation"]
        quant = cfg["quantization"]
        qdtype = None if quant is None else str(quant["dtype"])
        self.embedding_layer = nn.Embedding(int(cfg["embedding_size"]), H)
        self.rbf_layer = _basis(cfg["rbf"])
        self.cutoff = _envelope(cfg["cutoff"])
        self.interaction_blocks = nn.ModuleList(
            [InteractionBlock(H, F, K, act, qdtype) for _ in range(int(cfg["num_interactions"]))]
        )
        self.output_network = MLP([H] + [int(w) for w in cfg["output_hidden_layer_widths"]] + [1], act,
                                  last_bias=False, qdtype=qdtype)
        self.graph_cutoff = float(cfg["rbf"]["cutoff"]["cutoff_upper"])
        self.num_types = int(cfg["embedding_size"])
        # the fused backends' packed configuration (see flashschnet.ops.fused)
        rb = cfg["rbf"]
        n_hidden = len(cfg["output_hidden_layer_widths"])
        self.fused_ints: List[int] = [int(cfg["num_interactions"]), n_hidden, 0 if rb["kind"] == "gaussian" else 1,
                                      int(rb["cutoff"]["kind"] == "cosine"), int(cfg["cutoff"]["kind"] == "cosine"),
                                      int(qdtype is not None)]
        self.fused_floats: List[float] = [float(getattr(self.rbf_layer, "alpha", 0.0)),
                                          float(rb["cutoff"]["cutoff_lower"]), float(rb["cutoff"]["cutoff_upper"]),
                                          float(cfg["cutoff"]["cutoff_upper"]), self.graph_cutoff,
                                          0.15 * self.graph_cutoff]

    # -- plain-python conveniences (not scripted) --------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        return json.loads(self.config_json)

    @property
    def units(self) -> Dict[str, str]:
        return json.loads(self.units_json)

    # -- the graph --------------------------------------------------------------------------------------
    def neighbor_list(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """All ordered pairs within ``graph_cutoff`` inside each replica.

        ``positions`` [R, N, 3] -> ``(src [E], dst [E])`` as int64 indices into the flattened ``[R*N]``
        beads; message ``src -> dst``. No gradient flows through the selection.
        """
        N = positions.shape[1]
        with torch.no_grad():
            p = positions.detach()
            diff = p.unsqueeze(1) - p.unsqueeze(2)                 # [R, N, N, 3], diff[r,i,j] = p_j - p_i
            d2 = (diff * diff).sum(-1)
            mask = d2 < self.graph_cutoff * self.graph_cutoff
            mask = mask & ~torch.eye(N, dtype=torch.bool, device=p.device).unsqueeze(0)
            idx = mask.nonzero()                                   # [E, 3] = (r, i, j)
            base = idx[:, 0] * N
            dst = base + idx[:, 1]
            src = base + idx[:, 2]
        return src, dst

    # -- the network ------------------------------------------------------------------------------------
    def per_bead_energy(self, positions: torch.Tensor, bead_types: torch.Tensor) -> torch.Tensor:
        """Per-bead energies ``[R, N]`` (model energy unit) for positions ``[R, N, 3]`` (model length
        unit) and bead types ``[N]`` (int64, shared by all replicas)."""
        R, N = positions.shape[0], positions.shape[1]
        pos = positions.reshape(R * N, 3)
        src, dst = self.neighbor_list(positions)
        d = torch.linalg.vector_norm(pos.index_select(0, src) - pos.index_select(0, dst), dim=-1)
        rbf = self.rbf_layer(d)
        env = self.cutoff(d)
        x = self.embedding_layer(bead_types).repeat(R, 1)
        for block in self.interaction_blocks:
            x = x + block(x, rbf, env, src, dst)
        return self.output_network(x).reshape(R, N)

    def energy(self, positions: torch.Tensor, bead_types: torch.Tensor) -> torch.Tensor:
        """Energy per replica ``[R]`` (differentiable w.r.t. ``positions`` [R, N, 3])."""
        return self.per_bead_energy(positions, bead_types).sum(1)

    def energy_forces(self, positions: torch.Tensor, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Energies and forces of R independent replicas.

        Parameters
        ----------
        positions : Tensor, [R, N, 3] (or [N, 3] for one replica), the model's dtype
            Bead positions in the model's length unit (mlcg models: Angstrom).
        bead_types : Tensor, [N], int64
            Bead types, the same for every replica.

        Returns
        -------
        energy : Tensor, [R]
            Potential energy per replica in the model's energy unit (mlcg: kcal/mol).
        forces : Tensor, [R, N, 3]
            ``-dE/dr`` in energy unit per length unit. Both are detached.
        """
        if positions.dim() == 2:
            positions = positions.unsqueeze(0)
        if self.backend != "reference":
            e, f = torch.ops.flashschnet.energy_forces(positions, bead_types, self.fused_params(), self.fused_ints,
                                                       self.fused_floats, self.backend)
            return e.detach(), f.detach()       # forces are exact already; nothing to differentiate
        if not torch.jit.is_scripting():
            with torch.enable_grad():
                return self._energy_forces(positions, bead_types)
        return self._energy_forces(positions, bead_types)

    def fused_params(self) -> List[torch.Tensor]:
        """The weights in the fused backends' packed order (see :mod:`flashschnet.ops.fused`)."""
        params: List[torch.Tensor] = [self.embedding_layer.weight, self.rbf_layer.centers(), self.rbf_layer.widths()]
        for block in self.interaction_blocks:
            params += block.fused_params()
        params += self.output_network.fused_params()
        return params

    def _energy_forces(self, positions: torch.Tensor, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        pos = positions.detach().requires_grad_(True)
        energy = self.energy(pos, bead_types)
        grad = torch.autograd.grad([energy.sum()], [pos])[0]
        if grad is None:  # no edges and no dependence on positions
            grad = torch.zeros_like(pos)
        return energy.detach(), -grad.detach()

    def forward(self, positions: torch.Tensor, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.energy_forces(positions, bead_types)

    def check_bead_types(self, bead_types, source: str = "the structure") -> None:
        """Raise :class:`InputError` if a bead type is outside the model's embedding table."""
        t = torch.as_tensor(bead_types)
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.num_types):
            raise InputError(
                f"{source} has bead type {int(t.max())} but the model knows types 0..{self.num_types - 1}; "
                "use a model trained for this CG mapping"
            )
