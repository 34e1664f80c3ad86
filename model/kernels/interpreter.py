"""Triton's interpreter (``TRITON_INTERPRET=1``: the kernels on CPU tensors, for tests) under numpy >= 2.4.

Triton 3.6's interpreter turns a scalar tensor into a Python int with ``int(handle.data)``, where ``data`` is a
one-element 1-D array; numpy 2.4 made ``int()`` of an array with ``ndim > 0`` an error ("only 0-dimensional arrays
can be converted to Python scalars"), so every kernel loop with a runtime bound (``for J in range(I, T)``) fails
there. :func:`install` replaces that one conversion with one that takes the single element (what numpy < 2.4
did); nothing else of the interpreter changes, and compiled kernels (a GPU) never go through it. It is installed
by :func:`flashschnet.fused.launches.kernels`, the one place the kernels are imported, when interpreting.
"""
from __future__ import annotations

import numpy as np

_installed = False


def _index(self) -> int:
    data = np.asarray(self.handle.data)
    return int(data.reshape(-1)[0]) if data.size == 1 else int(data)


def install() -> bool:
    """Patch the interpreter's scalar-to-int conversion once (when it would fail: numpy >= 2.4); returns whether
    the patch is in place."""
    global _installed
    if _installed:
        return True
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4):
        return False
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:          # another Triton: its interpreter does this its own way
        return False

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    interpreter._patch_lang_tensor = patch_lang_tensor
    _installed = True
    return True
