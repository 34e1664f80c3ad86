"""``flashschnet-simulate``: PDB in, CG trajectories out.

    flashschnet-simulate PDB --model MODEL --steps N --out DIR [--replicas R] [--platform Reference] [--seed S]
                         [--dt 4] [--temperature 300] [--report-interval STEPS] [--resume]
                         [--backend torch|triton|reference] [--quantize none|fp16|bf16|fp16-cast|bf16-cast]
                         [--matmul auto|ieee|tf32|bf16|fp16] [--cuda-graph] [--on-blowup stop|drop]
                         [--compress auto|none|float32|float16|bfloat16] [--compress-knots N]
                         [--temperatures 300:450:8 | 300,320,345] [--exchange-interval 500]
                         [--workers N | --scheduler ADDRESS] [--blocks B]
                         [--mts INNER_MODEL --outer-dt FS [--mts-any-teacher]]
    flashschnet-simulate --resume --out DIR [--steps N]      (the run's own settings and files, by content)

Exit status: 0 done, 2 bad input (one-line message), 3 the simulation blew up (the last good checkpoint is
kept; the message names step, replica and bead), or with ``--on-blowup drop`` every replica was dropped;
4 the Dask cluster of an ensemble run cannot go on (no worker left; the last checkpoint is kept: --resume);
5, 6, 7 an output could not be written: 5 no space left (ENOSPC, EDQUOT, EFBIG), 6 not allowed to write (EROFS,
EACCES, EPERM), 7 another I/O error (EIO, ...) -- one line naming the file and what to do; the last good checkpoint
is kept (no stale ``checkpoint.chk.tmp``) and --resume continues bitwise once the cause is gone.
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import List, Optional

from flashschnet.names import (BACKENDS, COMPRESSIONS, DEFAULT_KNOTS, MAPPINGS, MATMULS, NETWORK_FORCES, ON_BLOWUP,
                               PRECISIONS, VARIANTS)

from ._cli import Parser, add_run_arguments, exit_statuses, finish, given_settings, int_type


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-simulate",
        epilog=exit_statuses("3 the simulation blew up (the last good checkpoint is kept: --resume)",
                             "4 the Dask cluster of an ensemble run cannot go on (--resume)"),
        description="Map an all-atom protein PDB to CG beads and run Langevin dynamics in OpenMM with a CGSchNet "
                    "model (plus its priors). Writes one DCD per replica, the CG topology as PDB, a CSV log and "
                    "checkpoints into --out.",
    )
    p.add_argument("pdb", nargs="?", default=None,
                   help="all-atom protein structure (PDB); with --resume, the run's own (cleaned.pdb in --out)")
    p.add_argument("--model", default=None,
                   help="flashschnet checkpoint or mlcg export file (with --resume: default the run's, found by its "
                        "path and checked by its sha256)")
    p.add_argument("--replicas", type=int, default=None, help="independent copies packed into one Context (default 1)")
    p.add_argument("--mapping", choices=MAPPINGS, default=None, help="CG mapping (default: the model's)")
    p.add_argument("--priors", default=None, help="prior file to use instead of the model's priors")
    p.add_argument("--precision", choices=list(PRECISIONS), default=None, help="network precision (default single)")
    p.add_argument("--backend", choices=list(BACKENDS), default=None,
                   help="network implementation: reference (mlcg-style autograd), torch (fused CPU path), "
                        "triton (fused GPU kernels); default triton on CUDA, torch otherwise")
    p.add_argument("--quantize", choices=list(VARIANTS), default=None,
                   help="store the filter- and output-network weights in 16 bits: fp16/bf16 with one float32 scale "
                        "per output channel, or the plain cast (-cast); fp32 accumulation (default none; see "
                        "docs/quantization.md)")
    p.add_argument("--compress", choices=list(COMPRESSIONS), default=None,
                   help="replace every block's filter network by a table of the pair distance stored as float32, "
                        "float16 or bfloat16 (quintic Hermite, exact forces of the tabulated energy; applied before "
                        "--quantize); none: the exact filter network; default auto: float32 tables (error vs "
                        "float64 at float32 rounding, several times faster) on the torch and triton backends in "
                        "single precision, the exact filter network with --backend reference, --precision double, "
                        "--quantize or --matmul. Tables are built once per model file and cached in "
                        "$FLASHSCHNET_CACHE_DIR/tables (default ~/.cache/flashschnet/tables); see docs/compression.md")
    p.add_argument("--compress-knots", type=int_type(4), default=None, metavar="N",
                   help=f"knots per filter table (only with tables; default {DEFAULT_KNOTS})")
    p.add_argument("--matmul", choices=list(MATMULS), default=None,
                   help="precision of the triton backend's filter-network products: auto (tf32 for float32 weights, "
                        "the weights' own type for --quantize fp16/bf16, exact for double), ieee (exact; the torch "
                        "backend's engine on a GPU), tf32, bf16, fp16 (default auto; other backends are exact)")
    p.add_argument("--cuda-graph", action="store_true", default=None,
                   help="replay each network step as a CUDA graph (fused backends on CUDA; speed only)")
    p.add_argument("--network-force", choices=NETWORK_FORCES, default=None,
                   help="how OpenMM calls the network: torch (openmm-torch TorchForce, default) or python "
                        "(openmm.PythonForce, no openmm-torch needed)")
    p.add_argument("--on-blowup", choices=ON_BLOWUP, default=None,
                   help="when one replica blows up (NaN, or a force above --max-force): stop the run (default; exit "
                        "status 3, the last good checkpoint is kept) or drop that replica (frozen at its last good "
                        "frame, no more frames or log rows; listed in OUT/dropped.json) and go on with the others")
    m = p.add_argument_group("distilled multiple time stepping (docs/sampling.md)")
    m.add_argument("--mts", default=None, metavar="INNER_MODEL",
                   help="an inner model distilled from --model on this protein (flashschnet-distill): the priors and "
                        "the inner model every --dt, the network's difference from it every --outer-dt")
    m.add_argument("--outer-dt", type=float, default=None, metavar="FS",
                   help="with --mts (required): the outer time step in fs, a whole multiple of --dt (the "
                        "longest stable one is measured, docs/sampling.md); "
                        "--steps and the intervals count outer steps")
    m.add_argument("--mts-any-teacher", action="store_true", default=None,
                   help="use an --mts inner model distilled from another model file than --model (refused "
                        "otherwise; noted in the log and recorded in run.json)")
    g = p.add_argument_group("parallel tempering and ensembles (docs/ensembles.md)")
    g.add_argument("--temperatures", default=None, metavar="TMIN:TMAX:N|T1,T2,...",
                   help="parallel tempering: one walker per temperature (K), a geometric ladder TMIN:TMAX:N or an "
                        "increasing list; walkers swap temperatures (Metropolis, neighbouring rungs); writes "
                        "T<K>.dcd per temperature besides replica_WWW.dcd per walker, exchanges.csv, walkers.csv")
    g.add_argument("--exchange-interval", type=int_type(1), default=None, metavar="STEPS",
                   help="steps between exchanges (default 500)")
    g.add_argument("--workers", type=int_type(1), default=None, metavar="N",
                   help="run the walkers' blocks on a local Dask cluster of N worker processes (pip install "
                        "'flashschnet[cluster]'); with --temperatures or --replicas")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the blocks on an existing Dask cluster (e.g. tcp://host:8786: dask-jobqueue's "
                        "SLURMCluster, dask-cuda's LocalCUDACluster); the run directory must be on a shared file system")
    g.add_argument("--blocks", type=int_type(1), default=None, metavar="B",
                   help="split the walkers into B packed Contexts (default: --workers, else 1); trajectories depend "
                        "on the seed and B, not on the number of workers; fixed on --resume")
    add_run_arguments(p, dt_fs=4.0, seed_help="random seed for velocities and the integrator",
                      threads_help="PyTorch CPU threads (default: the cores no other program keeps busy when the run "
                                   "starts, at most PyTorch's default; see flashschnet.threads)",
                      platform_help="Reference: on a CPU it runs a CG System faster than the CPU platform, whose "
                                    "worker-thread hand-offs cost more than the priors; CUDA on a GPU")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.openmm.simulate import RunSettings, run

    given = given_settings(args, RunSettings)
    fields = dict(given)
    settings = RunSettings(pdb=fields.pop("pdb", None), model=fields.pop("model", None), out=args.out,
                           steps=fields.pop("steps", None), **fields)
    return finish("flashschnet-simulate", lambda echo: run(settings, resume=args.resume, progress=not args.quiet,
                                                          echo=echo, given=list(given)), summary,
                  run_dir=args.out)


def summary(r) -> str:
    """The last line of a run: what was done, where, how fast."""
    from flashschnet.openmm.runner import nothing_to_do

    if r.nothing_to_do:
        return nothing_to_do(r.out, r.steps_done, r.steps_target)
    speed = (f"{r.ns_per_day_per_replica:.3g} ns/day per replica, {r.ns_per_day_per_replica * r.replicas:.3g} aggregate"
             if math.isfinite(r.ns_per_day_per_replica) else "no steps run")
    return (f"done: {r.steps_done} steps x {r.replicas} replica{'s' if r.replicas != 1 else ''} of {r.n_beads} beads "
            f"in {r.out} ({speed}"
            + (f"; {len(r.dropped)} of {r.replicas} replicas dropped" if r.on_blowup == "drop" or r.dropped else "")
            + (f"; {r.rollbacks} lost block(s) recovered" if r.rollbacks else "") + ")")


if __name__ == "__main__":
    sys.exit(main())
