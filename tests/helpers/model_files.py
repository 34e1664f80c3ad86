"""Bad model files, shared by the model-file tests (tests/model/test_checkpoint.py, test_convert.py) and the
model-file fuzzer (tests/fuzz/test_fuzz_models.py)."""
from __future__ import annotations

import os

import pytest

from flashschnet.checkpoint import load_model
from flashschnet.errors import InputError


class RunsCode:
    """Pickles as ``os.system("touch MARKER")``: if loading it ever ran code, the marker file would exist."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def one_line_load_error(path, match: str = "") -> str:
    """``load_model(path)`` raises InputError with a one-line message naming ``path`` (and holding ``match``);
    returns the message."""
    with pytest.raises(InputError) as info:
        load_model(path)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and match in msg, msg
    return msg
