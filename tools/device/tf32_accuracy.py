"""What tf32 products do to energies and forces, predicted on the CPU before a GPU measures it.

A maintainer's tool (run from a checkout). Run as::

    python tools/device/tf32_accuracy.py [--out docs/tf32-accuracy.json] [--threads 1] [--trpcage-frames 8]

It prints a table and writes ``docs/tf32-accuracy.json``, whose ``"prediction"`` is what
``tools/device/device_checks.py`` holds the GPU's tf32 numbers to. ``--interpreter-check [FRAME ...]`` also runs the
real Triton kernels in Triton's CPU interpreter with its tf32 ``tl.dot`` patched to round the operands
(:func:`interpreter_check`, ~20 s per frame and rounding): they agree with the emulation of the same rounding to
the noise floor.

What is emulated, how, and the errors' definitions: :mod:`flashschnet.fused.emulation` (the two emulations,
``"fused"`` and ``"plain"``, of the filter network's four products with the operands rounded as ``"ieee"``,
``"tf32"``, ``"tf32_rz"`` or ``"bf16"``). This tool measures them on the oracle's frames (the prediction) and on
trp-cage frames whose truth is the ``reference`` backend in float64, and writes the JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from flashschnet.fused.emulation import (IMPLEMENTATIONS, ORACLE, PRECISIONS, energy_forces, environment, errors,
                                           fused_energy_forces, oracle_dataset, rel, rounding)

REPO_ROOT = Path(__file__).resolve().parents[2]
TRPCAGE_MODEL = "examples/trpcage_trained.pt"
TRPCAGE_PDB = "examples/1L2Y_trpcage.pdb"
DEFAULT_OUT = "docs/tf32-accuracy.json"
#: trp-cage frames (the PDB structure, then copies with Gaussian displacements), their seed and sigma (A)
TRPCAGE_FRAMES, TRPCAGE_SEED, TRPCAGE_SIGMA_A = 8, 20261203, 0.3
#: the device check's rule, stated in the JSON (the factor and the floor)
RULE_FACTOR, RULE_FLOOR = 2.0, 1e-6
RULE_FLOOR_TEXT = "1e-6"


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

    ds = oracle_dataset(_repo(oracle), frames=frames, label=oracle)
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
            state["round"] = None if prec == "ieee" else rounding(prec)
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


# ------------------------------------------------------------------------------------------------ datasets


def _repo(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else REPO_ROOT / p


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
    results = [measure(oracle_dataset(_repo(ORACLE), label=ORACLE), keep=kept)]
    if args.trpcage_frames > 0:
        results.append(measure(trpcage_dataset(frames=args.trpcage_frames)))
    print(table(results))
    pred = prediction(results[0])
    print("\nprediction (oracle, fused-path emulation):")
    for prec in PRECISIONS:
        print(f"  {prec:<8} energy {pred[prec]['energy_rel_err_vs_float64']:.3e}   "
              f"forces {pred[prec]['forces_rel_err_vs_float64']:.3e}")
    print(f"rule: {RULE}")
    cmd = "python tools/device/tf32_accuracy.py" + ("" if argv is None and len(sys.argv) < 2 else
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
                        "(ds/dd) A2^T (flashschnet.kernels.cfconv _input_half); float32 accumulation; everything else "
                        "float32",
            "precisions": {"ieee": "no rounding (float32)",
                           "tf32": "round to nearest, ties away from zero, to 10 mantissa bits (cvt.rna.tf32.f32)",
                           "tf32_rz": "low 13 mantissa bits dropped (tensor cores fed unconverted float32)",
                           "bf16": "bfloat16, round to nearest even (weights and activations)"},
            "implementations": {"fused": "flashschnet.fused.nodes.energy_forces_fused + the torch pair engine, "
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
