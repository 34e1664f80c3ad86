"""Regenerate ``examples/trpcage_placeholder.pt``: the quickstart's PLACEHOLDER model.

It is NOT a trained force field. It combines

* the CGSchNet network of the mlcg oracle fixture A (random weights from mlcg's initialisation plus
  noise; 5-bead chignolin types; exercises the real network arithmetic, carries no physics), and
* priors fitted to the bundled trp-cage structure (``1L2Y_trpcage.pdb``): equilibrium bond lengths,
  angles and dihedrals taken from that structure, force constants set to the medians of mlcg's
  chignolin prior (see ``flashschnet.priors.fit_priors_to_structure``); the priors hold the fold.

Run from the repository root:  python examples/make_placeholder_model.py
For another protein (e.g. the MARTINI comparison in docs/martini.md):
    python examples/make_placeholder_model.py --pdb tests/data/structures/1VII_villin.pdb --out villin_placeholder.pt
"""
import argparse
from pathlib import Path

import torch

from flashschnet.cg import map_pdb
from flashschnet.checkpoint import read_model_file, build_model, save_checkpoint
from flashschnet.priors import fit_priors_to_structure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = ROOT / "tests" / "data" / "oracles" / "mlcg_schnet_A.pt"
PDB = HERE / "1L2Y_trpcage.pdb"
OUT = HERE / "trpcage_placeholder.pt"


def main() -> None:
    p = argparse.ArgumentParser(description="Write a PLACEHOLDER model (random-weight network + priors fitted to "
                                            "one structure) for running the pipeline end to end.")
    p.add_argument("--pdb", default=str(PDB), help="structure the priors are fitted to (default: the trp-cage example)")
    p.add_argument("--out", default=str(OUT), help="checkpoint to write (default: examples/trpcage_placeholder.pt)")
    args = p.parse_args()
    pdb, out, name = Path(args.pdb), Path(args.out), Path(args.pdb).stem
    ckpt = read_model_file(FIXTURE)
    ckpt["config"]["cg_mapping"] = "5bead"
    model = build_model(ckpt, str(FIXTURE), dtype=torch.float64)
    mol = map_pdb(pdb, mapping="5bead")
    if pdb.resolve() == PDB.resolve():
        what, protein = "the 1L2Y trp-cage structure", "trp-cage 1L2Y (20 residues, 5-bead mapping)"
    else:
        what, protein = f"{name}", f"{name} ({len(mol.residues)} residues, 5-bead mapping)"
    priors = fit_priors_to_structure(
        mol, description=f"PLACEHOLDER priors fitted to {what} (not Boltzmann inversion)")
    short = "1L2Y trp-cage" if pdb.resolve() == PDB.resolve() else name
    save_checkpoint(out, model, priors=priors, metadata={
        "description": f"PLACEHOLDER: mlcg fixture-A CGSchNet (random weights) + priors fitted to {short}. "
                       "Not a trained force field; for running the pipeline end to end only.",
        "placeholder": True,
        "source": "examples/make_placeholder_model.py",
        "protein": protein,
    })
    print(f"wrote {out} ({mol.n_beads} beads, {sum(t.n_tuples for t in priors.terms)} prior tuples)")

if __name__ == "__main__":
    main()
