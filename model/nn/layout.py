"""The fused backends' packed weight layout, defined here once: what a :class:`~flashschnet.nn.schnet.CGSchNet`
hands to the ``flashschnet::energy_forces`` op each step, and how the op unpacks it.

A TorchScript module can only pass plain lists across a custom-op boundary, so a step's call carries

``params`` (tensors, in this order; :meth:`PackedWeights.fused_params`)
    ``[embedding [types, H], basis_centers [K], basis_widths]``, then per interaction block
    ``[L1 [F, H], L2 [H, F], b2 [H], L [H, H], b [H], A1 [F, K], a1 [F], A2 [F, F]]`` (``conv.lin1``,
    ``conv.lin2`` weight and bias, ``lin`` weight and bias, the filter network's two Linears), then the
    output MLP's ``[W, c]`` per hidden layer and ``[W_last]`` (no bias). In a compressed model a block's
    ``[A1, a1, A2]`` is ``[table [n, Q, F], scale [Q, F]]`` (:mod:`flashschnet.nn.table`). In a quantized model every filter- and
    output-network weight ``W`` is the pair ``q, s`` (16-bit values [out, in], float32 scales [out]; see
    :mod:`flashschnet.nn.quant`). Gaussian basis: ``centers`` = ``offset`` [K], ``widths`` = ``coeff`` [];
    ExpNormal: ``means`` [K], ``betas`` [K].
``ints`` and ``floats`` (:func:`config_scalars`)
    Named fields, in the order of :data:`INT_FIELDS` and :data:`FLOAT_FIELDS` (:class:`IntField` and
    :class:`FloatField` are their positions); the first int is the layout's version, :data:`LAYOUT_VERSION`
    (layouts without it, or of another version, are refused with one :class:`~flashschnet.errors.InputError`:
    :func:`read_ints`). ints: ``n_blocks``, ``n_hidden`` (hidden layers of the output MLP), ``basis_kind`` (0
    gaussian, 1 expnormal), ``rbf_env`` / ``filt_env`` (cosine envelopes), ``quantized``, ``matmul`` (the
    position in :data:`flashschnet.names.MATMULS`, 0 = auto, of the triton backend's matrix-product precision),
    ``cuda_graph`` (1: replay each step as a CUDA graph), ``table_order`` (Q, values per knot of a compressed
    model's tables: 2 cubic, 3 quintic; 0 if none). floats (model length unit): ``alpha``, ``basis_lower``,
    ``rc_rbf``, ``rc_filt``, ``rc_graph``, ``skin`` (the Verlet skin of the engines' neighbour lists), ``r_end``
    (the tables' last knot, 0 if none).

:func:`unpack_params` turns the three back into :class:`NodeWeights` (the node-level part, run by
:mod:`flashschnet.fused.nodes`), :class:`BasisSpec` and one :class:`FilterWeights` per block (the edge-level
part, run by an engine).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Dict, List, Optional, Tuple

import torch

from ..errors import InputError
from ..names import MATMULS
from .quant import dequantize_weight
from .table import ORDERS, table_end


def fused_unsupported_reason(cfg: Dict[str, Any]) -> str:
    """Why the fused backends cannot run this (normalized) config; "" when they can."""
    if cfg["activation"] != "tanh":
        return f"the fused backends implement the tanh activation only (this model uses {cfg['activation']!r})"
    for what, c in (("basis", cfg["rbf"]["cutoff"]), ("filter", cfg["cutoff"])):
        if c["kind"] == "cosine" and float(c["cutoff_lower"]) != 0.0:
            return f"the fused backends support cosine cutoffs with cutoff_lower = 0 only ({what} has {c['cutoff_lower']})"
    return ""


#: the packed layout's version, the first of its ints: a change of the fields below is a new version
LAYOUT_VERSION = 2
#: the layout's ints, in order (module docstring)
INT_FIELDS = ("version", "n_blocks", "n_hidden", "basis_kind", "rbf_env", "filt_env", "quantized", "matmul",
              "cuda_graph", "table_order")
#: the layout's floats, in order (model length unit)
FLOAT_FIELDS = ("alpha", "basis_lower", "rc_rbf", "rc_filt", "rc_graph", "skin", "r_end")
#: positions of the ints (``ints[IntField.N_BLOCKS]``)
IntField = IntEnum("IntField", [(n.upper(), i) for i, n in enumerate(INT_FIELDS)])
#: positions of the floats (``floats[FloatField.SKIN]``)
FloatField = IntEnum("FloatField", [(n.upper(), i) for i, n in enumerate(FLOAT_FIELDS)])


def pack_scalars(ints: Dict[str, int], floats: Dict[str, float]) -> Tuple[List[int], List[float]]:
    """``(ints, floats)`` lists of the layout from values by field name (every field but ``version``, which
    is :data:`LAYOUT_VERSION`); a missing or unknown name is a ValueError."""
    for given, fields in ((ints, INT_FIELDS[1:]), (floats, FLOAT_FIELDS)):
        if set(given) != set(fields):
            raise ValueError(f"flashschnet: layout fields {sorted(given)} are not {sorted(fields)}")
    return ([LAYOUT_VERSION] + [int(ints[n]) for n in INT_FIELDS[1:]],
            [float(floats[n]) for n in FLOAT_FIELDS])


def read_ints(ints: List[int]) -> Dict[str, int]:
    """The layout's ints by field name; raises :class:`InputError` for a layout of another version (or
    without one: those written before the version existed had 8 or 9 ints and no version)."""
    if len(ints) != len(INT_FIELDS) or int(ints[IntField.VERSION]) != LAYOUT_VERSION:
        what = (f"version {int(ints[0])}" if len(ints) == len(INT_FIELDS) else
                f"{len(ints)} ints and no version (written by an older flashschnet)")
        raise InputError(f"flashschnet: a packed weight layout of {what} reached the energy_forces op; this "
                         f"flashschnet reads layout version {LAYOUT_VERSION} ({len(INT_FIELDS)} ints): rebuild the "
                         f"model, its TorchScript or its serialized System with this flashschnet")
    return {n: int(v) for n, v in zip(INT_FIELDS, ints)}


def read_floats(floats: List[float]) -> Dict[str, float]:
    """The layout's floats by field name (:class:`InputError` for a list of another length)."""
    if len(floats) != len(FLOAT_FIELDS):
        raise InputError(f"flashschnet: a packed weight layout with {len(floats)} floats reached the energy_forces "
                         f"op; layout version {LAYOUT_VERSION} has {len(FLOAT_FIELDS)}: rebuild the model with this "
                         f"flashschnet")
    return {n: float(v) for n, v in zip(FLOAT_FIELDS, floats)}


def config_scalars(cfg: Dict[str, Any], alpha: float, skin: float, matmul: str = "auto",
                   cuda_graph: bool = False) -> Tuple[List[int], List[float]]:
    """``(ints, floats)`` of the layout for a normalized config, the ExpNormal ``alpha`` (0 for a Gaussian
    basis), the Verlet ``skin`` (model length unit), the triton backend's ``matmul`` precision and the
    ``cuda_graph`` switch."""
    rb = cfg["rbf"]
    comp = cfg.get("compression")
    ints = dict(n_blocks=int(cfg["num_interactions"]), n_hidden=len(cfg["output_hidden_layer_widths"]),
                basis_kind=0 if rb["kind"] == "gaussian" else 1, rbf_env=int(rb["cutoff"]["kind"] == "cosine"),
                filt_env=int(cfg["cutoff"]["kind"] == "cosine"), quantized=int(cfg.get("quantization") is not None),
                matmul=list(MATMULS).index(matmul), cuda_graph=int(bool(cuda_graph)),
                table_order=0 if comp is None else ORDERS[comp["kind"]])
    floats = dict(alpha=float(alpha), basis_lower=float(rb["cutoff"]["cutoff_lower"]),
                  rc_rbf=float(rb["cutoff"]["cutoff_upper"]), rc_filt=float(cfg["cutoff"]["cutoff_upper"]),
                  rc_graph=float(rb["cutoff"]["cutoff_upper"]), skin=float(skin),
                  r_end=0.0 if comp is None else table_end(cfg))
    return pack_scalars(ints, floats)


class PackedWeights:
    """Mixin of :class:`~flashschnet.nn.schnet.CGSchNet`: its weights in the packed order (TorchScript-able, so
    the scripted network inside an openmm-torch ``TorchForce`` packs them each step -- the tensors themselves,
    never copies, so a moved or retrained model is always seen as it is)."""

    def fused_params(self) -> List[torch.Tensor]:
        """``params`` of the layout (module docstring); Linear layers give ``W`` (and their bias), quantized
        ones ``q, s`` (and their bias)."""
        params: List[torch.Tensor] = [self.embedding_layer.weight, self.rbf_layer.centers(), self.rbf_layer.widths()]
        for block in self.interaction_blocks:
            params += [block.conv.lin1.weight, block.conv.lin2.weight, block.conv.lin2.bias, block.lin.weight,
                       block.lin.bias]
            fn = block.conv.filter_network
            if hasattr(fn, "table"):                   # a FilterTable (compressed model)
                params += [fn.table, fn.scale]
            else:
                for layer in fn.layers:
                    if hasattr(layer, "weight"):       # a Linear (TorchScript resolves this per layer)
                        params.append(layer.weight)
                        bias = layer.bias
                        if bias is not None:
                            params.append(bias)
                    elif hasattr(layer, "weight_q"):   # a QuantLinear
                        params += [layer.weight_q, layer.weight_scale]
                        bias = layer.bias
                        if bias is not None:
                            params.append(bias)
        for layer in self.output_network.layers:
            if hasattr(layer, "weight"):
                params.append(layer.weight)
                bias = layer.bias
                if bias is not None:
                    params.append(bias)
            elif hasattr(layer, "weight_q"):
                params += [layer.weight_q, layer.weight_scale]
                bias = layer.bias
                if bias is not None:
                    params.append(bias)
        return params


@dataclass
class BasisSpec:
    """The radial basis and the two envelopes (model length unit)."""

    kind: str                 # "gaussian" | "expnormal"
    centers: torch.Tensor     # gaussian: offset [K]; expnormal: means [K]
    widths: torch.Tensor      # gaussian: coeff [] (negative); expnormal: betas [K]
    alpha: float              # expnormal only
    lower: float              # basis cutoff_lower (expnormal uses it)
    rbf_env: bool             # cosine envelope on the basis
    rc_rbf: float
    filt_env: bool            # cosine envelope on the filter
    rc_filt: float
    rc_graph: float


@dataclass
class FilterWeights:
    """One block's filter network. ``A1``/``A2`` are the weights computed with (dequantized for a
    quantized model); ``A1q``/``A1s``, ``A2q``/``A2s`` the stored 16-bit values and float32 scales (None
    unless quantized), which the Triton kernels load instead."""

    A1: torch.Tensor   # [F, K]
    a1: torch.Tensor   # [F]
    A2: torch.Tensor   # [F, F]
    A1q: Optional[torch.Tensor] = None   # [F, K] float16 / bfloat16
    A1s: Optional[torch.Tensor] = None   # [F] float32
    A2q: Optional[torch.Tensor] = None   # [F, F]
    A2s: Optional[torch.Tensor] = None   # [F]


@dataclass
class TableWeights:
    """One block's tabulated filter (:mod:`flashschnet.nn.table`): ``table`` [n, Q, F] as stored, ``scale``
    [Q, F] float32, the last knot ``r_end``."""

    table: torch.Tensor
    scale: torch.Tensor
    r_end: float

    @property
    def knots(self) -> int:
        return int(self.table.shape[0])

    @property
    def order(self) -> int:
        return int(self.table.shape[1])


def is_table(f) -> bool:
    return isinstance(f, TableWeights)


@dataclass
class NodeWeights:
    """The node-level weights (model dtype; quantized output weights dequantized)."""

    embedding: torch.Tensor                       # [types, H]
    blocks: List[Dict[str, torch.Tensor]]         # L1 [F,H], L2 [H,F], b2 [H], L [H,H], b [H]
    out: List[Tuple[torch.Tensor, Optional[torch.Tensor]]]   # output MLP layers (W, c); last c is None


def unpack_params(params: List[torch.Tensor], ints: List[int], floats: List[float],
                  with_filters: bool = True) -> Tuple[NodeWeights, BasisSpec, List[FilterWeights]]:
    """The parts of the packed layout (module docstring). Quantized weights (field ``quantized``) are dequantized
    into the dtype of the embedding (the model's dtype); a compressed model's blocks give :class:`TableWeights`
    (tables as stored) instead of :class:`FilterWeights`. ``with_filters=False`` skips the filter networks
    (returns an empty list; the per-step call, whose engine holds its own filters)."""
    iv, fv = read_ints(ints), read_floats(floats)
    quantized, order, r_end = iv["quantized"], iv["table_order"], fv["r_end"]
    emb, centers, widths = params[0], params[1], params[2]
    dt = emb.dtype
    k = 3

    def weight(needed: bool = True):
        nonlocal k
        if quantized:
            q, s = params[k], params[k + 1]
            k += 2
            return (dequantize_weight(q, s, dt) if needed else None), q, s
        k += 1
        return params[k - 1], None, None

    def take():
        nonlocal k
        k += 1
        return params[k - 1]

    blocks, filters = [], []
    for _ in range(iv["n_blocks"]):
        blocks.append({"L1": take(), "L2": take(), "b2": take(), "L": take(), "b": take()})
        if order:
            table, scale = take(), take()
            if with_filters:
                filters.append(TableWeights(table=table, scale=scale, r_end=r_end))
            continue
        A1, A1q, A1s = weight(with_filters)
        a1 = take()
        A2, A2q, A2s = weight(with_filters)
        if with_filters:
            filters.append(FilterWeights(A1=A1, a1=a1, A2=A2, A1q=A1q, A1s=A1s, A2q=A2q, A2s=A2s))
    out = []
    for _ in range(iv["n_hidden"]):
        W = weight()[0]
        out.append((W, take()))
    out.append((weight()[0], None))
    basis = BasisSpec(kind="gaussian" if iv["basis_kind"] == 0 else "expnormal", centers=centers, widths=widths,
                      alpha=fv["alpha"], lower=fv["basis_lower"], rbf_env=bool(iv["rbf_env"]), rc_rbf=fv["rc_rbf"],
                      filt_env=bool(iv["filt_env"]), rc_filt=fv["rc_filt"], rc_graph=fv["rc_graph"])
    return NodeWeights(embedding=emb, blocks=blocks, out=out), basis, filters


def step_options(ints: List[int]) -> Tuple[str, bool]:
    """``(matmul name, cuda_graph)`` of the layout's ``ints`` (checked as :func:`read_ints` does; once per step)."""
    if len(ints) != len(INT_FIELDS) or int(ints[IntField.VERSION]) != LAYOUT_VERSION:
        read_ints(ints)                                  # raises, saying which layout it got
    return list(MATMULS)[int(ints[IntField.MATMUL])], bool(ints[IntField.CUDA_GRAPH])


def unpack(model) -> Tuple[NodeWeights, BasisSpec, List[FilterWeights]]:
    """The parts of a :class:`~flashschnet.nn.schnet.CGSchNet`'s layout, through the same packing the op
    receives. Raises :class:`InputError` for configs the fused backends do not implement."""
    reason = fused_unsupported_reason(model.config)
    if reason:
        raise InputError(f"{reason}; use backend='reference'")
    return unpack_params(model.fused_params(), model.fused_ints, model.fused_floats)
