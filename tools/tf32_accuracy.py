"""What tf32 products do to energies and forces, predicted on the CPU before a GPU measures it.

A maintainer's tool (not installed with the package; imported by ``tests/tools/test_tf32_accuracy.py``). Run as::

    python tools/tf32_accuracy.py [--out docs/tf32-accuracy.json] [--threads 1] [--trpcage-frames 8]

It prints a table and writes ``docs/tf32-accuracy.json``, whose ``"prediction"`` is what
``tools/device_checks.py`` holds the GPU's tf32 numbers to. ``--interpreter-check [FRAME ...]`` also runs the real
Triton kernels in Triton's CPU interpreter with its tf32 ``tl.dot`` patched to round the operands
(:func:`interpreter_check`, ~20 s per frame and rounding): they agree with the emulation of the same rounding to
the noise floor.

What the GPU does. The triton backend's kernels (:mod:`flashschnet.kernels.cfconv`) run the filter network's matrix
products -- and only those -- in the matrix-product precision ``matmul`` ("auto" = tf32 for float32 weights): the
forward kernel ``e A1^T`` and ``s A2^T``; the backward kernel those two plus the forward-mode tangents
``(de/dd) A1^T`` and ``(ds/dd) A2^T`` (``ds/dd = (1 - s^2) (de/dd) A1^T``). Each product rounds *both* operands
(activation and weight) to the precision's format and accumulates exact products in float32. Everything else --
distances, basis, tanh, the envelopes, ``W * h`` and the sums over pairs, and the node-level layers (``lin1``,
``lin2``, ``lin``, the output network, run by PyTorch with ``torch.backends.cuda.matmul.allow_tf32`` off, i.e.
float32) -- is plain float32. Under ``TRITON_INTERPRET=1`` ``tl.dot(..., input_precision="tf32")`` is an exact
float32 product (the interpreter's ``create_dot`` is ``np.matmul`` and ignores the precision), so the kernel tests
cannot show the tf32 error: it is emulated here.

Two independent emulations, each of exactly those four products:

* ``"fused"`` -- the fused path's own arithmetic (:func:`flashschnet.fused.driver.energy_forces_fused` with the
  ``torch`` backend's pair engine, the same ``W``/``dW/dd`` forward-mode formulas as the kernels), its
  :class:`~flashschnet.fused.torch_engine.ExactFilter` replaced by :class:`RoundedFilter`, which rounds the operands
  of the four products. ``"ieee"`` is then the ``torch`` backend itself (bit for bit: checked by the tests).
* ``"plain"`` -- mlcg-style plain PyTorch: the ``reference`` backend's network (ordered pair list, materialised
  per-edge tensors, ``index_add``, autograd for everything but the filter network), whose filter network is
  :class:`_TangentFilter`: the same rounded products and tangents, written again in plain PyTorch.

Operand roundings (:data:`ROUNDINGS`): ``"ieee"`` none; ``"tf32"`` to tf32's 10 explicit mantissa bits, round to
nearest with ties away from zero (:func:`round_tf32`: ``cvt.rna.tf32.f32``, CUTLASS's float-to-tf32 conversion);
``"tf32_rz"`` the low 13 bits dropped (:func:`truncate_tf32`): what a tensor core does with float32 bit patterns
that were not converted first (PTX ISA, ``wgmma``: "will truncate lower 13 bits of the 32-bit input data"); Triton
hands ``tl.dot``'s float32 operands to the MMA instructions unconverted (its MMAv2 lowering bitcasts the float32
registers into the operands), so the GPU may well behave like this one (the device check tells); ``"bf16"`` to
bfloat16, round to nearest even (:func:`round_bf16`; the kernels' ``matmul="bf16"``: weights cast once, activations
rounded by ``.to(bf16)``). Accumulation is float32 in every
case (products of rounded operands are exact in float32).

Errors (:func:`rel`, the device script's ``rel(a, b)``): ``max |a - b| / max |b|`` over all frames, the float32
output cast to float64 against float64 truth -- mlcg's own float64 energies and forces for the oracle frames, the
``reference`` backend in float64 for trp-cage; ``rel_rmse`` is ``||a - b|| / ||b||``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
ORACLE = "tests/data/oracles/mlcg_schnet_A.pt"
TRPCAGE_MODEL = "examples/trpcage_trained.pt"
TRPCAGE_PDB = "examples/1L2Y_trpcage.pdb"
DEFAULT_OUT = "docs/tf32-accuracy.json"
#: trp-cage frames (the PDB structure, then copies with Gaussian displacements), their seed and sigma (A)
TRPCAGE_FRAMES, TRPCAGE_SEED, TRPCAGE_SIGMA_A = 8, 20261203, 0.3
PRECISIONS = ("ieee", "tf32", "tf32_rz", "bf16")
IMPLEMENTATIONS = ("fused", "plain")
#: the device check's rule, stated in the JSON (the factor and the floor)
RULE_FACTOR, RULE_FLOOR = 2.0, 1e-6
RULE_FLOOR_TEXT = "1e-6"


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


def _rounding(precision: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if precision not in ROUNDINGS:
        raise ValueError(f"unknown product precision {precision!r} (known: {', '.join(ROUNDINGS)})")
    return ROUNDINGS[precision]


# ------------------------------------------------------------------------- emulation 1: the fused path's math


def _fused_classes():
    from flashschnet.fused.torch_engine import ExactFilter, TorchPairEngine

    class RoundedFilter(ExactFilter):
        """:class:`~flashschnet.fused.torch_engine.ExactFilter` with the operands of its four products rounded
        by ``rnd`` -- the kernels' ``_first_layer``/``_second_layer`` (forward) and ``_first_half``/
        ``_second_from_half`` (backward): ``e A1^T``, ``(de/dd) A1^T``, ``s A2^T``, ``(ds/dd) A2^T``."""

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
            self.rnd = _rounding(precision)

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
    from flashschnet.fused.driver import energy_forces_fused
    from flashschnet.fused.layout import unpack

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
    rnd = _rounding(precision)
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


# ------------------------------------------------------------- check: the Triton kernels themselves (interpreted)


def interpreter_check(frames: Sequence[int] = (0,), precisions: Sequence[str] = ("ieee", "tf32", "tf32_rz"),
                      oracle: str = ORACLE) -> Dict[str, object]:
    """Run the real Triton kernels (``backend="triton"``, ``matmul="tf32"``) on oracle ``frames`` in Triton's CPU
    interpreter, whose ``tl.dot(..., input_precision="tf32")`` is patched here to round both operands with
    :data:`ROUNDINGS` [``precision``] ("ieee": the interpreter as it is, an exact float32 product), and compare with
    :func:`fused_energy_forces` at each precision: the kernels' output with a rounding must sit at the noise floor
    (the ``ulp_shift`` of :func:`measure`) from the emulation with the same rounding and ~1e-3 from the others --
    which shows that the emulation rounds exactly the operands the kernels hand to ``tl.dot``. Slow (~20 s per
    frame and precision). Must run before anything imported the kernels without ``TRITON_INTERPRET=1``.
"""
    os.environ["TRITON_INTERPRET"] = "1"
    kernels = sys.modules.get("flashschnet.kernels.cfconv")
    if kernels is not None and type(kernels._cfconv_fwd_kernel).__name__ != "InterpretedFunction":
        raise RuntimeError("interpreter_check: the Triton kernels were already compiled for a GPU in this process")
    import flashschnet
    from flashschnet.fused.op import clear_engine_cache
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    ds = oracle_dataset(oracle, frames=frames)
    pos, types = ds["positions"].float(), ds["bead_types"]
    fnet = flashschnet.load_model(_repo(oracle), backend="torch", dtype=torch.float32).network
    emulated = {p: tuple(t.double() for t in fused_energy_forces(fnet, pos, types, p)) for p in precisions}
    from flashschnet.kernels.interpreter import install

    install()                     # Triton 3.6's interpreter under numpy >= 2.4
    orig_dot = interpreter.InterpreterBuilder.create_dot
    state = {"round": None, "tf32_dots": 0}

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == ir.INPUT_PRECISION.TF32 and state["round"] is not None and a.data.dtype == np.float32:
            state["tf32_dots"] += 1
            r = state["round"]
            aa = r(torch.from_numpy(np.ascontiguousarray(a.data))).numpy()
            bb = r(torch.from_numpy(np.ascontiguousarray(b.data))).numpy()
            return interpreter.TensorHandle(np.matmul(aa, bb, dtype=d.data.dtype) + d.data, d.dtype.scalar)
        return orig_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    out: Dict[str, object] = {"frames": list(frames), "kernels": "backend='triton', matmul='tf32', TRITON_INTERPRET=1",
                              "results": {}}
    interpreter.InterpreterBuilder.create_dot = create_dot
    try:
        for prec in precisions:
            state["round"] = None if prec == "ieee" else _rounding(prec)
            state["tf32_dots"] = 0
            clear_engine_cache()
            net = flashschnet.load_model(_repo(oracle), backend="triton", dtype=torch.float32, matmul="tf32").network
            t0 = time.perf_counter()
            e, f = (t.double() for t in net.energy_forces(pos, types))
            row = {"seconds": round(time.perf_counter() - t0, 1), "rounded_dots": state["tf32_dots"],
                   "err_vs_float64": {"energy": rel(e, ds["e_true"]), "forces": rel(f, ds["f_true"])}}
            row["vs_emulation"] = {p: {"energy_rel_diff": rel(e, emulated[p][0]),
                                       "forces_rel_diff": rel(f, emulated[p][1])} for p in precisions}
            out["results"][f"interpreter dot rounded as {prec}"] = row
    finally:
        interpreter.InterpreterBuilder.create_dot = orig_dot
        clear_engine_cache()
    return out


# ------------------------------------------------------------------------------------------------ errors


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b| / max |b|`` -- the device script's ``rel``."""
    return float((a - b).abs().max() / b.abs().max())


def rel_rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b) ** 2).sum().sqrt() / (b ** 2).sum().sqrt())


def errors(e: torch.Tensor, f: torch.Tensor, e_true: torch.Tensor, f_true: torch.Tensor) -> Dict[str, float]:
    """Errors of energies/forces (any float dtype; cast to float64) against float64 truth."""
    e, f = e.double(), f.double()
    return {"energy_rel_err_vs_float64": rel(e, e_true), "forces_rel_err_vs_float64": rel(f, f_true),
            "forces_rel_rmse_vs_float64": rel_rmse(f, f_true),
            "energy_max_abs_err": float((e - e_true).abs().max()),
            "forces_max_abs_err": float((f - f_true).abs().max())}


# ------------------------------------------------------------------------------------------------ datasets


def _repo(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


def oracle_dataset(path: str = ORACLE, frames: Optional[Sequence[int]] = None) -> Dict[str, object]:
    """The mlcg oracle frames (fixture A) and mlcg's float64 energies/forces as the truth."""
    fx = torch.load(_repo(path), weights_only=True)
    sel = slice(None) if frames is None else list(frames)
    pos = fx["positions_A"].double()[sel]
    return {"name": "mlcg oracle frames", "model": path, "positions": pos, "bead_types": fx["bead_types"],
            "e_true": fx["energies_kcal_mol"].double()[sel], "f_true": fx["forces_kcal_mol_A"].double()[sel],
            "truth": "mlcg float64 (the oracle file)"}


def trpcage_dataset(model: str = TRPCAGE_MODEL, pdb: str = TRPCAGE_PDB, frames: int = TRPCAGE_FRAMES,
                    seed: int = TRPCAGE_SEED, sigma: float = TRPCAGE_SIGMA_A) -> Dict[str, object]:
    """Trp-cage: the PDB structure and ``frames - 1`` copies displaced by N(0, sigma^2) per coordinate (A);
    the truth is the ``reference`` backend in float64."""
    import flashschnet

    m64 = flashschnet.load_model(_repo(model), backend="reference", dtype=torch.float64)
    mol = flashschnet.map_pdb(str(_repo(pdb)), mapping=m64.config.get("cg_mapping") or "5bead")
    x0 = torch.as_tensor(np.asarray(mol.positions), dtype=torch.float64)
    g = torch.Generator().manual_seed(int(seed))
    noise = torch.randn((max(frames, 1) - 1,) + tuple(x0.shape), generator=g, dtype=torch.float64) * sigma
    pos = torch.cat([x0.unsqueeze(0), x0.unsqueeze(0) + noise])
    types = torch.as_tensor(np.asarray(mol.bead_types), dtype=torch.int64)
    e_true, f_true = m64.energy_forces(pos, types)
    return {"name": "trp-cage frames", "model": model, "pdb": pdb, "positions": pos, "bead_types": types,
            "e_true": e_true.double(), "f_true": f_true.double(),
            "truth": "reference backend, float64",
            "frames_note": f"the PDB structure + {pos.shape[0] - 1} copies displaced by N(0, {sigma}^2 A^2) "
                           f"per coordinate (torch.Generator seed {seed})"}


def measure(ds: Dict[str, object], precisions: Sequence[str] = PRECISIONS,
            implementations: Sequence[str] = IMPLEMENTATIONS, keep: Optional[Dict] = None) -> Dict[str, object]:
    """Errors of every (implementation, precision) in float32 on the dataset ``ds``; also the float32 ``torch``
    backend's own numbers (``"backend_torch"``, which ``fused``+``ieee`` must equal) and the agreement of the two
    implementations per precision (``"agreement"``) beside how far the fused path's outputs move when every
    coordinate moves by one float32 ulp (``"ulp_shift"``: the noise floor of that agreement). ``keep`` (a dict),
    if given, receives the float32 outputs by ``(implementation, precision)``."""
    import flashschnet

    nets = {"fused": flashschnet.load_model(_repo(ds["model"]), backend="torch", dtype=torch.float32).network,
            "plain": flashschnet.load_model(_repo(ds["model"]), backend="reference", dtype=torch.float32).network}
    pos32, types = ds["positions"].float(), ds["bead_types"]
    out: Dict[str, object] = {"dataset": ds["name"], "model": ds["model"], "truth": ds["truth"],
                              "frames": int(pos32.shape[0]), "beads": int(pos32.shape[1]), "results": {},
                              "agreement": {}}
    for k in ("pdb", "frames_note"):
        if k in ds:
            out[k] = ds[k]
    outputs = {}
    for impl in implementations:
        for prec in precisions:
            t0 = time.perf_counter()
            e, f = energy_forces(impl, nets[impl], pos32, types, prec)
            outputs[impl, prec] = (e.double(), f.double())
            if keep is not None:
                keep[impl, prec] = (e.detach().clone(), f.detach().clone())
            row = errors(e, f, ds["e_true"], ds["f_true"])
            row["seconds"] = round(time.perf_counter() - t0, 3)
            out["results"][f"{impl}/{prec}"] = row
    e, f = nets["fused"].energy_forces(pos32, types)
    out["results"]["backend_torch/ieee"] = errors(e, f, ds["e_true"], ds["f_true"])
    if "fused" in implementations and "ieee" in precisions:
        out["fused_ieee_equals_torch_backend"] = bool(torch.equal(outputs["fused", "ieee"][0], e.double())
                                                      and torch.equal(outputs["fused", "ieee"][1], f.double()))
    if "fused" in implementations:
        # how far float32-level noise moves each precision's outputs: every coordinate one float32 ulp up (the
        # rounding decisions of the products flip here and there). The two implementations -- or a GPU doing
        # the same rounding -- cannot be expected to agree more closely than this.
        shifted = torch.nextafter(pos32, torch.full_like(pos32, float("inf")))
        out["ulp_shift"] = {}
        for prec in precisions:
            e1, f1 = fused_energy_forces(nets["fused"], shifted, types, prec)
            ea, fa = outputs["fused", prec]
            out["ulp_shift"][prec] = {"energy_rel_diff": rel(e1.double(), ea), "forces_rel_diff": rel(f1.double(), fa)}
    if set(implementations) >= {"fused", "plain"}:
        for prec in precisions:
            (ea, fa), (eb, fb) = outputs["fused", prec], outputs["plain", prec]
            out["agreement"][prec] = {"energy_rel_diff": rel(ea, eb), "forces_rel_diff": rel(fa, fb)}
    return out


# ------------------------------------------------------------------------------------------------ report


RULE = (f"GPU tf32 passes if its error is <= {RULE_FACTOR:g} x the prediction + {RULE_FLOOR_TEXT}: for each of "
        "energy_rel_err_vs_float64 and forces_rel_err_vs_float64, rel(a, b) = max|a - b| / max|b| over all 7 frames "
        "of the oracle, a = the triton backend's float32 output (matmul='auto' = tf32) cast to float64, b = the "
        "oracle's float64 energies_kcal_mol / forces_kcal_mol_A; the prediction is tf32 (round to nearest) "
        "below. The same rule with the 'ieee' prediction applies to matmul='ieee' and with 'bf16' to "
        "matmul='bf16'. An error above the tf32 bound but within the same rule on 'tf32_rz' says the tensor cores "
        "truncate the float32 operands instead of rounding them; rel(gpu, prediction_outputs[...]) tells the two apart "
        "directly (~1e-4 for the rounding the hardware does, ~3e-3 for the other).")


def prediction(oracle_result: Dict[str, object], implementation: str = "fused") -> Dict[str, object]:
    """The ``"prediction"`` block of the JSON from :func:`measure` on the full oracle."""
    pred: Dict[str, object] = {"oracle": ORACLE}
    for prec in PRECISIONS:
        r = oracle_result["results"][f"{implementation}/{prec}"]
        pred[prec] = {k: r[k] for k in ("energy_rel_err_vs_float64", "forces_rel_err_vs_float64")}
    pred["implementation"] = implementation
    pred["rule"] = RULE
    return pred


#: precisions whose emulated oracle outputs go into the JSON (``"prediction_outputs"``)
KEPT_OUTPUTS = ("tf32", "tf32_rz")


def _f32_list(t: torch.Tensor):
    """A float32 tensor as nested lists of floats with 9 significant digits (enough to give float32 back)."""
    return np.vectorize(lambda v: float(f"{v:.9g}"), otypes=[float])(t.detach().cpu().float().numpy()).tolist()


def prediction_outputs(kept: Dict) -> Dict[str, object]:
    """The fused-path emulation's float32 energies ``[7]`` and forces ``[7, 49, 3]`` on the oracle frames for
    :data:`KEPT_OUTPUTS`: a GPU's tf32 outputs should lie within ~1e-4 (``rel``) of the emulation of the rounding
    its tensor cores do (as far as a one-ulp shift of the positions moves them), and ~3e-3 from the other one."""
    out: Dict[str, object] = {"implementation": "fused", "units": "kcal/mol, kcal/mol/A", "note": (
        "rel(gpu, emulated) for the rounding the hardware does: ~1e-4 (float32-level differences flip a few "
        "roundings: see datasets[*].ulp_shift and .agreement), ~3e-3 for the other rounding")}
    for prec in KEPT_OUTPUTS:
        if ("fused", prec) in kept:
            e, f = kept["fused", prec]
            out[prec] = {"energies": _f32_list(e), "forces": _f32_list(f)}
    return out


def environment() -> Dict[str, object]:
    """What the recorded numbers depend on to the last bit: torch/numpy versions and the CPU (the float32
    products and elementwise functions are vectorised per instruction set; a different CPU flips a few tf32
    roundings)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpu": cpu}


def bound(pred: Dict[str, object], precision: str, key: str) -> float:
    """The device check's bound for ``precision``'s ``key``: factor x prediction + floor."""
    return RULE_FACTOR * float(pred[precision][key]) + RULE_FLOOR


def table(results: Sequence[Dict[str, object]]) -> str:
    """The printed table: per dataset, precision and implementation the errors vs float64; on ``plain`` rows how
    far the two implementations' forces are apart, on ``fused`` rows how far a one-ulp shift moves them."""
    lines = []
    hdr = (f"{'dataset':<20} {'products':<9} {'impl':<13} {'E rel err':>10} {'F rel err':>10} {'F rel RMSE':>10}"
           f" {'F fused-plain':>13} {'F 1-ulp shift':>13}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for res in results:
        for key, r in res["results"].items():
            impl, prec = key.split("/")
            agree = res["agreement"].get(prec, {}).get("forces_rel_diff") if impl == "plain" else None
            shift = res.get("ulp_shift", {}).get(prec, {}).get("forces_rel_diff") if impl == "fused" else None
            lines.append(f"{res['dataset']:<20} {prec:<9} {impl:<13} {r['energy_rel_err_vs_float64']:>10.3e} "
                         f"{r['forces_rel_err_vs_float64']:>10.3e} {r['forces_rel_rmse_vs_float64']:>10.3e} "
                         f"{'' if agree is None else format(agree, '.2e'):>13} "
                         f"{'' if shift is None else format(shift, '.2e'):>13}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Emulate the triton kernels' tf32 (and bf16) filter products on the "
                                "CPU; energy/force errors vs float64 on the mlcg oracle and trp-cage frames; "
                                "writes the JSON with the GPU check's prediction.")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"JSON to write (default {DEFAULT_OUT}; '-' for none)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--interpreter-check", type=int, nargs="*", default=None, metavar="FRAME",
                   help="also run the real Triton kernels in Triton's CPU interpreter with its tf32 dot rounded, on "
                        "these oracle frames (none given: frame 0), against the emulation (slow: ~30 s per frame "
                        "and rounding)")
    p.add_argument("--trpcage-frames", type=int, default=TRPCAGE_FRAMES,
                   help=f"trp-cage frames incl. the PDB structure (default {TRPCAGE_FRAMES}; 0 to skip)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    t0 = time.perf_counter()
    check = None
    if args.interpreter_check is not None:
        check = interpreter_check(args.interpreter_check or [0])
        for name, r in check["results"].items():
            print(f"{name} ({r['rounded_dots']} rounded tl.dot calls): " + "; ".join(
                f"vs emulated {p}: E {v['energy_rel_diff']:.2e} F {v['forces_rel_diff']:.2e}"
                for p, v in r["vs_emulation"].items()))
    kept: Dict = {}
    results = [measure(oracle_dataset(), keep=kept)]
    if args.trpcage_frames > 0:
        results.append(measure(trpcage_dataset(frames=args.trpcage_frames)))
    print(table(results))
    pred = prediction(results[0])
    print("\nprediction (oracle, fused-path emulation):")
    for prec in PRECISIONS:
        print(f"  {prec:<8} energy {pred[prec]['energy_rel_err_vs_float64']:.3e}   "
              f"forces {pred[prec]['forces_rel_err_vs_float64']:.3e}")
    print(f"rule: {RULE}")
    cmd = "python tools/tf32_accuracy.py" + ("" if argv is None and len(sys.argv) < 2 else
                                             " " + " ".join(sys.argv[1:] if argv is None else argv))
    report = {
        "format": "flashschnet-tf32-accuracy-v1",
        "prediction": pred,
        "prediction_outputs": prediction_outputs(kept),
        "settings": {"command": cmd, "threads": args.threads, "environment": environment(),
                     "date_utc": time.strftime("%Y-%m-%d", time.gmtime()),
                     "seconds": round(time.perf_counter() - t0, 1)},
        "emulation": {
            "products": "the filter network's four products, both operands rounded: e A1^T, (de/dd) A1^T, s A2^T, "
                        "(ds/dd) A2^T (flashschnet.kernels.cfconv _first_layer/_second_layer/_first_half/"
                        "_second_from_half); float32 accumulation; everything else float32",
            "precisions": {"ieee": "no rounding (float32)",
                           "tf32": "round to nearest, ties away from zero, to 10 mantissa bits (cvt.rna.tf32.f32)",
                           "tf32_rz": "low 13 mantissa bits dropped (tensor cores fed unconverted float32)",
                           "bf16": "bfloat16, round to nearest even (weights and activations)"},
            "implementations": {"fused": "flashschnet.fused.driver.energy_forces_fused + the torch pair engine, "
                                         "ExactFilter -> RoundedFilter (forward-mode W and dW/dd as the kernels)",
                                "plain": "reference backend network (mlcg-style autograd), filter network as a "
                                         "custom autograd function with the same rounded products and tangents"},
        },
        "datasets": results,
    }
    if check is not None:
        report["interpreter_check"] = check
    if args.out != "-":
        out = _repo(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
