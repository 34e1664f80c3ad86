"""flashschnet.kernels.interpreter: the fixes to Triton's interpreter change no result. A kernel calling
``@triton.jit`` helpers (one of its own module, one that sees ``triton.language.core``: ``tl.sum``, ``tl.max``)
gives bitwise the same outputs with and without the nested-call fix, patches ``triton.language`` once per launch
(plus once for ``tl.core``), and leaves the language unpatched after the launch."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton / the kernels are imported

import pytest
import torch

import triton
import triton.language as tl

from flashschnet.fused.launches import kernels
from flashschnet.kernels import interpreter as fix

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@triton.jit
def _scaled(x, s):
    return tl.exp(x * s) - 1.0


@triton.jit
def _rows_kernel(x_ptr, out_ptr, n, B: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, B)
    x = tl.load(x_ptr + r * B + c, mask=c < n, other=0.0)
    for k in range(0, 3):
        x = _scaled(x, 0.5 + k)
    tl.store(out_ptr + r, tl.sum(x, axis=0) + tl.max(x, axis=0))


def _run(x):
    out = torch.full((x.shape[0],), float("nan"), dtype=x.dtype)
    _rows_kernel[(x.shape[0],)](x, out, x.shape[1], B=x.shape[1])
    return out


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="a GPU compiles kernels: no interpreter")
def test_nested_helpers_give_bitwise_the_same_results_with_fewer_patches(monkeypatch):
    from triton.runtime import interpreter

    kernels()                                     # installs the fixes (as the engines do)
    patched = interpreter._patch_lang
    original = next(c.cell_contents for c in patched.__closure__
                    if getattr(c.cell_contents, "__name__", "") == "_patch_lang")
    assert original is not patched, "the nested-call fix is not installed"
    x = torch.randn(5, 16, dtype=torch.float32, generator=torch.Generator().manual_seed(1)) * 0.3
    builtin_add = tl.tensor.__add__

    counts = {}

    def counting(fn, name):
        def wrapped(f):
            counts[name] = counts.get(name, 0) + 1
            return fn(f)
        return wrapped

    monkeypatch.setattr(interpreter, "_patch_lang", counting(original, "original"))
    expected = _run(x)
    monkeypatch.setattr(interpreter, "_patch_lang", counting(patched, "fixed"))
    # the fixed path still calls the original for the launch and for the first tl.core helper only
    monkeypatch.setattr(fix, "_launches", [])
    counted_original = counting(original, "fixed->original")
    for cell in patched.__closure__:
        if cell.cell_contents is original:
            monkeypatch.setattr(cell, "cell_contents", counted_original)
    got = _run(x)
    assert torch.equal(got, expected) and torch.isfinite(got).all()
    assert counts["original"] == 5 * (3 + 2) + 1                # every helper call of every program, + the launch
    assert counts["fixed"] == counts["original"]
    assert counts["fixed->original"] == 2                       # the launch, and tl.core's first helper
    assert tl.tensor.__add__ is builtin_add and fix._launches == []   # restored after the launch
