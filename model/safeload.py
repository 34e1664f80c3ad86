"""Loading user files safely: plain data only (``weights_only=True``), one-line errors."""
from __future__ import annotations

import json
import os
import pickle
import re
import struct
import zipfile
from typing import Any, Dict

import torch

from .errors import InputError


def _is_torchscript(path: str) -> bool:
    """Whether ``path`` is a TorchScript archive (a zip with the ``constants.pkl`` and ``code/`` of
    ``torch.jit.save``)."""
    try:
        if not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    return any(n.endswith("/constants.pkl") for n in names) and any("/code/" in n for n in names)


def _what_is_wrong(path: str, exc: BaseException) -> str:
    """Why ``torch.load`` could not read ``path``, in words: torch's own messages for a file that is not a torch
    file are unpickler internals (``KeyError: 101`` is the opcode byte of the file's first character)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if not head:
        return "the file is empty"
    if head.startswith(b"PK"):       # torch.save's zip format, cut short or damaged
        return "a damaged or truncated torch file; copy it again"
    if head.startswith(b"\x80"):     # a legacy (non-zip) torch/pickle file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"a damaged or truncated legacy torch file: {first[:120]}"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = "\0"
    if not all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"not a torch file: it begins with the bytes {head[:8].hex(' ')}"
    return f"a text file, not a torch file: it begins {text.strip()[:40]!r}"


def load_plain(path, what: str = "model") -> Dict[str, Any]:
    """``torch.load(path, weights_only=True)`` of a user file, with every failure turned into a one-line
    :class:`InputError` naming the file. ``what`` names the kind of file in messages ("model", "prior")."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{path}: {what} file not found")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a {what} file")
    if _is_torchscript(path):     # torch.load's own message for these advises weights_only=False: never
        raise InputError(f"{path}: a TorchScript module (torch.jit.save), not a {what} file; flashschnet reads its "
                         "own checkpoints (flashschnet.save_checkpoint) and mlcg exports (flashschnet-convert)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        blocked = re.search(r"unsupported GLOBAL (\S+)|Unsupported global: GLOBAL (\S+)", text, re.I)
        if blocked or "Unsupported global" in text:
            name = next((g for g in (blocked.groups() if blocked else ()) if g), "")
            raise InputError(
                f"{path}: a pickled Python object that needs arbitrary code to load"
                + (f" ({name.rstrip('.')})" if name else "")
                + f"; flashschnet only reads plain-data {what} files (weights_only=True). For an mlcg "
                "model_and_prior.pt use `flashschnet-convert`; otherwise use a flashschnet checkpoint"
            ) from None
        detail = [l.strip() for l in text.split("WeightsUnpickler error:", 1)[-1].splitlines() if l.strip()
                  and not l.startswith(("Weights only load failed", "Check the documentation"))]
        with open(path, "rb") as f:
            pickled = f.read(2).startswith((b"PK", b"\x80"))
        why = (detail or ["unpickling failed"])[0][:160] if pickled else _what_is_wrong(path, exc)
        raise InputError(f"{path}: not a readable {what} file ({why})") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError, struct.error, KeyError, IndexError,
            TypeError, AttributeError, UnicodeDecodeError, MemoryError) as exc:
        raise InputError(f"{path}: not a readable {what} file ({_what_is_wrong(path, exc)})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: holds a {type(obj).__name__}, not a {what} dict")
    return obj


def read_json_object(path: str, then: str) -> dict:
    """The JSON object in ``path``; a file that cannot be read, is not JSON or not an object is one
    :class:`InputError` line naming it, ending with ``then`` (what to do)."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: unreadable ({exc}); {then}") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: not a JSON object; {then}")
    return obj
