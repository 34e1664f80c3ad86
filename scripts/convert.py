"""``flashschnet-convert``: an mlcg pickled model (``model_and_prior.pt`` or a specialized model-and-config file)
-> a flashschnet checkpoint, without mlcg and without running code from the pickle.

    flashschnet-convert INPUT OUTPUT [--force]

Exit status: 0 done, 2 bad input (one-line message: unreadable file, a class that is not part of an mlcg model,
an unsupported term, an OUTPUT folder that is missing or not writable); 5, 6, 7 OUTPUT could not be written: 5 no
space left, 6 not allowed to write, 7 another I/O error (one line; OUTPUT is written whole or not at all).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from ._cli import Parser, check_output_file, exit_statuses, finish


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="flashschnet-convert",
        epilog=exit_statuses(),
        description="Convert a pickled mlcg model (a SumOut of a StandardSchNet and prior terms, as mlcg-combine_model "
                    "or mlcg.simulation write it) into a flashschnet checkpoint: network hyper-parameters and "
                    "weights, units (Angstrom, kcal/mol), CG mapping, and the priors (per-tuple for specialized "
                    "files, type tables otherwise). The pickle is read with a restricted unpickler: only mlcg, "
                    "torch_geometric and torch.nn classes (as inert stand-ins) and tensors; anything else is refused.",
    )
    p.add_argument("input", help="mlcg pickled model file")
    p.add_argument("output", help="flashschnet checkpoint to write")
    p.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def job(echo):
        from flashschnet.atomic import check_not_an_input
        from flashschnet.checkpoint import write_checkpoint
        from flashschnet.convert import convert_mlcg
        from flashschnet.errors import InputError, OutputError

        check_output_file(args.output, "OUTPUT")
        check_not_an_input(args.output, "OUTPUT", [("INPUT model", args.input)])
        if os.path.exists(args.output) and not args.force:
            raise InputError(f"{args.output}: exists; choose another OUTPUT or pass --force")
        ckpt = convert_mlcg(args.input)
        try:
            write_checkpoint(args.output, ckpt)    # atomic: no partial OUTPUT, no stale OUTPUT.tmp
        except OutputError as exc:                 # exit 5, 6 or 7 (one line)
            exc.option = "OUTPUT"
            raise
        return ckpt

    def summary(ckpt) -> str:
        cfg = ckpt["config"]
        pri = ckpt.get("priors")
        tables = ckpt.get("prior_tables") or []
        what = (f"{len(pri['terms'])} prior terms for its stored {pri['n_beads']}-bead structure" if pri else
                f"{len(tables)} type-table prior terms" if tables else "no priors")
        return (f"wrote {args.output}: CGSchNet {cfg['num_interactions']} x {cfg['hidden_channels']} "
                f"(mapping {cfg.get('cg_mapping') or 'unknown'}), {what}")

    return finish("flashschnet-convert", job, summary)


if __name__ == "__main__":
    sys.exit(main())
