"""``flashschnet-backmap``: 5-bead or CA CG frames in, all-atom structures out.

    flashschnet-backmap RUN_DIR [--replica R | --temperature T] [--frames START:STOP:STEP] --out OUT
                        [--reference CLEANED.pdb] [--hydrogens] [--side-chains faspr|templates]
                        [--workers N | --scheduler ADDRESS] [--force] [--quiet]
    flashschnet-backmap --structure CG.pdb --reference CLEANED.pdb --out OUT [--hydrogens]

Writes OUT/backmapped.pdb (one MODEL per frame), OUT/backmapped.dcd with OUT/topology_allatom.pdb, and
OUT/backmap.json (per frame: clashes, chirality, cis peptides, restraint deviation, notes); all four or none. An
earlier backmap's files in OUT are overwritten only with --force.
A damaged file of the run directory is one line naming it, or, where the rest is usable (a trajectory cut short), a
"note:" line kept in backmap.json's input_warnings; options are checked against the run as flashschnet-analyze
checks them. Exit status: 0 done (a frame that did not come out clean is a "note:" line, not a failure), 2 bad
input (one line), 5, 6, 7 the files could not be written.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._cli import Parser, exit_statuses, finish, float_type, int_type


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-backmap",
        epilog=exit_statuses(),
        description="Rebuild all-atom structures from CG frames of the 5-bead mapping (beads N, CA, CB, C, O) or "
                    "the CA mapping: a run directory of flashschnet-simulate, or one CG structure with --structure. "
                    "The beads' atoms stay on them (CA only: PULCHRA rebuilds N, C and O from the CA trace), side "
                    "chains are packed on each frame's backbone by FASPR and placed along the CB bead, and a short "
                    "amber14/GBn2 minimisation with restraints on the beads' atoms removes clashes. Each frame that "
                    "keeps a clash, a D residue, a new cis peptide bond or a mapped atom off its bead gets a note. "
                    "Writes OUT/backmapped.pdb (a MODEL per frame), OUT/backmapped.dcd with "
                    "OUT/topology_allatom.pdb, and OUT/backmap.json.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?", default=None,
                   help="the --out directory of flashschnet-simulate (topology.pdb, replica_NNN.dcd, cleaned.pdb)")
    p.add_argument("--structure", default=None,
                   help="instead of RUN_DIR: a 5-bead or CA CG PDB file (e.g. a run's topology.pdb; every MODEL a "
                        "frame)")
    p.add_argument("--reference", default=None,
                   help="the all-atom PDB the CG structure was mapped from: it names the residues and chains "
                        "(default for RUN_DIR: RUN_DIR/cleaned.pdb; required with --structure)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--replica", type=int_type(0), default=None,
                       help="the replica's trajectory (default 0; a parallel-tempering run: its lowest temperature)")
    which.add_argument("--temperature", type=float_type(0.0, low_open=True), default=None,
                       help="a parallel-tempering run: the trajectory at this temperature of its ladder, K")
    p.add_argument("--frames", default=None, metavar="START:STOP:STEP",
                   help="frames to backmap, as a Python slice of the trajectory (e.g. 0:100:10; default all)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--force", action="store_true", help="overwrite the files of an earlier backmap in --out")
    p.add_argument("--hydrogens", action="store_true", help="keep the hydrogens (default: heavy atoms only)")
    p.add_argument("--side-chains", choices=("faspr", "templates"), default="faspr",
                   help="faspr (default): each frame's side chains packed on its backbone by FASPR (pip package "
                        "pyfaspr), the best rotamers of a backbone-dependent library; templates: pdbfixer's residue "
                        "templates, one rotamer per residue type (no extra package; less accurate)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int_type(1, 256), default=1,
                       help="processes rebuilding frames in parallel (default 1)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="rebuild the frames on the workers of this Dask scheduler (e.g. tcp://host:8786; the "
                            "workers need flashschnet installed and read nothing from disk)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def job(echo):
        from flashschnet.errors import InputError

        if (args.run_dir is None) == (args.structure is None):
            raise InputError("give RUN_DIR or --structure CG.pdb (one of them)")
        from flashschnet.openmm.backmap import BackmapSettings, backmap

        return backmap(args.out, run_dir=args.run_dir, structure=args.structure, reference=args.reference,
                       replica=args.replica, temperature_K=args.temperature, frames=args.frames,
                       hydrogens=args.hydrogens, workers=args.workers, scheduler=args.scheduler,
                       progress=not args.quiet, echo=echo, force=args.force,
                       settings=BackmapSettings(side_chains=args.side_chains))

    def summary(result) -> str:
        n = len(result["frames"])
        bad = result["frames_with_notes"]
        return (f"done: {n} frame{'s' if n != 1 else ''} of {result['what']} backmapped "
                f"({result['atoms']} atoms, {result['frames_per_second']:.2f} frames/s); "
                f"{bad} with notes; {result['files']['backmapped.pdb']} (+ .dcd, topology_allatom.pdb, backmap.json)")

    return finish("flashschnet-backmap", job, summary)


if __name__ == "__main__":
    sys.exit(main())
