"""Read pickled mlcg model files (``model_and_prior.pt``, ``*_specialized_model_and_config.pt``) without mlcg,
torch_geometric or ``torch.load``, and without running code from the file.

A torch zip archive holds ``<prefix>/data.pkl`` (the pickle) and ``<prefix>/data/<key>`` (raw storage bytes).
We unpickle ``data.pkl`` with :class:`RestrictedUnpickler`, whose ``find_class`` answers only

* a handful of safe callables, replaced by our own implementations: tensor/parameter/sparse rebuilds (from
  the archive's bytes), ``torch.Size``, ``collections.OrderedDict``, ``set``, ``int``, ``codecs.encode``,
  numpy scalars and dtypes;
* classes of the modules mlcg models are made of -- ``mlcg.*``, ``torch_geometric.*``, ``torch.nn.modules.*``
  and ``typing``/``inspect`` annotation objects -- each mapped onto a :class:`Stub`: a plain object that only
  records the constructor arguments and the pickled state (``__dict__``), so nothing of the original class runs;

and refuses every other global (``os.system``, ``builtins.eval``, ``torch.load`` ...) with an
:class:`~flashschnet.errors.InputError` naming it. The result is a tree of stubs whose ``state`` dicts hold
plain values and tensors; :mod:`flashschnet.convert` turns it into our checkpoint.
"""
from __future__ import annotations

import codecs
import collections
import io
import os
import pickle
import zipfile
from typing import Any, Dict, Tuple

import numpy as np
import torch

from .errors import InputError

#: module prefixes whose classes become stubs (their code never runs)
STUB_PREFIXES = ("mlcg.", "torch_geometric.", "torch.nn.modules.", "typing", "inspect", "_operator")

#: legacy typed-storage names in the persistent ids -> dtype
_STORAGE_DTYPES = {
    "FloatStorage": torch.float32, "DoubleStorage": torch.float64, "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
}


class Stub:
    """Stand-in for a class of a pickled mlcg model: records ``args`` (constructor/reduce arguments) and
    ``state`` (what ``BUILD`` passes, normally the object's ``__dict__``). ``cls`` is the original class path."""

    cls = "?"

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs, self.state = args, kwargs, None

    def __setstate__(self, state):
        self.state = state

    # a stub may be used as a dict key or set member by pickled containers
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<stub {self.cls}>"

    # --- helpers for torch.nn.Module-like stubs ------------------------------------------------------
    def attr(self, name: str, default=None):
        st = self.state if isinstance(self.state, dict) else {}
        return st.get(name, default)

    @property
    def modules(self) -> Dict[str, Any]:
        return dict(self.attr("_modules") or {})

    @property
    def parameters(self) -> Dict[str, Any]:
        return dict(self.attr("_parameters") or {})

    @property
    def buffers(self) -> Dict[str, Any]:
        return dict(self.attr("_buffers") or {})


_STUB_TYPES: Dict[str, type] = {}


def _stub_type(path: str) -> type:
    if path not in _STUB_TYPES:
        _STUB_TYPES[path] = type(path.rsplit(".", 1)[-1], (Stub,), {"cls": path})
    return _STUB_TYPES[path]


class _StorageType:
    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype


def _numpy_scalar(dtype, data=None):
    """``numpy.core.multiarray.scalar(dtype, bytes)`` without numpy's pickle machinery."""
    if isinstance(data, str):
        data = data.encode("latin1")
    return np.frombuffer(bytes(data or b""), dtype=dtype)[0]


def _get_layout(name: str) -> str:
    return str(name)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    if not isinstance(storage, torch.Tensor):
        raise pickle.UnpicklingError("tensor rebuild without a storage from the archive")
    return storage.as_strided(tuple(size), tuple(stride), int(storage_offset)).clone()


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


def _rebuild_sparse_tensor(layout, data):
    if layout != "torch.sparse_coo":
        raise pickle.UnpicklingError(f"sparse layout {layout!r} is not supported (only sparse COO)")
    indices, values, size = data[0], data[1], tuple(data[2])
    return torch.sparse_coo_tensor(indices, values, size).coalesce().to_dense()


#: (module, name) -> our safe implementation
SAFE_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
    ("torch.serialization", "_get_layout"): _get_layout,
    ("torch", "Size"): torch.Size,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("__builtin__", "set"): set, ("builtins", "set"): set,
    ("__builtin__", "long"): int, ("builtins", "int"): int,
    ("__builtin__", "type"): _stub_type("builtins.type"), ("builtins", "type"): _stub_type("builtins.type"),
    ("_codecs", "encode"): codecs.encode,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar, ("numpy._core.multiarray", "scalar"): _numpy_scalar,
    ("numpy", "dtype"): np.dtype,
    ("torch", "Tensor"): _stub_type("torch.Tensor"),     # only in pyg annotations
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickle ``data.pkl`` of a torch archive with only :data:`SAFE_GLOBALS`, stubs for the prefixes in
    :data:`STUB_PREFIXES` and storages read from ``archive`` (a ``zipfile.ZipFile``) under ``prefix``."""

    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, source: str):
        super().__init__(file)
        self.archive, self.prefix, self.source = archive, prefix, source
        self.globals_seen = []

    def find_class(self, module: str, name: str):
        self.globals_seen.append(f"{module}.{name}")
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        hit = SAFE_GLOBALS.get((module, name))
        if hit is not None:
            return hit
        if module.startswith(STUB_PREFIXES) or module in ("typing", "inspect", "_operator"):
            return _stub_type(f"{module}.{name}")
        raise InputError(f"{self.source}: refuses to load {module}.{name}: not part of an mlcg model (the file "
                         "could run arbitrary code); only mlcg/torch_geometric/torch.nn classes and tensors are read")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.80}")
        storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unsupported storage type {storage_type!r}")
        raw = self.archive.read(f"{self.prefix}data/{key}")
        itemsize = torch.empty((), dtype=storage_type.dtype).element_size()
        if len(raw) < numel * itemsize:
            raise pickle.UnpicklingError(f"storage {key} is truncated")
        return torch.frombuffer(bytearray(raw[:numel * itemsize]), dtype=storage_type.dtype)


def read_pickle(path) -> Tuple[Any, list]:
    """Unpickle a torch-archive mlcg file into stubs; returns ``(object, globals referenced in order)``.

    Raises :class:`InputError` (one line, naming the file) for anything that is not such a file or that
    references a global outside the allowed set.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{path}: model file not found")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{path}: not a torch zip archive ({exc}); legacy (pre-1.6) torch files are not supported") from None
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkl:
            raise InputError(f"{path}: no data.pkl in the archive: not a torch.save file")
        prefix = pkl[0][: -len("data.pkl")]
        try:
            unpickler = RestrictedUnpickler(io.BytesIO(archive.read(pkl[0])), archive, prefix, path)
            obj = unpickler.load()
        except InputError:
            raise
        except (pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError, AttributeError,
                IndexError, RuntimeError, zipfile.BadZipFile) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"{path}: not a readable mlcg model pickle ({text[:160]})") from None
    return obj, unpickler.globals_seen
