"""The inner model's file: :meth:`InnerModel.to_dict` saved with ``torch.save`` (written whole or not at all),
read back with ``weights_only=True`` (plain data only); every failure is one line naming the file."""
from __future__ import annotations

import os

import torch

from ..errors import InputError
from ..safeload import load_plain
from .inner import InnerModel


def save_inner(model: InnerModel, path) -> None:
    """Write ``model`` to ``path`` (atomic: :func:`flashschnet.atomic.atomic_write`)."""
    from ..atomic import atomic_write

    with atomic_write(path, "wb", what="writing the inner model") as f:
        torch.save(model.to_dict(), f)


def load_inner(path) -> InnerModel:
    """Read an inner model written by :func:`save_inner` (``flashschnet-distill``)."""
    path = os.fspath(path)
    d = load_plain(path, "inner model")
    if not isinstance(d, dict) or "format" not in d:
        raise InputError(f"{path}: not an inner model (flashschnet-distill writes them); a CGSchNet checkpoint "
                         "cannot be an inner model here")
    try:
        return InnerModel.from_dict(d)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise InputError(f"{path}: malformed inner model ({type(exc).__name__}: {str(exc)[:120]})") from None
