"""flashschnet.priors.tuples: the term tuples of a new molecule (mlcg_term_tuples) are mlcg's, for all 51 terms of
mlcg's transferable chignolin model (tests/data/oracles/real/, see its README.txt)."""
from __future__ import annotations

import torch

from tests.helpers.real_oracles import S_ORACLE, chignolin_pdb, load_oracle


def test_term_tuples_of_a_new_molecule_are_mlcgs(tmp_path):
    from flashschnet.cg import map_pdb
    from flashschnet.priors import mlcg_term_tuples

    o = load_oracle(S_ORACLE)
    mol = map_pdb(chignolin_pdb(tmp_path), mapping="5bead")
    assert list(mol.bead_types) == o["bead_types"].tolist()
    ours = mlcg_term_tuples(mol)
    for name, term in o["prior_terms"].items():          # all 51 terms, empty ones included
        ref = {tuple(c) for c in term["index_mapping"].t().tolist()}
        got = {tuple(c) for c in ours.get(name, torch.zeros(0, 2, dtype=torch.long)).tolist()}
        assert got == ref, name
    assert set(ours) <= set(o["prior_terms"])
