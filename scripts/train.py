"""``flashschnet-train``: a CGSchNet for one protein from all-atom data, in three steps.

    flashschnet-train md PDB --out DATA.npz --frames F [--interval 500] [--dt 2] [--temperature 300] [--seed S]
    flashschnet-train fit PDB --data DATA.npz --out DIR [--epochs 50] [--batch-frames 16] [--learning-rate 1e-3]
    flashschnet-train validate PDB --model DIR/best.pt --data DATA.npz --out VDIR --steps N [--replicas 4]

``md``: amber14 + GBn2 Langevin MD in OpenMM, positions and forces saved. ``fit``: 5-bead mapping of positions
(slice) and forces (aggregated), Boltzmann-inverted priors (DIR/priors.pt), force matching of the network on the
residual forces with a validation split and early stopping (DIR/best.pt = the model to use, last.pt,
history.json, loss.png). ``validate``: a CG run with the model and histograms/free-energy surface against the
reference (VDIR/validation.png, .json). Exit status 0 done, 2 bad input; 5, 6, 7 an output could not be written:
5 no space left, 6 not allowed to write, 7 another I/O error (one line naming the file; every file is written whole
or not at all: temporary file and rename).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from ._cli import (Parser, SEED, THREADS, check_output_dir, check_output_file, exit_statuses, finish, float_type, int_type,
                   require_extras)


def _device(text: str) -> str:
    """argparse ``type=``: cpu, cuda or cuda:N."""
    t = text.strip()
    if t == "cpu" or t == "cuda" or (t.startswith("cuda:") and t[5:].isdigit()):
        return t
    raise argparse.ArgumentTypeError(f"must be cpu, cuda or cuda:N, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="flashschnet-train", epilog=exit_statuses(),
                                description="Train a CGSchNet (5-bead mapping, mlcg priors) for one protein from "
                                            "all-atom OpenMM data: md -> fit -> validate.")
    sub = p.add_subparsers(dest="step", required=True)
    md = sub.add_parser("md", help="all-atom reference MD (amber14 + GBn2), positions and forces")
    md.add_argument("pdb")
    md.add_argument("--out", required=True, help="output .npz")
    md.add_argument("--frames", type=int_type(1), required=True, help="frames to save")
    md.add_argument("--interval", type=int_type(1, 2**31 - 1), default=500, help="steps between frames (default 500 = 1 ps at 2 fs)")
    md.add_argument("--dt", type=float_type(0.0, 10.0, low_open=True), default=2.0,
                    help="time step, fs, at most 10 (default 2; HBonds constraints)")
    md.add_argument("--temperature", type=float_type(0.0, low_open=True), default=300.0, help="K (default 300)")
    md.add_argument("--equilibration", type=int_type(0), default=5000, help="steps before the first frame (default 5000)")
    md.add_argument("--seed", type=SEED, default=1)
    md.add_argument("--platform", default="CPU")
    md.add_argument("--quiet", action="store_true")

    fit = sub.add_parser("fit", help="map, fit priors, force-match the network")
    fit.add_argument("pdb", help="the PDB the reference run was made from")
    fit.add_argument("--data", required=True, help=".npz from `flashschnet-train md`")
    fit.add_argument("--out", required=True, help="output folder")
    fit.add_argument("--epochs", type=int_type(1), default=50)
    fit.add_argument("--batch-frames", type=int_type(1), default=16)
    fit.add_argument("--learning-rate", type=float_type(0.0, low_open=True), default=1e-3)
    fit.add_argument("--val-fraction", type=float_type(0.0, 1.0, low_open=True, high_open=True), default=0.2,
                     help="share of the frames held out for validation, in (0, 1) (default 0.2)")
    fit.add_argument("--patience", type=int_type(1), default=10,
                     help="epochs without validation improvement before stopping")
    fit.add_argument("--n-degs", type=int_type(1, 17), default=3,
                     help="Fourier terms of the dihedral priors, 1-17 (the fit has 36 bins; default 3)")
    fit.add_argument("--seed", type=SEED, default=1)
    fit.add_argument("--threads", type=THREADS, default=None)
    fit.add_argument("--device", type=_device, default="cpu", help="cpu (default) or cuda: where force matching runs")
    fit.add_argument("--quiet", action="store_true")

    val = sub.add_parser("validate", help="CG run of the model vs the all-atom reference")
    val.add_argument("pdb")
    val.add_argument("--model", required=True)
    val.add_argument("--data", required=True)
    val.add_argument("--out", required=True)
    val.add_argument("--steps", type=int, required=True)
    val.add_argument("--dt", type=float, default=4.0, help="CG time step, fs (default 4)")
    val.add_argument("--replicas", type=int, default=4)
    val.add_argument("--report-interval", type=int, default=100)
    val.add_argument("--seed", type=SEED, default=1)
    val.add_argument("--platform", default=None, help="OpenMM platform of the CG run (default: flashschnet-simulate's)")
    val.add_argument("--threads", type=THREADS, default=None)
    val.add_argument("--quiet", action="store_true")
    return p


def _fit(args, echo):
    import torch

    from flashschnet.cg import map_pdb
    from flashschnet.errors import InputError
    from flashschnet.priors import save_priors
    from flashschnet.train import TrainSettings, fit_priors, map_reference, train_force_matching

    require_extras("matplotlib")                     # loss.png
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {args.device}: no CUDA device here; use --device cpu")
    if os.path.exists(os.path.join(args.out, "best.pt")):
        raise InputError(f"{args.out}: already holds a trained model; choose another --out")
    mol = map_pdb(args.pdb, mapping="5bead")
    data = map_reference(args.data, mol)
    priors = fit_priors(mol, data.positions, data.temperature_K, n_degs=args.n_degs)
    check_output_dir(args.out, "--out")
    save_priors(priors, os.path.join(args.out, "priors.pt"))
    settings = TrainSettings(epochs=args.epochs, batch_frames=args.batch_frames, learning_rate=args.learning_rate,
                             val_fraction=args.val_fraction, patience=args.patience, seed=args.seed,
                             device=args.device)
    meta = {"description": f"CGSchNet force-matched to {data.n_frames} frames of amber14/GBn2 "
                           f"{os.path.basename(args.pdb)} at {data.temperature_K:g} K (flashschnet-train)",
            "placeholder": False, "source": "flashschnet-train", "protein": os.path.basename(args.pdb),
            "reference_data": os.path.basename(args.data)}
    hist = train_force_matching(mol, data.positions, data.forces, priors, args.out, settings,
                                progress=not args.quiet, metadata=meta, echo=echo)
    return hist


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.step == "md":
        def job(echo):
            from flashschnet.atomic import check_not_an_input
            from flashschnet.openmm.reference_md import reference_md

            check_output_file(args.out, "--out")
            check_not_an_input(args.out, "--out", [("PDB", args.pdb)])
            return reference_md(args.pdb, args.out, args.frames, interval=args.interval, temperature_K=args.temperature,
                                dt_fs=args.dt, seed=args.seed, platform=args.platform,
                                equilibration_steps=args.equilibration, progress=not args.quiet, echo=echo)
        return finish("flashschnet-train", job, lambda out: f"done: reference data in {out}")
    if args.step == "fit":
        return finish("flashschnet-train", lambda echo: _fit(args, echo),
                      lambda h: f"done: best validation force MSE {h['best_val']:.4g} (priors alone "
                                f"{h['baseline_val']:.4g}) at epoch {h['best_epoch']}; model {args.out}/best.pt",
                      then="then run it again with an empty --out")

    def job(echo):
        require_extras("matplotlib")                 # validation.png
        from flashschnet.openmm.train_validate import validate

        check_output_dir(args.out, "--out")
        return validate(args.pdb, args.model, args.data, args.out, args.steps, replicas=args.replicas,
                        report_interval=args.report_interval, seed=args.seed, platform=args.platform,
                        threads=args.threads, dt_fs=args.dt, progress=not args.quiet, echo=echo)
    return finish("flashschnet-train", job,
                  lambda s: "done: overlaps " + ", ".join(f"{k} {v:.2f}" for k, v in s["overlap"].items())
                            + f"; {args.out}/validation.png", then="then run it again with an empty --out")


if __name__ == "__main__":
    sys.exit(main())
