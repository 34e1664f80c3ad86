"""flashschnet.distill.inner: the inner model's terms on a hand-made four-bead chain -- the energy of each term by
hand, forces minus its gradient, its size, the molecule it applies to, and one-line refusals of inconsistent
parameters. Its fit to a network's forces on trp-cage: tests/model/distill/test_fit.py."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from flashschnet.distill import InnerModel
from flashschnet.errors import InputError

# a bond 0-1 stretched to 1.5 A, a right angle at 1, a +90 degree dihedral 0-1-2-3
POS = torch.tensor([[[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [1.5, 1.0, 0.0], [1.5, 1.0, 1.0]]], dtype=torch.float64)


def _chain(**kw) -> InnerModel:
    args = dict(bonds=[[0, 1]], bond_x0=[1.0], bond_c=[[0.0, 2.0]], angles=[[0, 1, 2]], angle_x0=[-0.5],
                angle_c=[[1.0]], dihedrals=[[0, 1, 2, 3]], dihedral_cos=[[0.5]], dihedral_sin=[[0.25]], n_beads=4,
                fingerprint=("ca", (1, 2, 3, 4)))
    args.update(kw)
    return InnerModel(**args)


def test_the_energy_of_each_term_and_its_forces():
    m = _chain()
    assert (m.bond_degree, m.angle_degree, m.harmonics, m.n_parameters) == (2, 1, 1, 5)
    assert m.describe() == "1 bonds (degree 2), 1 angles (degree 1), 1 dihedrals (1 harmonics): 5 parameters"
    dr, dc, phi = m.coordinates(POS)
    assert dr.item() == pytest.approx(0.5) and dc.item() == pytest.approx(0.5)
    assert phi.item() == pytest.approx(math.pi / 2)
    # 2 (r - 1)^2 + (cos - (-0.5)) + 0.5 cos(phi) + 0.25 sin(phi)
    assert m.energy(POS).item() == pytest.approx(0.5 + 0.5 + 0.0 + 0.25, abs=1e-12)
    e, f = m.energy_forces(POS)
    assert e.shape == (1,) and f.shape == (1, 4, 3)
    assert f.sum(dim=1).abs().max() < 1e-12                            # no net force
    h = 1e-6
    for b, k in ((0, 0), (2, 1), (3, 0), (3, 2)):
        plus, minus = POS.clone(), POS.clone()
        plus[0, b, k] += h
        minus[0, b, k] -= h
        assert f[0, b, k].item() == pytest.approx(-(m.energy(plus) - m.energy(minus)).item() / (2 * h), abs=1e-7)


def test_it_applies_only_to_its_molecule():
    m = _chain()
    m.check_applies_to(SimpleNamespace(n_beads=4, mapping="ca", bead_types=[1, 2, 3, 4]))
    with pytest.raises(InputError, match="distilled on 4 beads; this structure maps to 5"):
        m.check_applies_to(SimpleNamespace(n_beads=5, mapping="ca", bead_types=[1, 2, 3, 4, 5]))
    with pytest.raises(InputError, match="distilled on another molecule"):
        m.check_applies_to(SimpleNamespace(n_beads=4, mapping="ca", bead_types=[1, 2, 3, 5]))
    _chain(fingerprint=None).check_applies_to(SimpleNamespace(n_beads=4, mapping="5bead", bead_types=[9, 9, 9, 9]))


def test_inconsistent_parameters_are_refused():
    with pytest.raises(InputError, match="bonds refer to beads outside 0..3"):
        _chain(bonds=[[0, 4]])
    with pytest.raises(InputError, match=r"bond_c has shape \(2, 2\), expected \[1, ...\]"):
        _chain(bond_c=[[0.0, 2.0], [1.0, 1.0]])
    with pytest.raises(InputError, match="dihedral_cos and dihedral_sin differ"):
        _chain(dihedral_sin=[[0.25, 0.0]])
    with pytest.raises(InputError, match="not an inner model of this version"):
        InnerModel.from_dict({**_chain().to_dict(), "format": "flashschnet-inner-v0"})
