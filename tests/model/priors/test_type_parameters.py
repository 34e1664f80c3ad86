"""flashschnet.priors.type_parameters: type-table priors applied to a molecule (priors_for_molecule) refuse, in one
line naming the term, a table that lacks a term the molecule needs or a term whose name tells no beads. The tables
matching mlcg per term (specialize_prior_tables on a converted model): tests/model/test_convert.py."""
from __future__ import annotations

import pytest

from flashschnet.convert import convert_mlcg
from flashschnet.errors import InputError
from tests.helpers.real_oracles import S_MODEL, chignolin_pdb


def test_missing_residue_prior_is_a_clear_error(tmp_path):
    from flashschnet.cg import map_pdb
    from flashschnet.priors import priors_for_molecule

    ckpt = convert_mlcg(S_MODEL)
    tables = [t for t in ckpt["prior_tables"] if t["name"] != "TRP_phi"]
    mol = map_pdb(chignolin_pdb(tmp_path), mapping="5bead")
    with pytest.raises(InputError, match="no prior for TRP_phi"):
        priors_for_molecule(tables, mol, "m.pt")
    odd = tables + [dict(tables[0], name="my_special_bonds")]
    with pytest.raises(InputError, match="my_special_bonds"):
        priors_for_molecule(odd, mol, "m.pt")
