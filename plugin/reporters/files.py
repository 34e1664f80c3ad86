"""The files a run keeps appending to and checkpointing, and cutting them back to a checkpoint: what plain runs
(:mod:`flashschnet.openmm.runner.job`) and ensembles (:mod:`flashschnet.openmm.ensemble`) share.

* The checkpoint file: :data:`CHECKPOINT_MAGIC`, the JSON header's length (8 bytes, little-endian), the JSON
  header (``step``, and what belongs to that state: output sizes, dropped replicas, ...), then OpenMM's
  checkpoint (``Context.createCheckpoint``; none in an ensemble's run checkpoint, whose OpenMM states are the
  blocks' own files). :func:`write_checkpoint` writes it atomically (:func:`flashschnet.atomic.atomic_write`:
  temporary file, fsync, rename, folder fsync; a failed save keeps the previous checkpoint), :func:`read_checkpoint`
  reads it.
* :class:`CSVFile` -- a CSV file a run appends rows to (``log.csv``, ``exchanges.csv``, ``walkers.csv``): the
  header when new, flushed after every call, fsynced (:meth:`CSVFile.sync`) before a checkpoint records its size;
  every failed write is one :class:`~flashschnet.errors.OutputError` naming the file
  (:class:`flashschnet.atomic.AppendedFile`).
* Cutting back on resume (what was written after the checkpoint goes): :func:`cut_csv_to_size` (files whose size
  the checkpoint records: an ensemble's), :func:`truncate_csv` (a plain run's log, by step) and
  :func:`cut_trajectories` (DCD files, by the bytes and frames the checkpoint records;
  :func:`flashschnet.openmm.dcd.truncate_dcd`).
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import struct
from typing import Dict, List, Sequence, Tuple

from ...atomic import AppendedFile, atomic_write
from ...errors import InputError, output_error
from ..dcd import truncate_dcd

CHECKPOINT_MAGIC = b"FSCHNCK1"
#: the header key of the OpenMM state's sha256
STATE_DIGEST = "state_sha256"


def write_checkpoint(path: str, meta: Dict[str, object], state: bytes = b"",
                     what: str = "writing the checkpoint") -> None:
    """Write a checkpoint file (module docstring): the JSON header ``meta`` and OpenMM's ``state`` (bytes of
    ``Context.createCheckpoint``; empty for a header-only checkpoint), atomically. The header also records the
    state's sha256 (``state_sha256``), which :func:`read_checkpoint` checks.

    Raises
    ------
    OutputError
        The file could not be written (``what`` says what was being written); the previous checkpoint is kept.
    """
    if state:
        meta = dict(meta, **{STATE_DIGEST: hashlib.sha256(state).hexdigest()})
    header = json.dumps(meta).encode()
    with atomic_write(path, "wb", what=what) as f:
        f.write(CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header)
        if state:
            f.write(state)


def read_checkpoint(path: str) -> Tuple[Dict[str, object], bytes]:
    """Return ``(meta dict, openmm checkpoint bytes)`` of a file written by :func:`write_checkpoint` (the state
    checked against the sha256 its header records; files of older versions record none).

    Raises
    ------
    InputError
        One line naming the file: not a checkpoint, cut short or damaged.
    OSError
        It cannot be opened or read.
    """
    fix = "the run cannot be resumed from it: restore it, or start a new run"
    with open(path, "rb") as f:                          # (a file that cannot be opened: the OSError itself)
        data = f.read()
    if data[:8] != CHECKPOINT_MAGIC or len(data) < 16:
        raise InputError(f"{path}: {'empty' if not data else 'not a flashschnet checkpoint'}; {fix}")
    (n,) = struct.unpack("<Q", data[8:16])
    if 16 + n > len(data):
        raise InputError(f"{path}: cut short inside its header; {fix}")
    try:
        meta = json.loads(data[16:16 + n].decode("utf-8"))
    except ValueError:                                   # (UnicodeDecodeError is one)
        meta = None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: its header is damaged (not a JSON object); {fix}")
    state = data[16 + n:]
    digest = meta.pop(STATE_DIGEST, None)
    if digest is not None and hashlib.sha256(state).hexdigest() != digest:
        raise InputError(f"{path}: its OpenMM state is damaged or cut short (it does not match the sha256 its header "
                         f"records); {fix}")
    return meta, state


class CSVFile:
    """A CSV file a run appends rows to.

    Parameters
    ----------
    path : str
    columns : sequence of str
        The header row, written when the file is new.
    append : bool
        Append to the file as it is (cut it back first: :func:`cut_csv_to_size`, :func:`truncate_csv`); no header.
    what, opening : str
        What a write does and what opening does, for the error line ("writing the log", "opening the log").

    A write that fails raises one :class:`~flashschnet.errors.OutputError` naming the file (a resume cuts the file
    back to its checkpoint); :meth:`close` does not report it again.
    """

    def __init__(self, path: str, columns: Sequence[str], append: bool = False, what: str = "writing",
                 opening: str = "opening"):
        self.path = path
        self._out = AppendedFile(path, "a" if append else "w", what, opening, newline="")
        self._file = self._out.file
        self._writer = csv.writer(self._file)
        if not append:
            try:
                self.rows([list(columns)])
            except OSError:
                self.close()              # (quietly: the failure is being reported)
                raise

    def rows(self, rows: List[list]) -> None:
        """Append ``rows`` and flush."""
        self._out.io(lambda: (self._writer.writerows(rows), self._file.flush()))

    def sync(self) -> int:
        """Flush and fsync (before a checkpoint that records the size); return the size in bytes."""
        self._out.sync()
        return self._file.tell()

    def close(self) -> None:
        """Close (idempotent); after a failed write (already reported) its unwritten rows are dropped."""
        self._out.close()


def cut_csv_to_size(path: str, size: int) -> None:
    """Cut ``path`` back to ``size`` bytes (the size a checkpoint recorded); :class:`InputError` when it is shorter
    (it lost data the checkpoint relies on)."""
    try:
        with open(path, "r+b") as f:
            if os.fstat(f.fileno()).st_size < size:
                raise InputError(f"{path}: shorter than the checkpoint records ({size} bytes); the file lost "
                                 "data the checkpoint relies on; start a new run")
            f.truncate(size)
    except OSError as exc:
        raise output_error(exc, "cutting back (to the checkpoint)", path) from None


def truncate_csv(path: str, last_step: int) -> None:
    """Keep the header and the leading rows with ``step <= last_step`` (atomic rewrite).

    The log is written in step order, so the rows to keep are a prefix; it ends at the first row past
    ``last_step`` or the first incomplete row (a run killed mid-write can leave a partial last row, whose step
    may be cut short, e.g. ``3`` of ``30``). A missing or unreadable log is an :class:`InputError`."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable ({exc}); restore the log.csv the run wrote, or start a new run") from None
    keep = rows[:1]
    for r in rows[1:]:
        if len(r) != len(rows[0]) or not r[0].isdigit() or int(r[0]) > last_step:
            break
        keep.append(r)
    with atomic_write(path, "w", what="cutting back (to the checkpoint) the log", newline="") as f:
        csv.writer(f).writerows(keep)


def cut_trajectories(paths: Sequence[str], meta: Dict[str, object]) -> None:
    """Cut each DCD file of ``paths`` back to the bytes and frames the checkpoint header ``meta`` records for it
    (``dcd_bytes``, ``dcd_frames``: one count per file; checkpoints of older versions hold one count for all)."""
    frames = meta["dcd_frames"]
    frames = frames if isinstance(frames, list) else [frames] * len(paths)
    for path, nbytes, nframes in zip(paths, meta["dcd_bytes"], frames):
        truncate_dcd(path, nbytes, nframes)
