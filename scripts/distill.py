"""``flashschnet-distill``: a cheap inner model of a CGSchNet model on one protein, for distilled multiple time
stepping (``flashschnet-simulate --mts INNER --outer-dt FS``).

    flashschnet-distill MODEL PDB --out inner.pt [--frames 400] [--interval 25] [--replicas 4] [--seed 1]
                        [--perturbation 0.02] [--weight 10] [--holdout 0.2] [--threads N] [--force]

Exit status: 0 done, 2 bad input (one-line message), 3 the full model blew up while sampling; 5, 6, 7 the inner
model could not be written: 5 no space left, 6 not allowed to write, 7 another I/O error (written whole or not at
all).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from flashschnet.names import BACKENDS, COMPRESSIONS

from ._cli import Parser, SEED, THREADS, check_output_file, exit_statuses, finish, float_type, int_type


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-distill",
        epilog=exit_statuses("3 the full model blew up while sampling frames"),
        description="Distil an inner model for distilled multiple time stepping (DMTS): run the full model (priors "
                    "+ network) on the protein, collect frames and frames displaced slightly, fit per-bond, "
                    "per-angle and per-dihedral terms to the network's forces there (linear least squares), report "
                    "the force error on held-out frames, and write the inner model. It applies to this model and "
                    "this protein only. See docs/sampling.md for what it buys and where it stops.",
    )
    p.add_argument("model", help="flashschnet checkpoint or mlcg export (the teacher)")
    p.add_argument("pdb", help="all-atom protein structure (PDB) the runs will use")
    p.add_argument("--out", required=True, help="the inner model file to write (e.g. inner.pt)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument("--frames", type=int_type(2), default=400, help="frames per replica (default 400)")
    p.add_argument("--interval", type=int_type(1), default=25, help="steps between frames (default 25)")
    p.add_argument("--equilibration", type=int_type(0), default=1000,
                   help="steps before the first frame (default 1000)")
    p.add_argument("--replicas", type=int_type(1), default=4, help="packed replicas sampled at once (default 4)")
    p.add_argument("--dt", type=float_type(0.0, 50.0, low_open=True), default=4.0,
                   help="time step of the sampling runs, fs (default 4)")
    p.add_argument("--temperature", type=float_type(0.0, low_open=True), default=300.0, help="K (default 300)")
    p.add_argument("--perturbation", type=float_type(0.0), default=0.02,
                   help="Gaussian displacement of the perturbed frames, model length unit (Angstrom) per coordinate "
                        "(default 0.02; 0: no perturbed frames)")
    p.add_argument("--weight", type=float_type(0.0), default=10.0,
                   help="weight of the perturbed frames' force changes in the fit (default 10)")
    p.add_argument("--holdout", type=float_type(0.0, 1.0, low_open=True, high_open=True), default=0.2,
                   help="fraction of each replica's frames, the last ones, held out to measure the error (default 0.2)")
    p.add_argument("--bond-degree", type=int_type(0, 6), default=2,
                   help="polynomial degree of the bond terms in (r - r_mean) (default 2; 0: no bond terms)")
    p.add_argument("--angle-degree", type=int_type(0, 6), default=2,
                   help="polynomial degree of the angle terms in (cos theta - mean) (default 2; 0: none)")
    p.add_argument("--harmonics", type=int_type(0, 6), default=3,
                   help="Fourier harmonics of the dihedral terms (default 3; 0: none). All three 0: an empty inner "
                        "model, the priors alone inside (plain multiple time stepping)")
    p.add_argument("--compress", choices=list(COMPRESSIONS), default=None,
                   help="the teacher's filter tables, as flashschnet-simulate's --compress (default: simulate's)")
    p.add_argument("--backend", choices=list(BACKENDS), default=None, help="the teacher's backend (default torch)")
    p.add_argument("--seed", type=SEED, default=1, help="seed of the sampling runs and displacements (default 1)")
    p.add_argument("--threads", type=THREADS, default=None, help="PyTorch and OpenMM CPU threads (default: theirs)")
    p.add_argument("--quiet", action="store_true", help="(accepted for symmetry with the other commands)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def job(echo):
        from flashschnet.errors import InputError
        from flashschnet.openmm.distill import DistillSettings, distill
        from flashschnet.options import ModelOptions

        check_output_file(args.out, "--out")
        options = ModelOptions(backend=args.backend)
        if args.compress is not None:
            options.compress = args.compress
        settings = DistillSettings(model=args.model, pdb=args.pdb, out=args.out, frames=args.frames,
                                   interval=args.interval, equilibration=args.equilibration, replicas=args.replicas,
                                   dt_fs=args.dt, temperature_K=args.temperature, perturbation=args.perturbation,
                                   weight=args.weight, holdout=args.holdout, seed=args.seed, threads=args.threads,
                                   bond_degree=args.bond_degree, angle_degree=args.angle_degree,
                                   harmonics=args.harmonics, options=options)
        settings.validate()                         # (an --out that is an input is refused, --force or not)
        if os.path.exists(args.out) and not args.force:
            raise InputError(f"--out {args.out}: exists; choose another file or pass --force")
        return distill(settings, echo=echo)

    def summary(inner) -> str:
        from flashschnet.openmm.distill import summary as text

        return text(inner, args.out)

    return finish("flashschnet-distill", job, summary)


if __name__ == "__main__":
    sys.exit(main())
