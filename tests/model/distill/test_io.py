"""flashschnet.distill.io: an inner model's file written whole and read back (plain data, ``weights_only=True``)
unchanged, and every file that is not one refused in one line naming it. A distilled trp-cage model's round trip:
tests/model/distill/test_fit.py."""
from __future__ import annotations

import os

import pytest
import torch

from flashschnet.distill import InnerModel, load_inner, save_inner
from flashschnet.errors import InputError


def _chain() -> InnerModel:
    return InnerModel(bonds=[[0, 1], [1, 2]], bond_x0=[1.0, 1.2], bond_c=[[0.0, 2.0], [0.1, 3.0]], angles=[[0, 1, 2]],
                      angle_x0=[-0.5], angle_c=[[1.0, 0.5]], dihedrals=torch.zeros(0, 4, dtype=torch.long),
                      dihedral_cos=torch.zeros(0, 2), dihedral_sin=torch.zeros(0, 2), n_beads=3,
                      fingerprint=("ca", (4, 5, 6)), meta={"frames": 7})


def test_an_inner_model_file_round_trips(tmp_path):
    path = tmp_path / "inner.pt"
    model = _chain()
    save_inner(model, path)
    assert os.listdir(tmp_path) == ["inner.pt"]                        # written whole: no temporary file left
    back = load_inner(path)
    for name in ("bonds", "bond_x0", "bond_c", "angles", "angle_x0", "angle_c", "dihedrals", "dihedral_cos"):
        assert torch.equal(getattr(back, name), getattr(model, name)), name
    assert back.n_beads == 3 and back.fingerprint == ("ca", (4, 5, 6)) and back.meta == {"frames": 7}
    pos = torch.tensor([[[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [1.1, 1.3, 0.2]]], dtype=torch.float64)
    assert torch.equal(back.energy(pos), model.energy(pos))


def test_what_is_not_an_inner_model_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="missing.pt: inner model file not found"):
        load_inner(tmp_path / "missing.pt")
    torch.save({"state_dict": {}}, tmp_path / "ckpt.pt")
    with pytest.raises(InputError, match="ckpt.pt: not an inner model"):
        load_inner(tmp_path / "ckpt.pt")
    torch.save({**_chain().to_dict(), "format": "flashschnet-inner-v9"}, tmp_path / "future.pt")
    with pytest.raises(InputError, match="future.pt: not an inner model of this version"):
        load_inner(tmp_path / "future.pt")
    broken = _chain().to_dict()
    del broken["angle_c"]
    torch.save(broken, tmp_path / "broken.pt")
    with pytest.raises(InputError, match=r"broken.pt: malformed inner model \(KeyError"):
        load_inner(tmp_path / "broken.pt")
    (tmp_path / "notes.pt").write_text("hello")
    with pytest.raises(InputError) as err:
        load_inner(tmp_path / "notes.pt")
    assert str(err.value).startswith(str(tmp_path / "notes.pt")) and "\n" not in str(err.value)
