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

With ``backend="reference"`` this module computes energies and forces itself: it materialises the per-edge
tensors ([E, K] basis, [E, F] filters) and scatter-adds, exactly as mlcg does; it is the test oracle of the
fused backends. With ``"torch"`` or ``"triton"`` it hands its weights, in the packed layout of
:mod:`flashschnet.nn.layout` (a mixin of this class), to the ``flashschnet::energy_forces`` op
(:mod:`flashschnet.fused`) once per step. The backend is chosen in :mod:`flashschnet.backends`.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from ..backends import resolve_backend
from ..config import DEFAULT_SKIN_FRACTION, DEFAULT_UNITS, normalize_config
from ..errors import InputError
from .layout import PackedWeights, config_scalars, fused_unsupported_reason
from ..names import MATMULS
from .basis import make_basis, make_envelope
from .quant import QuantLinear
from .table import ORDERS, FilterTable, table_end


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


class CFConv(nn.Module):
    """Continuous-filter convolution (mlcg ``CFConv``), reference implementation.

    ``forward(x [M, H], rbf [E, K], env [E], d [E], src [E], dst [E]) -> [M, H]`` with
    ``m_i = sum_{e: dst_e = i} (x_{src_e} L1^T) * (filter(rbf_e) * env_e)``, then ``lin2``.
    """

    def __init__(self, hidden: int, filters: int, num_rbf: int, activation: str, qdtype: Optional[str] = None):
        super().__init__()
        self.lin1 = nn.Linear(hidden, filters, bias=False)
        self.lin2 = nn.Linear(filters, hidden, bias=True)
        self.filter_network = MLP([num_rbf, filters, filters], activation, last_bias=False, qdtype=qdtype)

    def filter(self, rbf, env, d):
        return self.filter_network(rbf) * env.unsqueeze(-1)      # [E, F]  (materialised: reference)

    def forward(self, x, rbf, env, d, src, dst):
        w = self.filter(rbf, env, d)
        h = self.lin1(x)                                          # [M, F]
        m = torch.zeros_like(h).index_add_(0, dst, h.index_select(0, src) * w)
        return self.lin2(m)


class TabulatedCFConv(CFConv):
    """A CFConv whose filter is a table of the pair distance (:class:`~flashschnet.nn.table.FilterTable` as
    ``filter_network``; made by :func:`flashschnet.compress`): ``W_e = table(d_e)``, the envelope included."""

    def __init__(self, hidden: int, filters: int, table: FilterTable):
        nn.Module.__init__(self)
        self.lin1 = nn.Linear(hidden, filters, bias=False)
        self.lin2 = nn.Linear(filters, hidden, bias=True)
        self.filter_network = table

    def filter(self, rbf, env, d):
        return self.filter_network(d)


class InteractionBlock(nn.Module):
    """mlcg ``InteractionBlock``: conv -> activation -> lin (the residual is added by the caller)."""

    def __init__(self, hidden: int, filters: int, num_rbf: int, activation: str, qdtype: Optional[str] = None,
                 table: Optional[FilterTable] = None):
        super().__init__()
        self.conv = CFConv(hidden, filters, num_rbf, activation, qdtype) if table is None else \
            TabulatedCFConv(hidden, filters, table)
        self.activation = _activation(activation)
        self.lin = nn.Linear(hidden, hidden)

    def forward(self, x, rbf, env, d, src, dst):
        return self.lin(self.activation(self.conv(x, rbf, env, d, src, dst)))


# ----------------------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------------------


class CGSchNet(PackedWeights, nn.Module):
    """mlcg ``StandardSchNet`` for coarse-grained proteins, over several replicas at once.

    Parameters
    ----------
    config : dict
        Hyper-parameters (see :func:`flashschnet.config.normalize_config`): ``hidden_channels`` H, ``num_filters`` F,
        ``num_interactions`` T, ``embedding_size`` (number of bead types + 1), ``output_hidden_layer_widths``,
        ``activation`` ("tanh"), ``rbf`` = {kind: "gaussian"|"expnormal", num_rbf K, cutoff: {kind:
        "cosine"|"identity", cutoff_lower, cutoff_upper}}, ``cutoff`` = the filter envelope {kind,
        cutoff_lower, cutoff_upper}, ``cg_mapping`` ("5bead", "ca" or None), ``quantization`` (None or
        ``{"dtype": "float16"|"bfloat16", "per_channel": bool}``: channel-wise 16-bit filter- and
        output-network weights, see :mod:`flashschnet.nn.quant`; made by :func:`flashschnet.quantize`),
        ``compression`` (None or ``{"kind": "quintic"|"cubic", "knots": n, "dtype": ...}``: every block's filter
        network replaced by a table of the distance, see :mod:`flashschnet.nn.table`; made by
        :func:`flashschnet.compress`).
    backend : str or None
        Which implementation computes energies and forces; chosen in one place
        (:func:`flashschnet.backends.resolve_backend`): "reference", "torch" or "triton"; None: the default
        for ``device``. A config the fused backends cannot run falls back to "reference" when no backend was
        asked for, and is refused when one was.
    units : dict
        ``{"length": ..., "energy": ...}`` of the model (mlcg: Angstrom and kcal/mol).
    device : str or None
        Where the model will run; only used to choose the default backend.
    skin : float or None
        Verlet skin of the fused backends' neighbour lists, in the model's length unit: a list holds the pairs
        within ``graph_cutoff + skin`` and is rebuilt when a bead moved more than ``skin / 2``. It changes the
        speed, never the result (every pair is tested against the exact cutoff). Default
        ``DEFAULT_SKIN_FRACTION * graph_cutoff`` (:mod:`flashschnet.config`; 2.25 A for a 15 A cutoff).
    matmul : str
        Matrix-product precision of the triton backend's filter network (:data:`flashschnet.names.MATMULS`):
        "auto" (default: float64 exact, 16-bit weights their own type, float32 tf32), "ieee", "tf32", "bf16",
        "fp16". The other backends compute exactly in the model's dtype.
    cuda_graph : bool
        Fused backends on CUDA: capture a step (after two eager warm-up calls) as a CUDA graph and replay it
        for later calls with positions of the same shape (:mod:`flashschnet.fused.graph`). Default False.

    Notes
    -----
    Lengths are in the model's length unit, energies in its energy unit; :mod:`flashschnet.openmm` converts
    from and to OpenMM's units in exactly one place.
    """

    __jit_unused_properties__ = ["config", "units"]

    def __init__(self, config: Dict[str, Any], backend: Optional[str] = None, units: Optional[Dict[str, str]] = None,
                 device: Optional[str] = None, skin: Optional[float] = None, matmul: str = "auto",
                 cuda_graph: bool = False):
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
        self.rbf_layer = make_basis(cfg["rbf"])
        self.cutoff = make_envelope(cfg["cutoff"])
        comp = cfg["compression"]

        def table() -> Optional[FilterTable]:
            if comp is None:
                return None
            return FilterTable(int(comp["knots"]), ORDERS[str(comp["kind"])], F, str(comp["dtype"]), table_end(cfg))

        self.interaction_blocks = nn.ModuleList(
            [InteractionBlock(H, F, K, act, qdtype, table()) for _ in range(int(cfg["num_interactions"]))]
        )
        self.output_network = MLP([H] + [int(w) for w in cfg["output_hidden_layer_widths"]] + [1], act,
                                  last_bias=False, qdtype=qdtype)
        self.graph_cutoff = float(cfg["rbf"]["cutoff"]["cutoff_upper"])
        self.num_types = int(cfg["embedding_size"])
        if skin is None:
            skin = DEFAULT_SKIN_FRACTION * self.graph_cutoff
        elif not (float(skin) >= 0.0 and float(skin) < float("inf")):
            raise InputError(f"skin must be a non-negative length (model unit), got {skin!r}")
        self.skin = float(skin)
        if matmul not in MATMULS:
            raise InputError(f"matmul must be one of {', '.join(MATMULS)}, got {matmul!r}")
        self.matmul = str(matmul)
        self.cuda_graph = bool(cuda_graph)
        # the fused backends' configuration scalars (the packed layout: flashschnet.nn.layout)
        ints, floats = config_scalars(cfg, float(getattr(self.rbf_layer, "alpha", 0.0)), self.skin, self.matmul,
                                      self.cuda_graph)
        self.fused_ints: List[int] = ints
        self.fused_floats: List[float] = floats

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
            x = x + block(x, rbf, env, d, src, dst)
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
            # forces are exact already: nothing to differentiate, and without grad mode the op skips its autograd
            # wrapper (about 0.1 ms of a 1 ms call on a 97-bead CPU step, docs/sampling.md)
            with torch.no_grad():
                e, f = torch.ops.flashschnet.energy_forces(positions, bead_types, self.fused_params(),
                                                           self.fused_ints, self.fused_floats, self.backend)
            return e.detach(), f.detach()
        if not torch.jit.is_scripting():
            with torch.enable_grad():
                return self._energy_forces(positions, bead_types)
        return self._energy_forces(positions, bead_types)

    def energy_forces_scaled(self, positions: torch.Tensor, bead_types: torch.Tensor, length_scale: float,
                             energy_scale: float, force_scale: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`energy_forces` in a caller's units, with the energies' total: positions ``[R, N, 3]`` in a unit
        of ``length_scale`` model lengths; returns energies ``[R]`` x ``energy_scale``, forces ``[R, N, 3]`` x
        ``force_scale`` and ``total`` ``[]``. The fused backends apply the factors in the op (the triton engine
        in its first and last kernels); the factors themselves come from the caller's one place of unit
        conversion (:func:`flashschnet.openmm.units.conversion_factors` at the OpenMM boundary)."""
        if positions.dim() == 2:
            positions = positions.unsqueeze(0)
        if self.backend != "reference":
            with torch.no_grad():
                e, f, total = torch.ops.flashschnet.energy_forces_scaled(
                    positions, bead_types, self.fused_params(), self.fused_ints, self.fused_floats, self.backend,
                    [length_scale, energy_scale, force_scale])
            return e.detach(), f.detach(), total.detach()
        e, f = self.energy_forces(positions * length_scale, bead_types)
        return e * energy_scale, f * force_scale, e.sum() * energy_scale

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
