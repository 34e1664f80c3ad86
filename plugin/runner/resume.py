"""Resume by identity: a run's input files recorded by content, and the settings a resumed run takes.

``run.json`` records the settings of a run, the target step count (``steps``) and, under ``files``, each input
file's absolute path and sha256 (the model, the PDB, a priors file; MARTINI's force-field folder by the files it
reads). A resumed run (``--resume --out DIR``):

* takes every setting it is not given from ``run.json`` (the step count too: a run cut short goes on to the
  step it was started for);
* checks every given setting that fixes the run (``fixed``) against ``run.json``, and lists every disagreement
  in one line;
* compares input files by content: the same bytes under another path (a moved or copied file) are the same
  input, and the new path is recorded; a different file is refused naming both sha256 sums. A needed file
  that is gone or changed since the run started is refused in one line saying what to give.

``run.json`` files written before ``files`` existed compare paths as typed, as they were compared then.
"""
from __future__ import annotations

import hashlib
import os
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...errors import InputError

FILES_KEY = "files"


def sha256_of(path: str, members: Sequence[str] = ()) -> str:
    """sha256 (hex) of a file's bytes; of a folder: of its ``members`` (names and each one's sha256, in order).

    Raises
    ------
    InputError
        The file (or a member) cannot be read; one line naming it.
    """
    if members:
        h = hashlib.sha256()
        for name in members:
            h.update(f"{name}\0{sha256_of(os.path.join(path, name))}\n".encode())
        return h.hexdigest()
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    return h.hexdigest()


def identity(path: str, members: Sequence[str] = ()) -> Dict[str, str]:
    """``{"path": absolute path, "sha256": ...}`` of an input file (or folder, by ``members``)."""
    return {"path": os.path.abspath(path), "sha256": sha256_of(path, members)}


def record_files(settings: Dict[str, object], files: Mapping[str, Sequence[str]]) -> Dict[str, object]:
    """What a new run writes to ``run.json``: ``settings`` with each file setting of ``files`` (key -> members of
    a folder, ``()`` for a file) made absolute and its :func:`identity` under :data:`FILES_KEY`."""
    record = dict(settings)
    ids = {key: identity(str(record[key]), members) for key, members in files.items() if record.get(key) is not None}
    for key, ident in ids.items():
        record[key] = ident["path"]
    record[FILES_KEY] = ids
    return record


def option_name(key: str, options: Mapping[str, str]) -> str:
    """The command-line spelling of setting ``key`` (``options`` first, else ``--key-with-dashes``)."""
    return options.get(key, "--" + key.replace("_", "-"))


def _show(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def resume_settings(out: str, stored: Dict[str, object], current: Dict[str, object], given: Iterable[str],
                    fixed: Sequence[str], files: Mapping[str, Sequence[str]] = {}, needed: Iterable[str] = (),
                    defaults: Optional[Mapping[str, object]] = None,
                    options: Mapping[str, str] = {}) -> Tuple[Dict[str, object], Dict[str, object]]:
    """The settings of a resumed run, and its ``run.json`` brought up to date.

    Parameters
    ----------
    out : str
        The run directory (for messages).
    stored : dict
        Its ``run.json``.
    current : dict
        This invocation's settings (every field; those not given hold their defaults).
    given : iterable of str
        The settings this invocation gave (the others are taken from ``stored``).
    fixed : sequence of str
        Settings that must agree with ``stored`` when given.
    files : mapping
        File settings recorded by content (key -> members of a folder, ``()`` for a file).
    needed : iterable of str
        File settings a resume reads (they must exist with the recorded content); the others (e.g. the PDB,
        once ``cleaned.pdb`` holds what was mapped) are compared when given, and otherwise not looked at.
    defaults : mapping, optional
        Values of settings that ``run.json`` files written before the setting existed implicitly had.
    options : mapping
        Command-line spellings of settings (default ``--key-with-dashes``).

    Returns
    -------
    (values, run_json) : (dict, dict)
        ``values``: the settings to apply; ``run_json``: ``stored`` with the step count and moved files' new
        paths (write it when it differs from ``stored``).

    Raises
    ------
    InputError
        One line listing every given setting that disagrees with the run's, or naming a needed file that is
        gone or changed (and what to give instead).
    """
    given, needed, defaults = set(given), set(needed), dict(defaults or {})
    ids = stored.get(FILES_KEY)
    values: Dict[str, object] = {}
    record = {k: v for k, v in stored.items()}
    record_ids = dict(ids) if isinstance(ids, dict) else None
    differ: List[str] = []

    for key in current:
        if key in files or key in ("out",):
            continue
        if key not in given:
            if key in stored:
                values[key] = stored[key]
            elif key in defaults:
                values[key] = defaults[key]
            elif key == "steps":
                raise InputError(f"{out}: its run.json does not record the run's step count (a run from an older "
                                 "version); give --steps N")
            continue
        if key in fixed:
            old = stored.get(key, defaults.get(key))
            if old != current[key]:
                differ.append(f"{option_name(key, options)} {_show(current[key])} (the run's: {_show(old)})")

    for key, members in files.items():
        opt = option_name(key, options)
        if record_ids is None:                       # an older run.json: paths as typed
            old = stored.get(key, defaults.get(key))
            if key not in given:
                values[key] = old
            elif current[key] != old and not (old is not None and current[key] is not None
                                              and os.path.abspath(str(current[key])) == os.path.abspath(str(old))):
                differ.append(f"{opt} {_show(current[key])} (the run's: {_show(old)})")
            continue
        old = record_ids.get(key)
        if key in given:
            new_path = current[key]
            if old is None:
                differ.append(f"{opt} {new_path} (the run had none)")
                continue
            if new_path is None:
                differ.append(f"{opt} unset (the run's: {old['path']})")
                continue
            if not os.path.exists(str(new_path)):
                raise InputError(f"{opt} {new_path}: no such file; give the {opt.lstrip('-')} the run was started "
                                 f"with ({old['path']}, sha256 {old['sha256']}) or leave {opt} out")
            new = identity(str(new_path), members)
            if new["sha256"] != old["sha256"]:
                differ.append(f"{opt} {new_path} (sha256 {new['sha256']}) is not the run's {old['path']} "
                              f"(sha256 {old['sha256']})")
                continue
            values[key] = new["path"]
            record[key] = new["path"]
            record_ids[key] = new
        elif old is None:
            values[key] = None
        else:
            values[key] = old["path"]
            if key in needed:
                if not os.path.exists(old["path"]):
                    raise InputError(f"{out}: the run's {opt.lstrip('-')} {old['path']} is gone; give {opt} PATH "
                                     f"of a file with the same content (sha256 {old['sha256']})")
                now = sha256_of(old["path"], members)
                if now != old["sha256"]:
                    raise InputError(f"{out}: the run's {opt.lstrip('-')} {old['path']} has changed since the run "
                                     f"started (sha256 {now}, the run's {old['sha256']}); restore it or give {opt} "
                                     "PATH of the original")
    if differ:
        raise InputError(f"{out}: --resume with settings that differ from the run's: {'; '.join(differ)}; leave "
                         "them out to continue with the run's, or start a new run in another --out")
    if record_ids is not None:
        record[FILES_KEY] = record_ids
    if "steps" in given:
        record["steps"] = current["steps"]
    return values, record
