"""``flashschnet-analyze``: a run directory in, a report out.

    flashschnet-analyze RUN_DIR [--out DIR] [--reference PDB] [--temperature K] [--stride K] [--replicas 0,1]
                        [--bins B] [--temperatures-out TMIN:TMAX:N] [--fes-temperatures T1,T2] [--bootstrap N]
                        [--force] [--quiet]

RUN_DIR is the --out of flashschnet-simulate (topology.pdb, replica_NNN.dcd, log.csv) or of flashschnet-martini
(topology.pdb, trajectory.dcd, log.csv). A parallel-tempering run (--temperatures) is analysed per temperature
from its T<K>.dcd files, each with its own kT (--temperature and --replicas are refused there), and across its
temperatures by MBAR (thermo.csv: energy, heat capacity, Q, Rg, RMSD with uncertainties; melting temperatures;
reweighted free-energy surfaces) with the walkers' mixing (exchange_diagnostics.json). Writes report.md,
report.json and PNG figures into --out (default RUN_DIR/analysis); a figure with too little data to mean anything
gets a "warning:" line saying how much more it needs; so do MBAR's thermodynamics below their thresholds of
uncorrelated samples, round trips and overlap (the melting temperatures are then withheld). A damaged file of the
run (missing, cut short, overwritten, another run's) is one line naming it and what to do, or, where the rest of the
run is usable, a "note:" line and an entry of report.json's input_warnings (docs/reliability.md). Exit status: 0 done,
2 bad input (one-line message naming the file and what to do; also a --out that cannot be created or written);
5, 6, 7 the report could not be written: 5 no space left, 6 not allowed to write, 7 another I/O error (one line
naming the file; the report is written whole or not at all, so a previous report stays complete and no truncated
figure is left).
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._cli import Parser, exit_statuses, finish, float_type, int_type, require_extras

#: a frame stride (a positive C int) and free-energy bins per axis (a 1000 x 1000 histogram at most)
COUNT = int_type(1, 2**31 - 1)
BINS = int_type(1, 1000)


def replica_list(text: str) -> List[int]:
    """``"0,1"`` -> [0, 1] (argparse ``type=``)."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected replica numbers like 0,1; got {text!r}")
    return list(dict.fromkeys(values))


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-analyze",
        epilog=exit_statuses(),
        description="Analyse a run directory of flashschnet-simulate or flashschnet-martini: potential energy and "
                    "temperature traces, backbone RMSD (Kabsch) to a reference, radius of gyration, per-residue "
                    "RMSF, fraction of native contacts Q, a contact map and a free-energy surface F(RMSD, Rg), "
                    "one bead per residue (CA, or MARTINI's BB). A parallel-tempering run (--temperatures) is "
                    "analysed per temperature from its T<K>.dcd files, each with its own kT, and across temperatures by "
                    "MBAR (thermo.csv, melting temperatures, exchange_diagnostics.json). Writes report.md, "
                    "report.json and PNG figures, and warns when a figure has too little data to mean anything.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the --out directory of flashschnet-simulate or -martini")
    p.add_argument("--out", default=None, help="report directory (default RUN_DIR/analysis)")
    p.add_argument("--reference", default=None,
                   help="reference structure (PDB) for RMSD, Q and the native contact map (default: the run's "
                        "topology.pdb, its starting structure); CG beads of the same name, or an all-atom PDB's CA")
    p.add_argument("--temperature", type=float_type(0.0, low_open=True), default=None,
                   help="temperature for F = -kT ln p, K, for a run that recorded none (default: run.json's, "
                        "else 300); another than run.json's is refused (one temperature's frames are not "
                        "reweighted), as it is for a parallel-tempering run, whose temperatures each use their own kT")
    p.add_argument("--stride", type=COUNT, default=1, help="use every K-th frame (default 1)")
    p.add_argument("--replicas", type=replica_list, default=None,
                   help="replicas to analyse, e.g. 0,1 (default all); refused for a parallel-tempering run, which "
                        "is analysed per temperature")
    p.add_argument("--bins", type=BINS, default=None,
                   help="free-energy surface bins per axis (default: from the number of frames, 5-50)")
    p.add_argument("--temperatures-out", default=None, metavar="LIST",
                   help="parallel-tempering run: the temperatures (K) of thermo.csv, MBAR over every rung: N evenly "
                        "spaced from TMIN to TMAX, or a list; within the run's ladder (default: the ladder)")
    p.add_argument("--fes-temperatures", default=None, metavar="LIST",
                   help="parallel-tempering run: reweighted F(Q, Rg) and F(RMSD, Rg) at these temperatures (K), within "
                        "the ladder (default: the lowest and highest --temperatures-out)")
    p.add_argument("--bootstrap", type=int_type(0, 100000), default=None,
                   help="parallel-tempering run: bootstrap resamplings for the melting temperatures' uncertainties "
                        "(default 100; 0: none)")
    p.add_argument("--force", action="store_true", help="overwrite an existing report in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def job(echo):
        require_extras("matplotlib")                 # the figures
        from flashschnet.openmm.analyze import AnalyzeSettings, analyze

        settings = AnalyzeSettings(run_dir=args.run_dir, out=args.out, reference=args.reference,
                                   temperature_K=args.temperature, stride=args.stride, replicas=args.replicas,
                                   force=args.force, bins=args.bins, temperatures_out=args.temperatures_out,
                                   fes_temperatures=args.fes_temperatures, bootstrap=args.bootstrap)
        result = analyze(settings, progress=not args.quiet, echo=echo)
        for note in result["notes"]:
            echo(f"note: {note}")
        for short in result["too_little_data"]:
            echo(f"warning: {short['message']}")
        for line in result.get("warnings") or []:
            echo(f"warning: {line}")
        return result

    def summary(result) -> str:
        if "temperatures" in result:         # parallel tempering: per temperature, never per walker
            recs = [(f"{r['temperature_K']:.1f} K", r) for r in result["temperatures"]]
        else:
            recs = [(f"replica {r['replica']}", r) for r in result["replicas"]]
        rows = ", ".join(f"{name}: RMSD {r['summary']['rmsd_mean_nm']:.3f} nm" for name, r in recs[:4])
        more = f" (+{len(recs) - 4} more)" if len(recs) > 4 else ""
        thermo = result.get("thermo")
        if thermo:
            m = thermo["melting"] or {}
            tm = m.get("heat_capacity_peak_K")
            more += (f"; thermo.csv: {len(thermo['temperatures_out_K'])} temperatures, heat-capacity peak "
                     + ("withheld (too little data: see the warnings)" if m.get("withheld")
                        else "none inside the range" if tm is None else f"{tm:.1f} K"))
        return f"done: {result['frames_total']} frames; {rows}{more}; report in {result['out']}/report.md (+ .json, .png)"

    return finish("flashschnet-analyze", job, summary)


if __name__ == "__main__":
    sys.exit(main())
