"""flashschnet.priors.io: prior files -- a prior set written whole and read back unchanged, mlcg's prior export read
as it is, and every other file refused in one line naming it. The data model they hold (to_dict / from_dict):
tests/model/priors/test_terms.py."""
from __future__ import annotations

import os

import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.priors import PriorSet, PriorTerm, load_priors, prior_energy, save_priors

from tests.conftest import PRIOR_ORACLE, needs_prior_oracle


def test_a_prior_file_round_trips(tmp_path):
    ps = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 1], [1, 2]], {"x0": [1.5, 1.2], "k": [200.0, 300.0]}),
                         PriorTerm("r", "repulsion", [[0, 2]], {"sigma": [3.0]})],
                  n_beads=3, fingerprint=("ca", (1, 2, 3)), description="hand-made")
    save_priors(ps, tmp_path / "p.pt")
    assert os.listdir(tmp_path) == ["p.pt"]                            # written whole: no temporary file left
    back = load_priors(tmp_path / "p.pt")
    assert back.fingerprint == ("ca", (1, 2, 3)) and back.description == "hand-made" and back.n_beads == 3
    assert [(t.name, t.kind) for t in back.terms] == [("b", "harmonic_bond"), ("r", "repulsion")]
    pos = torch.tensor([[[0.0, 0.0, 0.0], [1.4, 0.0, 0.0], [1.4, 1.3, 0.0]]], dtype=torch.float64)
    assert torch.equal(prior_energy(back, pos), prior_energy(ps, pos))
    # 200 (1.4 - 1.5)^2 + 300 (1.3 - 1.2)^2 + (3 / |r_02|)^6
    assert prior_energy(back, pos).item() == pytest.approx(2.0 + 3.0 + (3.0 / (1.4 ** 2 + 1.3 ** 2) ** 0.5) ** 6)


@needs_prior_oracle
def test_mlcgs_prior_export_is_read_as_it_is(prior_oracle):
    priors = load_priors(PRIOR_ORACLE)
    assert priors.n_beads == 49 and priors.fingerprint == ("5bead", tuple(prior_oracle["bead_types"].tolist()))
    assert [t.name for t in priors.terms] == [n for n, t in prior_oracle["terms"].items() if t["atom_indices"].numel()]


def test_what_is_not_a_prior_file_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="nope.pt: prior file not found"):
        load_priors(tmp_path / "nope.pt")
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(InputError, match="other.pt: not a flashschnet prior set"):
        load_priors(tmp_path / "other.pt")
    torch.save({"format": "mlcg-prior-oracle-v1", "terms": {}}, tmp_path / "cut.pt")
    with pytest.raises(InputError, match=r"cut.pt: malformed prior file \(KeyError: 'bead_types'\)"):
        load_priors(tmp_path / "cut.pt")
    bad = PriorSet(terms=[PriorTerm("r", "repulsion", [[0, 1]], {"sigma": [3.0]})], n_beads=2).to_dict()
    bad["n_beads"] = 1
    torch.save(bad, tmp_path / "small.pt")
    with pytest.raises(InputError, match="small.pt: prior term 'r' refers to bead 1 but the prior set has only 1"):
        load_priors(tmp_path / "small.pt")
