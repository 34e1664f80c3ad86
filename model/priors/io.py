"""Reading and writing prior files.

A flashschnet prior file is :meth:`PriorSet.to_dict() <flashschnet.priors.terms.PriorSet.to_dict>` written with
``torch.save``; :func:`load_priors` also reads mlcg's prior export (``mlcg_prior_cln.pt`` layout). Files are
read with ``weights_only=True`` (plain data only).
"""
from __future__ import annotations

import os

import torch

from ..errors import InputError
from ..safeload import load_plain
from .terms import PriorSet

__all__ = ["load_priors", "save_priors"]


def load_priors(path) -> PriorSet:
    """Read a prior file: a flashschnet prior set (``PriorSet.to_dict()`` saved with ``torch.save``) or an
    mlcg prior export (``mlcg_prior_cln.pt`` layout). Read with ``weights_only=True``; errors are one-line
    :class:`~flashschnet.errors.InputError` naming the file."""
    path = os.fspath(path)
    d = load_plain(path, "prior")
    try:
        if str(d.get("format", "")).startswith("mlcg-prior-oracle"):
            return PriorSet.from_mlcg_oracle(d)
        return PriorSet.from_dict(d)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise InputError(f"{path}: malformed prior file ({type(exc).__name__}: {str(exc)[:120]})") from None


def save_priors(prior_set: PriorSet, path) -> None:
    """Write ``prior_set`` for :func:`load_priors` (atomic: :func:`flashschnet.atomic.atomic_write`; a failed
    write raises :class:`~flashschnet.errors.OutputError`)."""
    from ..atomic import atomic_write

    with atomic_write(path, "wb", what="writing the priors") as f:
        torch.save(prior_set.to_dict(), f)
