"""flashschnet.distill.fit: the inner model's least-squares fit on trp-cage (one module fixture, made once), with the
inner model's terms and its file as the fit uses them. The terms alone (flashschnet.distill.inner) and the file alone
(flashschnet.distill.io), on hand-made models: tests/model/distill/test_inner.py, test_io.py.

Exact-answer tests: forces made by an inner model with known coefficients are fitted back to those coefficients;
the sparse design matrix reproduces the autograd forces of the PyTorch reference; perturbed frames enter the fit."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet import map_pdb
from flashschnet.distill import InnerModel, design, fit, force_error, load_inner, save_inner, template_for
from flashschnet.distill.fit import with_coefficients
from flashschnet.errors import InputError
from flashschnet.priors import fit_priors_to_structure


@pytest.fixture(scope="module")
def setup():
    mol = map_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"))
    priors = fit_priors_to_structure(mol)
    rng = np.random.default_rng(3)
    frames = mol.positions[None] + rng.normal(scale=0.3, size=(24,) + mol.positions.shape)    # Angstrom
    template = template_for(priors, frames, mol.n_beads, bond_degree=3, angle_degree=2, harmonics=2,
                            fingerprint=mol.fingerprint())
    truth = with_coefficients(template, rng.normal(size=template.n_parameters))
    return mol, priors, frames, template, truth


def _forces(model, frames):
    return model.energy_forces(torch.as_tensor(frames))[1].numpy()


def test_design_reproduces_the_reference_forces(setup):
    _, _, frames, _, truth = setup
    G = design(truth, frames[:3])
    c = np.concatenate([truth.bond_c.flatten(), truth.angle_c.flatten(), truth.dihedral_cos.flatten(),
                        truth.dihedral_sin.flatten()])
    f = _forces(truth, frames[:3])
    assert np.abs(-(G @ c) - f.reshape(-1)).max() <= 1e-11 * np.abs(f).max()


def test_the_reference_forces_are_the_energy_gradient(setup):
    _, _, frames, _, truth = setup
    pos = torch.as_tensor(frames[:1])
    _, f = truth.energy_forces(pos)
    h = 1e-6
    for b, k in ((5, 0), (40, 2), (90, 1)):
        plus, minus = pos.clone(), pos.clone()
        plus[0, b, k] += h
        minus[0, b, k] -= h
        fd = -(truth.energy(plus) - truth.energy(minus)).item() / (2 * h)
        assert fd == pytest.approx(f[0, b, k].item(), rel=1e-6, abs=1e-8)


def test_fit_recovers_known_coefficients_and_holds_out_exactly(setup):
    _, _, frames, template, truth = setup
    train, test = frames[:18], frames[18:]
    got = fit(template, train, _forces(truth, train), ridge=1e-12)
    for name in ("bond_c", "angle_c", "dihedral_cos", "dihedral_sin"):
        np.testing.assert_allclose(getattr(got, name), getattr(truth, name), rtol=1e-6, atol=1e-6)
    assert force_error(got, test, _forces(truth, test))["relative_rms_error"] < 1e-8
    # the perturbed frames' term: the same exact answer, and it is really used (weight 0 vs 1e3 differ on noise)
    rng = np.random.default_rng(0)
    pert = train + rng.normal(scale=0.02, size=train.shape)
    both = fit(template, train, _forces(truth, train), pert, _forces(truth, pert), weight=10.0, ridge=1e-12)
    np.testing.assert_allclose(both.bond_c, truth.bond_c, rtol=1e-6, atol=1e-6)
    # too few frames to fix the coefficients (2 x 291 equations, 922 unknowns): the perturbed frames' force
    # changes supply the rest (weight 0: the ridge's minimum-norm answer, far from the truth)
    few = train[:2]
    few_pert = few + np.random.default_rng(1).normal(scale=0.3, size=few.shape)
    a = fit(template, few, _forces(truth, few), few_pert, _forces(truth, few_pert), weight=0.0, ridge=1e-12)
    b = fit(template, few, _forces(truth, few), few_pert, _forces(truth, few_pert), weight=1.0, ridge=1e-12)
    assert template.n_parameters > 2 * 3 * few.shape[1]
    assert force_error(a, test, _forces(truth, test))["relative_rms_error"] > 1e-2
    assert force_error(b, test, _forces(truth, test))["relative_rms_error"] < 1e-3


def test_an_empty_template_is_the_priors_alone(setup):
    mol, priors, frames, _, truth = setup
    empty = template_for(priors, frames, mol.n_beads, 0, 0, 0)
    got = fit(empty, frames, _forces(truth, frames))
    assert got.n_parameters == 0
    assert torch.equal(got.energy_forces(torch.as_tensor(frames[:2]))[1], torch.zeros(2, mol.n_beads, 3,
                                                                                     dtype=torch.float64))
    assert force_error(got, frames, _forces(truth, frames))["relative_rms_error"] == pytest.approx(1.0)


def test_file_round_trip_and_one_line_errors(setup, tmp_path):
    mol, _, _, _, truth = setup
    path = tmp_path / "inner.pt"
    truth.meta["held_out"] = {"relative_rms_error": 0.5}
    save_inner(truth, path)
    back = load_inner(path)
    for name in ("bonds", "bond_x0", "bond_c", "angles", "angle_c", "dihedrals", "dihedral_sin"):
        assert torch.equal(getattr(back, name), getattr(truth, name))
    assert back.fingerprint == truth.fingerprint and back.meta["held_out"]["relative_rms_error"] == 0.5
    back.check_applies_to(mol)
    other = map_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"), mapping="ca")
    with pytest.raises(InputError, match="distilled on 97 beads"):
        back.check_applies_to(other)
    torch.save({"state_dict": {}}, tmp_path / "ckpt.pt")               # a model checkpoint, not an inner model
    with pytest.raises(InputError, match="not an inner model"):
        load_inner(tmp_path / "ckpt.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(InputError, match="text.pt"):
        load_inner(tmp_path / "text.pt")
    bad = truth.to_dict()
    bad["bond_c"] = bad["bond_c"][:3]
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(InputError, match="bad.pt: inner model: bond_c"):
        load_inner(tmp_path / "bad.pt")
    with pytest.raises(InputError, match="outside"):
        InnerModel(**{**{k: v for k, v in truth.to_dict().items() if k not in ("format", "meta", "units",
                                                                             "fingerprint")}, "n_beads": 5})
