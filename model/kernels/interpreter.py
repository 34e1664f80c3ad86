"""Triton's interpreter (``TRITON_INTERPRET=1``: the kernels on CPU tensors, for tests): two fixes, installed once.

1. **numpy >= 2.4.** Triton 3.6's interpreter turns a scalar tensor into a Python int with ``int(handle.data)``,
   where ``data`` is a one-element 1-D array; numpy 2.4 made ``int()`` of an array with ``ndim > 0`` an error
   ("only 0-dimensional arrays can be converted to Python scalars"), so every kernel loop with a runtime bound
   (``for J in range(I, T)``) fails there. The conversion is replaced with one that takes the single element
   (what numpy < 2.4 did).
2. **Nested device functions.** A launch patches ``triton.language`` for the interpreter (every builtin wrapped,
   restored when the launch ends); the interpreter then patches it *again* on every call of a ``@triton.jit``
   helper inside the kernel -- ``inspect.getmembers`` over the language modules, about 1 ms a call and tens of
   thousands of calls a step, 40 % of a test's time -- and never restores that second patch. It changes nothing:
   the builtins are already wrapped (a wrapped builtin is no builtin, so it is not wrapped twice) and the rest is
   set to the same functions. A helper whose language modules the running launch has patched skips it (the first
   helper that sees another one -- ``tl.sum``'s module sees ``tl.core`` -- still patches it, as before).

Nothing else of the interpreter changes, and compiled kernels (a GPU) never go through it. :func:`install` is
called by :func:`flashschnet.fused.launches.kernels`, the one place the kernels are imported, when interpreting;
``tests/model/kernels/test_interpreter.py`` checks that the kernels' results are bitwise those of the unpatched
interpreter.
"""
from __future__ import annotations

import inspect
from typing import Dict, FrozenSet, List, Set

import numpy as np

_installed = False
_numpy_fix = False                  # whether install() put the numpy fix in place
_launches: List[Set[int]] = []      # ids of the language modules the running launch patched (one entry at most)
_seen: Dict[int, FrozenSet[int]] = {}    # a module's globals (by id) -> its language modules' ids


def _index(self) -> int:
    data = np.asarray(self.handle.data)
    return int(data.reshape(-1)[0]) if data.size == 1 else int(data)


def _languages(interpreter, fn) -> Set[int]:
    """The ids of the language modules (``triton.language``, ``triton.language.core``) ``fn``'s module sees:
    what the interpreter's patch of ``fn`` patches."""
    key = id(fn.__globals__)
    if key not in _seen:
        tl = interpreter.tl
        _seen[key] = frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core))
    return _seen[key]


def _install_numpy_index(interpreter) -> bool:
    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4):
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:          # another Triton: its interpreter does this its own way
        return False

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def _install_nested_calls(interpreter) -> bool:
    original = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if original is None or scope_type is None or not hasattr(interpreter, "tl"):
        return False              # another Triton: leave its interpreter as it is

    def patch_lang(fn):
        langs = _languages(interpreter, fn)
        if _launches:                               # a helper called inside a running launch
            if langs <= _launches[-1]:
                return scope_type()
            _launches[-1] |= langs                  # e.g. tl.sum's module, tl.core: patched once per launch
            return original(fn)
        scope = original(fn)                        # a launch (they never nest): restored when it ends
        _launches.append(set(langs))
        restore = scope.restore

        def restore_and_pop():
            try:
                restore()
            finally:
                if _launches:
                    _launches.pop()

        scope.restore = restore_and_pop
        return scope

    interpreter._patch_lang = patch_lang
    return True


def install() -> bool:
    """Apply both fixes once (each only where it applies: the first under numpy >= 2.4, the second where the
    interpreter has the functions it replaces); returns whether the numpy fix is in place."""
    global _installed, _numpy_fix
    if _installed:
        return _numpy_fix
    from triton.runtime import interpreter

    _numpy_fix = _install_numpy_index(interpreter)
    _install_nested_calls(interpreter)
    _installed = True
    return _numpy_fix

