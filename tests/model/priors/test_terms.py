"""flashschnet.priors.terms: the prior data model -- PriorSet read from mlcg's prior export, written and read back
(to_dict / from_dict), checked against the molecule it is applied to, and one-line refusals of malformed terms."""

import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.priors import PriorSet, PriorTerm, prior_energy

from tests.conftest import needs_prior_oracle
from tests.helpers.chignolin import cln_molecule


@needs_prior_oracle
def test_from_oracle_skips_empty_terms(prior_oracle, oracle_priors):
    names = [t.name for t in oracle_priors.terms]
    assert not set(names) & set(prior_oracle["empty_terms"])
    assert set(names) == {n for n, t in prior_oracle["terms"].items() if t["atom_indices"].numel()}
    assert oracle_priors.n_beads == 49 and oracle_priors.fingerprint[0] == "5bead"


@needs_prior_oracle
def test_round_trip(prior_oracle, oracle_priors, tmp_path):
    p = tmp_path / "prior.pt"
    torch.save(oracle_priors.to_dict(), p)
    back = PriorSet.from_dict(torch.load(p, weights_only=True))
    assert back.n_beads == oracle_priors.n_beads and back.fingerprint == oracle_priors.fingerprint
    assert back.units == oracle_priors.units and back.description == oracle_priors.description
    assert [t.name for t in back.terms] == [t.name for t in oracle_priors.terms]
    for a, b in zip(oracle_priors.terms, back.terms):
        assert a.kind == b.kind and torch.equal(a.indices, b.indices)
        assert a.params.keys() == b.params.keys()
        assert all(torch.equal(a.params[k], b.params[k]) and b.params[k].dtype == torch.float64 for k in a.params)
    pos = prior_oracle["positions_A"]
    assert torch.equal(prior_energy(back, pos), prior_energy(oracle_priors, pos))


def test_round_trip_no_fingerprint(tmp_path):
    ps = PriorSet(terms=[PriorTerm("r", "repulsion", [[0, 1]], {"sigma": [3.0]})], n_beads=2, description="x")
    torch.save(ps.to_dict(), tmp_path / "p.pt")
    back = PriorSet.from_dict(torch.load(tmp_path / "p.pt", weights_only=True))
    assert back.fingerprint is None and back.terms[0].params["sigma"].tolist() == [3.0]


@needs_prior_oracle
def test_check_applies_to(prior_oracle, oracle_priors):
    mol = cln_molecule(prior_oracle)
    oracle_priors.check_applies_to(mol)  # fine
    types = prior_oracle["bead_types"].tolist()
    types[12] = 4  # ASP CB -> GLU CB
    other = cln_molecule(prior_oracle, types=types)
    with pytest.raises(InputError) as exc:
        oracle_priors.check_applies_to(other)
    msg = str(exc.value)
    assert "\n" not in msg and "49-bead 5bead molecule (YYDPETGTWY)" in msg and "bead 12" in msg
    # different size
    small = PriorSet(terms=oracle_priors.terms[:1], n_beads=49, fingerprint=("5bead", tuple(types[:10])))
    with pytest.raises(InputError):
        small.check_applies_to(mol)
    # no fingerprint, but indices beyond the molecule
    nofp = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 60]], {"x0": [1.0], "k": [1.0]})], n_beads=61)
    with pytest.raises(InputError, match="bead 60"):
        nofp.check_applies_to(mol)


def test_bad_inputs():
    with pytest.raises(InputError):
        PriorTerm("x", "morse", [[0, 1]], {})
    with pytest.raises(InputError):
        PriorTerm("x", "harmonic_bond", [[0, 1]], {"x0": [1.0]})
    with pytest.raises(InputError):
        PriorSet.from_dict({"format": "something-else"})
    ps = PriorSet(terms=[PriorTerm("b", "harmonic_bond", [[0, 1]], {"x0": [1.0], "k": [1.0]})], n_beads=2)
    with pytest.raises(InputError):
        prior_energy(ps, torch.zeros(2, 3))
