"""flashschnet.safeload: user files read as plain data only (``weights_only=True``) and JSON objects, every failure
one InputError line naming the file and what is wrong with it. The loaders built on it (checkpoints, priors, inner
models) are checked with their own files in tests/model/test_checkpoint.py, tests/model/priors/test_io.py and
tests/model/distill/test_io.py."""
from __future__ import annotations

import pytest
import torch

from flashschnet.errors import InputError
from flashschnet.safeload import load_plain, read_json_object


class _Thing:
    """A class of this test module: loading it would need code, so weights_only refuses it."""


def _one_line(fn, *args) -> str:
    with pytest.raises(InputError) as err:
        fn(*args)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_plain_data_loads_and_everything_else_is_one_line(tmp_path):
    torch.save({"w": torch.arange(3)}, tmp_path / "ok.pt")
    assert torch.equal(load_plain(tmp_path / "ok.pt")["w"], torch.arange(3))
    assert _one_line(load_plain, tmp_path / "nope.pt", "prior") == f"{tmp_path / 'nope.pt'}: prior file not found"
    assert _one_line(load_plain, tmp_path) == f"{tmp_path}: is a directory, not a model file"
    (tmp_path / "empty.pt").write_bytes(b"")
    assert "not a readable model file (the file is empty)" in _one_line(load_plain, tmp_path / "empty.pt")
    (tmp_path / "notes.pt").write_text("hello there")
    assert "a text file, not a torch file: it begins 'hello there'" in _one_line(load_plain, tmp_path / "notes.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "ok.pt").read_bytes()[:200])
    assert "damaged or truncated torch file" in _one_line(load_plain, tmp_path / "cut.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    assert _one_line(load_plain, tmp_path / "list.pt") == f"{tmp_path / 'list.pt'}: holds a list, not a model dict"
    torch.save({"x": _Thing()}, tmp_path / "code.pt")
    msg = _one_line(load_plain, tmp_path / "code.pt", "inner model")
    assert msg.startswith(str(tmp_path / "code.pt")) and "needs arbitrary code to load" in msg and "_Thing" in msg
    torch.jit.save(torch.jit.script(torch.nn.Identity()), str(tmp_path / "script.pt"))
    assert "a TorchScript module (torch.jit.save), not a model file" in _one_line(load_plain, tmp_path / "script.pt")


def test_json_objects(tmp_path):
    (tmp_path / "ok.json").write_text('{"a": [1, 2]}')
    assert read_json_object(str(tmp_path / "ok.json"), "fix it") == {"a": [1, 2]}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert _one_line(read_json_object, str(tmp_path / "list.json"), "fix it") == \
        f"{tmp_path / 'list.json'}: not a JSON object; fix it"
    (tmp_path / "bad.json").write_text("{not json")
    msg = _one_line(read_json_object, str(tmp_path / "bad.json"), "rerun the command")
    assert msg.startswith(f"{tmp_path / 'bad.json'}: unreadable (") and msg.endswith("; rerun the command")
    assert _one_line(read_json_object, str(tmp_path / "none.json"), "x").startswith(str(tmp_path / "none.json"))
