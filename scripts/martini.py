"""``flashschnet-martini``: the same all-atom PDB as a MARTINI 3 system, run in OpenMM.

    flashschnet-martini PDB --forcefield-dir DIR --steps N --out OUT [--platform CPU] [--seed S] [--dt 20]
                        [--temperature 300] [--report-interval STEPS] [--resume] [--padding 1.5] [--salt 0.15]
                        [--no-elastic | --go]
    flashschnet-martini --resume --out OUT [--steps N]      (the run's own settings and files, by content)
    flashschnet-martini --fetch-forcefield DIR               (the MARTINI 3.0.0 .itp files, then exit)

Exit status: 0 done, 2 bad input (one-line message), 3 the simulation blew up (the last good checkpoint is
kept); 5, 6, 7 an output could not be written: 5 no space left, 6 not allowed to write, 7 another I/O error (one
line naming the file; the last good checkpoint is kept and --resume continues once the cause is gone).
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import List, Optional

from ._cli import Parser, add_run_arguments, exit_statuses, finish, given_settings


class FetchForcefield(argparse.Action):
    """``--fetch-forcefield DIR``: write the MARTINI 3.0.0 parameter files into DIR and exit, like ``--version``
    (no PDB, --steps or --out needed)."""

    def __call__(self, parser, namespace, values, option_string=None):
        def job(echo):
            from flashschnet.openmm.martini.forcefield import fetch_forcefield

            return fetch_forcefield(values, echo)

        parser.exit(finish("flashschnet-martini", job,
                           lambda d: f"done: MARTINI 3.0.0 parameter files in {d}; use --forcefield-dir {d}"))


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-martini",
        epilog=exit_statuses("3 the simulation blew up (the last good checkpoint is kept: --resume)"),
        description="Map an all-atom protein PDB to MARTINI 3 (martinize2: DSSP secondary structure, elastic "
                    "network, or the Go model with --go), solvate it (insane: W beads, 0.15 M NaCl, counter-ions), "
                    "build the OpenMM System (LJ shifted at 1.1 nm, reaction field eps_r 15) and run Langevin dynamics at 20 fs. Writes "
                    "the system files, topology.pdb, trajectory.dcd, a CSV log and checkpoints into --out.",
    )
    p.add_argument("pdb", nargs="?", default=None,
                   help="all-atom protein structure (PDB); with --resume, the run's own (system/ in --out)")
    p.add_argument("--forcefield-dir", default=None,
                   help="folder with martini_v3.0.0.itp, martini_v3.0.0_ions_v1.itp, martini_v3.0.0_solvents_v1.itp "
                        "(--fetch-forcefield DIR fetches them; with --resume: default the run's, checked by content)")
    p.add_argument("--fetch-forcefield", action=FetchForcefield, metavar="DIR",
                   help="download the MARTINI 3.0.0 parameter files (from the martini-shaker 0.1.1 wheel on PyPI, "
                        "checked by SHA-256) into DIR, then exit")
    p.add_argument("--padding", type=float, default=None,
                   help="least distance from the protein to the box faces, nm, 1.1 to 10 (default 1.5)")
    p.add_argument("--salt", type=float, default=None, help="NaCl concentration, mol/L, 0 to 6 (default 0.15)")
    p.add_argument("--no-elastic", action="store_true", default=None, help="no elastic network (martinize2 without -elastic)")
    p.add_argument("--go", action="store_true", default=None,
                   help="the Go model (MartiniGo: martinize2 -go, contacts from the structure, Go virtual sites) "
                        "instead of the elastic network")
    p.add_argument("--ignore", default=None, help="comma-separated residue names to drop (default HOH)")
    p.add_argument("--minimize-iterations", type=int, default=None,
                   help="energy-minimisation iterations before the run (default 5000; 0: none)")
    add_run_arguments(p, dt_fs=20.0, seed_help="random seed for solvation, velocities and the integrator",
                      threads_help="CPU platform threads (default: OpenMM's)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.openmm.martini.run import MartiniSettings, run_martini

    given = given_settings(args, MartiniSettings, exclude=("out", "elastic"))   # elastic: --no-elastic, --go
    if args.no_elastic or args.go:
        given["elastic"] = False
    if args.go:
        given["go"] = True
    fields = dict(given)
    settings = MartiniSettings(pdb=fields.pop("pdb", None), forcefield_dir=fields.pop("forcefield_dir", None),
                               out=args.out, steps=fields.pop("steps", None), **fields)
    return finish("flashschnet-martini", lambda echo: run_martini(settings, resume=args.resume, progress=not args.quiet,
                                                                 echo=echo, given=list(given)), summary,
                  run_dir=args.out)


def summary(r) -> str:
    """The last line of a run: what was done, where, how fast."""
    from flashschnet.openmm.runner import nothing_to_do

    if r.nothing_to_do:
        return nothing_to_do(r.out, r.steps_done, r.steps_target)
    speed = f"{r.ns_per_day_per_replica:.4g} ns/day" if math.isfinite(r.ns_per_day_per_replica) else "no steps run"
    return f"done: {r.steps_done} steps of {r.n_beads} MARTINI particles in {r.out} ({speed})"


if __name__ == "__main__":
    sys.exit(main())
