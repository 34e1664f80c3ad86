"""``flashschnet-compare``: MARTINI 3 vs FlashSchNet on the same PDB, same MD engine (OpenMM), same machine.

    flashschnet-compare PDB --model MODEL --forcefield-dir DIR --out OUT [--martini-ns 1] [--flashschnet-ns 0.01]
                        [--replicas 8] [--platform NAME] [--threads N] [--workers N] [--analyse-only]

Writes OUT/martini/ and OUT/flashschnet/ (the two runs, as flashschnet-martini and flashschnet-simulate write
them) and OUT/comparison.{md,json,png} and OUT/sampling.png (statistical inefficiency and effective samples per
wall-clock hour of Rg and Q, per force field). Exit status: 0 done, 2 bad input, 3 a simulation blew up; 5, 6, 7 an
output could not be written: 5 no space left, 6 not allowed to write, 7 another I/O error (one line naming the file;
the comparison files are written all or none).
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from flashschnet.names import BACKENDS, COMPRESSIONS

from ._cli import Parser, exit_statuses, finish, require_extras


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-compare",
        epilog=exit_statuses("3 a simulation blew up"),
        description="Run the same all-atom PDB as MARTINI 3 (flashschnet-martini, 20 fs) and with a FlashSchNet "
                    "model (flashschnet-simulate, 4 fs, packed replicas) on the same CPU cores, then compare "
                    "speed (ns/day), structure (backbone RMSD, Rg, RMSF, native contacts Q, secondary-structure "
                    "retention) and sampling efficiency (statistical inefficiency and effective samples per "
                    "wall-clock hour of Rg and Q, with error bars) in OUT/comparison.md, .json and .png and "
                    "OUT/sampling.png.",
    )
    p.add_argument("pdb", help="all-atom protein structure (PDB)")
    p.add_argument("--model", required=True, help="flashschnet checkpoint (with priors for this protein, or --priors)")
    p.add_argument("--forcefield-dir", required=True, help="folder with the MARTINI 3.0.0 .itp files")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--martini-ns", type=float, default=1.0, help="simulated time of the MARTINI run, ns (default 1)")
    p.add_argument("--flashschnet-ns", type=float, default=0.01,
                   help="simulated time per replica of the FlashSchNet run, ns (default 0.01)")
    p.add_argument("--replicas", type=int, default=8,
                   help="FlashSchNet replicas, packed into one Context per --workers process (default 8)")
    p.add_argument("--frames", type=int, default=50, help="trajectory frames per run (default 50)")
    p.add_argument("--platform", default=None,
                   help="OpenMM platform for both runs (default: each force field's fastest on a CPU, measured: CPU for "
                        "MARTINI 3, Reference for FlashSchNet)")
    p.add_argument("--seed", type=int, default=1, help="random seed of both runs (default 1)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads (cores) for both runs (default: the libraries', all cores)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="FlashSchNet's replicas in N processes of one thread each (flashschnet-simulate --workers; "
                        "default: one per core, --threads or all, at most one per replica, where dask's distributed "
                        "is installed; 1: one process on --threads threads)")
    p.add_argument("--priors", default=None, help="prior file to use instead of the model's priors")
    p.add_argument("--backend", choices=list(BACKENDS), default=None,
                   help="network implementation (default triton on CUDA, torch otherwise)")
    p.add_argument("--compress", choices=list(COMPRESSIONS), default="auto",
                   help="the network's filter tables, as flashschnet-simulate's --compress: default auto (float32 "
                        "tables on the torch and triton backends in single precision), none for the exact filter "
                        "network")
    p.add_argument("--go", action="store_true",
                   help="MARTINI with the Go model (martinize2 -go) instead of the elastic network")
    p.add_argument("--mts", default=None, metavar="INNER_MODEL",
                   help="run FlashSchNet with distilled multiple time stepping: an inner model of --model on this PDB "
                        "(flashschnet-distill)")
    p.add_argument("--mts-any-teacher", action="store_true",
                   help="use an --mts inner model distilled from another model file than --model (refused otherwise)")
    p.add_argument("--dt", type=float, default=4.0, metavar="FS",
                   help="FlashSchNet's time step in fs (default 4); with --mts the inner step")
    p.add_argument("--outer-dt", type=float, default=None, metavar="FS",
                   help="with --mts (required): the outer time step in fs, a whole multiple of --dt (docs/sampling.md)")
    p.add_argument("--analyse-only", action="store_true", help="re-analyse the runs already in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def given_options(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> List[str]:
    """The options ``argv`` gives (their first spelling, e.g. ``--replicas``), whatever their values: the parser's
    defaults suppressed, what is left was on the command line."""
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    given = vars(parser.parse_args(argv))
    return [a.option_strings[0] for a in parser._actions if a.option_strings and a.dest in given]


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.openmm.compare import CompareSettings, compare

    settings = CompareSettings(
        pdb=args.pdb, model=args.model, forcefield_dir=args.forcefield_dir, out=args.out, martini_ns=args.martini_ns,
        flashschnet_ns=args.flashschnet_ns, replicas=args.replicas, frames=args.frames, platform=args.platform,
        seed=args.seed, threads=args.threads, workers=args.workers, priors=args.priors, backend=args.backend,
        compress=args.compress,
        analyse_only=args.analyse_only, go=args.go, dt_fs=args.dt, mts=args.mts, outer_dt_fs=args.outer_dt,
        mts_any_teacher=args.mts_any_teacher)

    def summary(result) -> str:
        m, f = result["martini"]["speed"]["ns_per_day"], result["flashschnet"]["speed"]["ns_per_day"]
        return (f"done: MARTINI {m:.4g} ns/day, FlashSchNet {f:.4g} ns/day per replica x {result['flashschnet']['replicas']}; "
                f"report in {args.out}/comparison.md (+ .json, .png, sampling.png)")

    def job(echo):
        require_extras("matplotlib", "pymbar")       # comparison.png, sampling.png; statistical inefficiency
        from flashschnet.openmm.benchmark.machine import cpu_model

        return compare(settings, machine=cpu_model(), progress=not args.quiet, echo=echo,
                       given=given_options(build_parser(), argv))

    return finish("flashschnet-compare", job, summary,
                  then="then run it again into an empty --out (or, when both runs finished, with --analyse-only)")


if __name__ == "__main__":
    sys.exit(main())
