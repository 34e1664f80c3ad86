"""``flashschnet-martini``: the same all-atom PDB as a MARTINI 3 system, run in OpenMM.

    flashschnet-martini PDB --forcefield-dir DIR --steps N --out OUT [--platform CPU] [--seed S] [--dt 20]
                        [--temperature 300] [--report-interval 500] [--resume] [--padding 1.5] [--salt 0.15]
                        [--no-elastic | --go]

Exit status: 0 done, 2 bad input (one-line message), 3 the simulation blew up (the last good checkpoint is
kept).
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._cli import add_run_arguments, finish


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="flashschnet-martini",
        description="Map an all-atom protein PDB to MARTINI 3 (martinize2: DSSP secondary structure, elastic "
                    "network, or the Go model with --go), solvate it (insane: W beads, 0.15 M NaCl, counter-ions), "
                    "build the OpenMM System (LJ shifted at 1.1 nm, reaction field eps_r 15) and run Langevin dynamics at 20 fs. Writes "
                    "the system files, topology.pdb, trajectory.dcd, a CSV log and checkpoints into --out.",
    )
    p.add_argument("pdb", help="all-atom protein structure (PDB)")
    p.add_argument("--forcefield-dir", required=True,
                   help="folder with martini_v3.0.0.itp, martini_v3.0.0_ions_v1.itp, martini_v3.0.0_solvents_v1.itp "
                        "(bash tools/get_martini_forcefield.sh DIR fetches them)")
    p.add_argument("--padding", type=float, default=1.5,
                   help="least distance from the protein to the box faces, nm, 1.1 to 10 (default 1.5)")
    p.add_argument("--salt", type=float, default=0.15, help="NaCl concentration, mol/L, 0 to 6 (default 0.15)")
    p.add_argument("--no-elastic", action="store_true", help="no elastic network (martinize2 without -elastic)")
    p.add_argument("--go", action="store_true",
                   help="the Go model (MartiniGo: martinize2 -go, contacts from the structure, Go virtual sites) "
                        "instead of the elastic network")
    p.add_argument("--ignore", default="HOH", help="comma-separated residue names to drop (default HOH)")
    p.add_argument("--minimize-iterations", type=int, default=5000,
                   help="energy-minimisation iterations before the run (default 5000; 0: none)")
    add_run_arguments(p, dt_fs=20.0, report_interval=500, seed_help="random seed for solvation, velocities and the integrator",
                      threads_help="CPU platform threads (default: OpenMM's)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.openmm.martini.run import MartiniSettings, run_martini

    settings = MartiniSettings(
        pdb=args.pdb, forcefield_dir=args.forcefield_dir, out=args.out, steps=args.steps, platform=args.platform,
        seed=args.seed, dt_fs=args.dt, temperature_K=args.temperature, friction_per_ps=args.friction,
        report_interval=args.report_interval, checkpoint_interval=args.checkpoint_interval, padding_nm=args.padding,
        salt_molar=args.salt, elastic=not (args.no_elastic or args.go), go=args.go, ignore=args.ignore,
        minimize_iterations=args.minimize_iterations, threads=args.threads, max_force=args.max_force)
    return finish("flashschnet-martini", lambda echo: run_martini(settings, resume=args.resume,
                                                                 progress=not args.quiet, echo=echo),
                  lambda r: f"done: {r.steps_done} steps of {r.n_beads} MARTINI particles in {r.out} "
                            f"({r.ns_per_day_per_replica:.4g} ns/day)")


if __name__ == "__main__":
    sys.exit(main())
