"""flashschnet.nn.basis: mlcg's radial bases and cutoff envelopes, against their formulas -- the cosine envelope with
and without a lower cutoff, the identity envelope, the Gaussian and exp-normal bases (centres, widths, zero beyond the
cutoff), the buffers a state dict carries, one-line refusals of unknown kinds. The network they feed:
tests/model/nn/test_schnet.py."""
from __future__ import annotations

import math

import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.nn.basis import (CosineCutoff, ExpNormalBasis, GaussianBasis, IdentityCutoff, make_basis,
                                  make_envelope)

D = torch.tensor([0.0, 1.0, 2.5, 5.0, 7.5, 10.0, 12.0], dtype=torch.float64)


def test_envelopes():
    c = CosineCutoff(0.0, 10.0)(D)
    expected = [0.5 * (math.cos(math.pi * d / 10.0) + 1.0) if d < 10.0 else 0.0 for d in D.tolist()]
    torch.testing.assert_close(c, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-15)
    assert c[0] == 1.0 and c[3] == pytest.approx(0.5) and c[5] == 0.0
    shifted = CosineCutoff(2.5, 10.0)(D)            # rises from 0 at the lower cutoff, 1 midway, 0 at the upper
    assert shifted[:3].tolist() == [0.0, 0.0, 0.0] and shifted[5:].tolist() == [0.0, 0.0]
    assert CosineCutoff(2.5, 10.0)(torch.tensor([6.25], dtype=torch.float64)).item() == pytest.approx(1.0)
    assert torch.equal(IdentityCutoff(0.0, 10.0)(D), torch.ones_like(D))
    assert isinstance(make_envelope({"kind": "identity", "cutoff_lower": 0.0, "cutoff_upper": 5.0}), IdentityCutoff)
    assert isinstance(make_envelope({"cutoff_lower": 0.0, "cutoff_upper": 5.0}), CosineCutoff)      # the default
    with pytest.raises(InputError, match="unknown cutoff kind 'step'"):
        make_envelope({"kind": "step", "cutoff_lower": 0.0, "cutoff_upper": 5.0})


def test_gaussian_basis():
    basis = make_basis({"kind": "gaussian", "num_rbf": 5, "cutoff": {"cutoff_lower": 0.0, "cutoff_upper": 10.0}})
    assert isinstance(basis, GaussianBasis) and set(basis.state_dict()) == {"offset", "coeff"}
    assert basis.centers().tolist() == [0.0, 2.5, 5.0, 7.5, 10.0] and basis.widths().item() == -0.5 / 2.5 ** 2
    e = basis(D)
    assert e.shape == (7, 5)
    env = CosineCutoff(0.0, 10.0)(D)
    for k, centre in enumerate([0.0, 2.5, 5.0, 7.5]):              # each function peaks at its centre
        i = D.tolist().index(centre)
        assert e[i, k] == pytest.approx(env[i].item()) and int(e[i].argmax()) == k
    assert e[5:].abs().max() == 0.0                                 # nothing at or beyond the cutoff


def test_expnormal_basis():
    basis = make_basis({"kind": "expnormal", "num_rbf": 4, "cutoff": {"cutoff_lower": 0.0, "cutoff_upper": 5.0}})
    assert isinstance(basis, ExpNormalBasis) and set(basis.state_dict()) == {"means", "betas"}
    assert basis.alpha == 1.0
    start = math.exp(-5.0)
    torch.testing.assert_close(basis.centers(), torch.linspace(start, 1.0, 4, dtype=torch.float64))
    assert basis.widths().tolist() == [(2.0 / 4 * (1.0 - start)) ** -2] * 4
    d = torch.tensor([0.0, 2.0, 5.0], dtype=torch.float64)
    e = basis(d)
    x = torch.exp(-d)[:, None]
    expected = CosineCutoff(0.0, 5.0)(d)[:, None] * torch.exp(-basis.betas * (x - basis.means) ** 2)
    torch.testing.assert_close(e, expected, rtol=0, atol=0)
    assert e[0, 3] == 1.0 and e[2].abs().max() == 0.0
    assert ExpNormalBasis(4, {"cutoff_lower": 0.0, "cutoff_upper": 5.0}, alpha=2.0).alpha == 2.0
    with pytest.raises(InputError, match="unknown radial basis 'bessel'"):
        make_basis({"kind": "bessel", "num_rbf": 4, "cutoff": {"cutoff_lower": 0.0, "cutoff_upper": 5.0}})
