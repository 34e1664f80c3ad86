"""Regenerate ``examples/trpcage_placeholder.pt``: the quickstart's PLACEHOLDER model.

It is NOT a trained force field. It combines

* the CGSchNet network of the mlcg oracle fixture A (random weights from mlcg's initialisation plus
  noise; 5-bead chignolin types; exercises the real network arithmetic, carries no physics), and
* priors fitted to the bundled trp-cage structure (``1L2Y_trpcage.pdb``): equilibrium bond lengths,
  angles and dihedrals taken from that structure, force constants set to the medians of mlcg's
  chignolin prior (see ``flashschnet.priors.fit_priors_to_structure``); the priors hold the fold.

Run from the repository root:  python examples/make_placeholder_model.py
"""
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
    ckpt = read_model_file(FIXTURE)
    ckpt["config"]["cg_mapping"] = "5bead"
    model = build_model(ckpt, str(FIXTURE), dtype=torch.float64)
    mol = map_pdb(PDB, mapping="5bead")
    priors = fit_priors_to_structure(
        mol, description="PLACEHOLDER priors fitted to the 1L2Y trp-cage structure (not Boltzmann inversion)")
    save_checkpoint(OUT, model, priors=priors, metadata={
        "description": "PLACEHOLDER: mlcg fixture-A CGSchNet (random weights) + priors fitted to 1L2Y trp-cage. "
                       "Not a trained force field; for running the pipeline end to end only.",
        "placeholder": True,
        "source": "examples/make_placeholder_model.py",
        "protein": "trp-cage 1L2Y (20 residues, 5-bead mapping)",
    })
    print(f"wrote {OUT} ({mol.n_beads} beads, {sum(t.n_tuples for t in priors.terms)} prior tuples)")


if __name__ == "__main__":
    main()
