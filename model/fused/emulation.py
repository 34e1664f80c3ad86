"""The triton kernels' reduced-precision filter products (tf32, bf16), emulated on the CPU.

What the GPU does. The triton backend's kernels (:mod:`flashschnet.kernels.cfconv`) run the filter network's matrix
products -- and only those -- in the matrix-product precision ``matmul`` ("auto" = tf32 for float32 weights): the
forward kernel ``e A1^T`` and ``s A2^T``; the backward kernel those two plus the forward-mode tangents
``(de/dd) A1^T`` and ``(ds/dd) A2^T`` (``ds/dd = (1 - s^2) (de/dd) A1^T``). Each product rounds *both* operands
(activation and weight) to the precision's format and accumulates exact products in float32. Everything else --
distances, basis, tanh, the envelopes, ``W * h`` and the sums over pairs, and the node-level layers (``lin1``,
``lin2``, ``lin``, the output network, run by PyTorch with ``torch.backends.cuda.matmul.allow_tf32`` off, i.e.
float32) -- is plain float32. Under ``TRITON_INTERPRET=1`` ``tl.dot(..., input_precision="tf32")`` is an exact
float32 product (the interpreter's ``create_dot`` is ``np.matmul`` and ignores the precision), so the kernel tests
cannot show the tf32 error: it is emulated here (``python tools/device/tf32_accuracy.py`` turns it into the prediction
that the GPU check holds a device's numbers to, ``docs/tf32-accuracy.json``).

Two independent emulations, each of exactly those four products (:func:`energy_forces` by name):

* ``"fused"`` -- the fused path's own arithmetic (:func:`flashschnet.fused.nodes.energy_forces_fused` with the
  ``torch`` backend's pair engine, the same ``W``/``dW/dd`` forward-mode formulas as the kernels), its
  :class:`~flashschnet.fused.torch_engine.ExactFilter` replaced by a ``RoundedFilter``, which rounds the operands
  of the four products (:func:`fused_energy_forces`). ``"ieee"`` is then the ``torch`` backend itself (bit for
  bit: checked by the tests).
* ``"plain"`` -- mlcg-style plain PyTorch: the ``reference`` backend's network (ordered pair list, materialised
  per-edge tensors, ``index_add``, autograd for everything but the filter network), whose filter network is
  :class:`_TangentFilter`: the same rounded products and tangents, written again in plain PyTorch
  (:func:`plain_energy_forces`).

Operand roundings (:data:`ROUNDINGS`): ``"ieee"`` none; ``"tf32"`` to tf32's 10 explicit mantissa bits, round to
nearest with ties away from zero (:func:`round_tf32`: ``cvt.rna.tf32.f32``, CUTLASS's float-to-tf32 conversion);
``"tf32_rz"`` the low 13 bits dropped (:func:`truncate_tf32`): what a tensor core does with float32 bit patterns
that were not converted first (PTX ISA, ``wgmma``: "will truncate lower 13 bits of the 32-bit input data"); Triton
hands ``tl.dot``'s float32 operands to the MMA instructions unconverted (its MMAv2 lowering bitcasts the float32
registers into the operands), so the GPU may well behave like this one (the device check tells); ``"bf16"`` to
bfloat16, round to nearest even (:func:`round_bf16`; the kernels' ``matmul="bf16"``: weights cast once, activations
rounded by ``.to(bf16)``). Accumulation is float32 in every case (products of rounded operands are exact in
float32).

Errors (:func:`rel`, the device check's ``rel(a, b)``): ``max |a - b| / max |b|`` over all frames, the float32
output cast to float64 against float64 truth (:func:`oracle_dataset`: mlcg's own float64 energies and forces of
the oracle frames); :func:`rel_rmse` is ``||a - b|| / ||b||``.
"""
from __future__ import annotations

import os
import platform
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

__all__ = ["ORACLE", "PRECISIONS", "IMPLEMENTATIONS", "ROUNDINGS", "rounding", "round_tf32", "truncate_tf32",
           "round_bf16", "fused_energy_forces", "plain_energy_forces", "energy_forces", "rel", "rel_rmse", "errors",
           "oracle_dataset", "environment"]

#: the mlcg oracle (fixture A) the prediction is made on, as a checkout names it
ORACLE = "tests/data/oracles/mlcg_schnet_A.pt"
#: the product precisions emulated (:data:`ROUNDINGS`'s names)
PRECISIONS = ("ieee", "tf32", "tf32_rz", "bf16")
#: the two emulations (:func:`energy_forces`)
IMPLEMENTATIONS = ("fused", "plain")


# ------------------------------------------------------------------------------------------------ roundings


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest tf32 value (10 explicit mantissa bits; ties away from zero, as ``cvt.rna.tf32.f32``),
    as float32. Subnormals round the same way (on their fixed exponent); a finite value may round up to +-inf;
    inf and NaN come back unchanged (NaN stays NaN)."""
    x = x.to(torch.float32).contiguous()
    i = x.view(torch.int32)
    finite = (i & 0x7F800000) != 0x7F800000
    # adding half a tf32 ulp to the bit pattern carries into the kept bits (and the exponent) exactly when the
    # dropped 13 bits are >= 0x1000; the sign bit is untouched for finite values (no int32 overflow either)
    r = (i + 0x1000) & ~0x1FFF
    return torch.where(finite, r, i).view(torch.float32)


def truncate_tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 -> tf32 by dropping the low 13 mantissa bits (round toward zero), as float32; inf/NaN unchanged."""
    x = x.to(torch.float32).contiguous()
    i = x.view(torch.int32)
    finite = (i & 0x7F800000) != 0x7F800000
    return torch.where(finite, i & ~0x1FFF, i).view(torch.float32)


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    return x.to(torch.float32).to(torch.bfloat16).to(torch.float32)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


#: operand rounding of each product precision
ROUNDINGS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "ieee": _identity, "tf32": round_tf32, "tf32_rz": truncate_tf32, "bf16": round_bf16}


def rounding(precision: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The operand rounding of ``precision`` (a name of :data:`ROUNDINGS`); ValueError for another name."""
    if precision not in ROUNDINGS:
        raise ValueError(f"unknown product precision {precision!r} (known: {', '.join(ROUNDINGS)})")
    return ROUNDINGS[precision]


# ------------------------------------------------------------------------- emulation 1: the fused path's math


def _fused_classes():
    """The classes ``RoundedFilter`` and ``RoundedEngine`` (made on first use: they subclass the torch engine's)."""
    from .torch_engine import ExactFilter, TorchPairEngine

    class RoundedFilter(ExactFilter):
        """:class:`~flashschnet.fused.torch_engine.ExactFilter` with the operands of its four products rounded
        by ``rnd`` -- the kernels' (:func:`flashschnet.kernels.cfconv._input_half`, forward and backward):
        ``e A1^T``, ``(de/dd) A1^T``, ``s A2^T``, ``(ds/dd) A2^T``."""

        def __init__(self, f, basis, rnd):
            super().__init__(f, basis)
            self.rnd = rnd
            self.A1t = rnd(f.A1).t()
            self.A2t = rnd(f.A2).t()

        def values(self, d, rad):
            e, _, c, _ = rad
            r = self.rnd
            s = torch.tanh(r(e) @ self.A1t + self.f.a1)
            return (r(s) @ self.A2t) * c.unsqueeze(-1)

        def values_and_derivative(self, d, rad):
            e, de, c, dc = rad
            r = self.rnd
            s = torch.tanh(r(e) @ self.A1t + self.f.a1)
            ds = (r(de) @ self.A1t) * (1.0 - s * s)
            y, dy = r(s) @ self.A2t, r(ds) @ self.A2t
            return y * c.unsqueeze(-1), dy * c.unsqueeze(-1) + y * dc.unsqueeze(-1)

    class RoundedEngine(TorchPairEngine):
        """The ``torch`` backend's pair engine (Verlet list, chunks, fused C pair loops) with every block's exact
        filter a :class:`RoundedFilter` (``precision`` "ieee": the engine unchanged)."""

        def __init__(self, basis, filters, precision: str, skin: float):
            super().__init__(basis, filters, skin=skin)
            self.precision = precision
            self.rnd = rounding(precision)

        def prepare(self, positions):
            super().prepare(positions)
            key, sources = self._sources
            if self.precision != "ieee" and not all(isinstance(s, RoundedFilter) for s in sources):
                self._sources = (key, [RoundedFilter(s.f, s.basis, self.rnd) if isinstance(s, ExactFilter) else s
                                       for s in sources])

    return RoundedFilter, RoundedEngine


def fused_energy_forces(network, positions: torch.Tensor, bead_types: torch.Tensor,
                        precision: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` of a CGSchNet (its dtype; float32 for the kernels' case) by the
    fused path's arithmetic with the filter products at ``precision`` (a name of :data:`ROUNDINGS`)."""
    from .nodes import energy_forces_fused
    from ..nn.layout import unpack

    _, RoundedEngine = _fused_classes()
    weights, basis, filters = unpack(network)
    engine = RoundedEngine(basis, filters, precision, skin=float(network.skin))
    pos = positions.to(weights.embedding.dtype)
    if pos.dim() == 2:
        pos = pos.unsqueeze(0)
    with torch.no_grad():
        e, f = energy_forces_fused(weights, pos.contiguous(), bead_types, engine)
    return e, f


# ------------------------------------------------------------------------ emulation 2: plain PyTorch (mlcg)


class _TangentFilter(torch.autograd.Function):
    """``y = tanh(r(e) r(A1)^T + a1) r(A2)^T`` per edge (no envelope) with ``dy/dd`` carried forward through the
    same rounded products; the backward passes ``sum_f gy * dy/dd`` to the distances (nothing to the weights:
    forces only)."""

    @staticmethod
    def forward(ctx, d, e, de, A1, a1, A2, rnd):
        A1t, A2t = rnd(A1).t(), rnd(A2).t()
        s = torch.tanh(torch.matmul(rnd(e), A1t) + a1)
        ds = torch.matmul(rnd(de), A1t) * (1.0 - s * s)
        y = torch.matmul(rnd(s), A2t)
        ctx.save_for_backward(torch.matmul(rnd(ds), A2t))
        return y

    @staticmethod
    def backward(ctx, gy):
        (dy,) = ctx.saved_tensors
        return (gy * dy).sum(-1), None, None, None, None, None, None


def plain_energy_forces(network, positions: torch.Tensor, bead_types: torch.Tensor,
                        precision: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies and forces of a (reference-backend) CGSchNet, mlcg's way -- ordered pairs, per-edge tensors,
    ``index_add``, autograd -- but with each filter network's products at ``precision`` (:class:`_TangentFilter`).
    Only the exact filter network (``Linear, tanh, Linear``) is supported."""
    rnd = rounding(precision)
    net = network
    pos = positions.to(net.embedding_layer.weight.dtype)
    if pos.dim() == 2:
        pos = pos.unsqueeze(0)
    R, N = pos.shape[0], pos.shape[1]
    with torch.enable_grad():
        p = pos.detach().clone().requires_grad_(True)
        flat = p.reshape(R * N, 3)
        src, dst = net.neighbor_list(p)
        d = torch.linalg.vector_norm(flat.index_select(0, src) - flat.index_select(0, dst), dim=-1)
        with torch.no_grad():
            # the basis and its derivative per edge (each e_k depends on its own d only: one forward-mode tangent)
            e, de = torch.func.jvp(net.rbf_layer, (d.detach(),), (torch.ones_like(d),))
        env = net.cutoff(d)
        x = net.embedding_layer(bead_types).repeat(R, 1)
        for block in net.interaction_blocks:
            conv = block.conv
            layers = list(conv.filter_network.layers)
            if len(layers) != 3 or not isinstance(layers[0], torch.nn.Linear) or \
                    not isinstance(layers[1], torch.nn.Tanh):
                raise ValueError("plain_energy_forces needs exact filter networks (Linear, Tanh, Linear)")
            y = _TangentFilter.apply(d, e, de, layers[0].weight.detach(), layers[0].bias.detach(),
                                     layers[2].weight.detach(), rnd)
            w = y * env.unsqueeze(-1)
            h = conv.lin1(x)
            m = torch.zeros_like(h).index_add_(0, dst, h.index_select(0, src) * w)
            x = x + block.lin(block.activation(conv.lin2(m)))
        energy = net.output_network(x).reshape(R, N).sum(1)
        grad = torch.autograd.grad(energy.sum(), p)[0]
    return energy.detach(), -grad.detach()


def energy_forces(implementation: str, network, positions, bead_types, precision: str):
    """``fused_energy_forces`` or ``plain_energy_forces`` by name (:data:`IMPLEMENTATIONS`)."""
    if implementation == "fused":
        return fused_energy_forces(network, positions, bead_types, precision)
    if implementation == "plain":
        return plain_energy_forces(network, positions, bead_types, precision)
    raise ValueError(f"unknown implementation {implementation!r} (known: {', '.join(IMPLEMENTATIONS)})")


# ------------------------------------------------------------------------------------------------ errors


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b| / max |b|`` -- the device script's ``rel``."""
    return float((a - b).abs().max() / b.abs().max())


def rel_rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` (all elements)."""
    return float(((a - b) ** 2).sum().sqrt() / (b ** 2).sum().sqrt())


def errors(e: torch.Tensor, f: torch.Tensor, e_true: torch.Tensor, f_true: torch.Tensor) -> Dict[str, float]:
    """Errors of energies/forces (any float dtype; cast to float64) against float64 truth."""
    e, f = e.double(), f.double()
    return {"energy_rel_err_vs_float64": rel(e, e_true), "forces_rel_err_vs_float64": rel(f, f_true),
            "forces_rel_rmse_vs_float64": rel_rmse(f, f_true),
            "energy_max_abs_err": float((e - e_true).abs().max()),
            "forces_max_abs_err": float((f - f_true).abs().max())}


# ------------------------------------------------------------------------------------------------ inputs


def oracle_dataset(path: Union[str, os.PathLike] = ORACLE, frames: Optional[Sequence[int]] = None,
                   label: Optional[str] = None) -> Dict[str, object]:
    """The mlcg oracle's frames (fixture A file at ``path``; all, or the indices ``frames``) and mlcg's float64
    energies/forces as the truth: ``name, model`` (``label``, default ``str(path)``), ``positions`` [F, N, 3] (A,
    float64), ``bead_types``, ``e_true``, ``f_true`` (kcal/mol, kcal/mol/A), ``truth``."""
    fx = torch.load(path, weights_only=True)
    sel = slice(None) if frames is None else list(frames)
    pos = fx["positions_A"].double()[sel]
    return {"name": "mlcg oracle frames", "model": str(path) if label is None else label, "positions": pos,
            "bead_types": fx["bead_types"], "e_true": fx["energies_kcal_mol"].double()[sel],
            "f_true": fx["forces_kcal_mol_A"].double()[sel], "truth": "mlcg float64 (the oracle file)"}


def environment() -> Dict[str, object]:
    """What the recorded numbers depend on to the last bit: torch/numpy versions and the CPU (the float32
    products and elementwise functions are vectorised per instruction set; a different CPU flips a few tf32
    roundings)."""
    cpu, isa = platform.processor() or "", ""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), cpu)
        # the model name of a virtual machine can be as coarse as "AMD EPYC": the instruction sets are what the
        # vectorised float32 code depends on (seen: two "AMD EPYC" machines whose ieee forces differed by 7e-4)
        flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
        isa = " ".join(sorted(fl for fl in flags if fl.startswith(("avx", "fma", "sse", "f16c", "amx"))))
    except OSError:
        pass
    return {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpu": cpu, "isa": isa}
