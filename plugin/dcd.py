"""DCD trajectories: write (frame before header), truncate, read.

The files are CHARMM/OpenMM DCD files: an 84-byte header record (``CORD``, then 20 int32: frame count at byte
8, first step at 12, steps between frames at 16, last step at 20, the time step as a float32 in AKMA units
at 44, "has unit cell" at 48), a title record, the atom count, then per frame an optional 56-byte unit-cell
record (lengths in Angstrom, the cosines of the angles) and the x, y and z records (float32, Angstrom).

* :class:`DCDWriter` appends frames so that a run killed at any moment leaves a header that never counts a
  missing or partial frame: OpenMM's ``DCDFile.writeModel`` raises the header's frame count *before* it
  writes the frame; here each frame is written and flushed first and only then counted. A kill between the
  two leaves one complete frame the header does not count yet (or a partial frame past the counted ones).
* :func:`truncate_dcd` cuts a file back to what a checkpoint recorded.
* :func:`read_dcd` reads positions (numpy, a bounded chunk of frames at a time), capped at the header's frame
  count, each frame checked whole (record lengths, finite numbers); :func:`read_header` reads that header and
  refuses one with a field OpenMM never writes so (a damaged file).
"""
from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from ..atomic import AppendedFile
from ..errors import InputError, output_error

AKMA_TIME_PS = 0.04888821            # the DCD header's time unit
_CELL_BYTES = 56                     # 4 + 6 float64 + 4


# -- reading ---------------------------------------------------------------------------------------------------

#: the fields of the header record OpenMM's ``DCDFile`` always writes the same: byte offset -> int32 value (the
#: unused fields 0, the CHARMM version 24 and the record's closing length 84)
_FIXED_FIELDS = {**{at: 0 for at in (24, 28, 32, 36, 40, 52, 56, 60, 64, 68, 72, 76, 80)}, 84: 24, 88: 84}
#: frames checked and converted at a time (bounded memory whatever the file's size)
_CHUNK_BYTES = 1 << 26


@dataclass(frozen=True)
class DCDHeader:
    """What a DCD header says, and where its frames are."""

    frames: int            # frames the header counts
    first_step: int
    interval: int          # steps between frames (>= 1)
    dt_ps: float           # time step
    atoms: int
    has_cell: bool         # each frame starts with a unit-cell record
    data_offset: int       # byte offset of the first frame
    frame_bytes: int       # bytes per frame
    file_bytes: int        # size of the file

    @property
    def complete_frames(self) -> int:
        """Frames that are counted by the header *and* completely in the file."""
        return max(min(self.frames, (self.file_bytes - self.data_offset) // self.frame_bytes), 0)

    def step(self, frame: int) -> int:
        """The step of frame ``frame``."""
        return self.first_step + self.interval * int(frame)


def _damaged(path: str, what: str) -> InputError:
    return InputError(f"{path}: not a readable DCD trajectory ({what}); the file is damaged or not from "
                      "flashschnet-simulate/-martini: restore the run's own file")


def read_header(path: str, strict: bool = False) -> DCDHeader:
    """The header of a little-endian CHARMM DCD file; :class:`InputError` when it is not one. ``strict``: it must
    be as OpenMM writes it (:mod:`openmm.app.dcdfile`, the files of a run directory), and a field that holds a value
    OpenMM never writes there is a damaged header (a negative frame count or step, a last step that does not follow
    from the others, a title that is not text, a time step that is not a positive number); otherwise (DCD files of
    other writers, e.g. mdtraj's) a step interval below 1 reads as 1 and a time step that is not positive as 0."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None

    def i32(at: int) -> int:
        return struct.unpack("<i", head[at:at + 4])[0]

    if len(head) < 100 or i32(0) != 84 or head[4:8] != b"CORD":
        raise _damaged(path, "not a little-endian CHARMM DCD file" if len(head) else "empty")
    frames, first, interval, last = (i32(at) for at in (8, 12, 16, 20))
    (dt_akma,) = struct.unpack("<f", head[44:48])
    has_cell = i32(48)
    title_len, n_title = i32(92), i32(96)
    off = 92 + 4 + title_len + 4                        # the atom-count record
    if not (0 <= title_len and off + 12 <= len(head)):
        raise _damaged(path, "its title record is broken")
    atoms = i32(off + 4)
    if atoms < 1:
        raise _damaged(path, f"{atoms} atoms")
    if strict:
        wrong = [at for at, value in _FIXED_FIELDS.items() if i32(at) != value]
        if wrong:
            raise _damaged(path, f"header field at byte {wrong[0]} reads {i32(wrong[0])}, not "
                                 f"{_FIXED_FIELDS[wrong[0]]}")
        if not (0 <= n_title <= 40 and title_len == 4 + 80 * n_title and i32(92 + 4 + title_len) == title_len):
            raise _damaged(path, "its title record is broken")
        if any(not (32 <= b < 127 or b == 0) for b in head[100:100 + 80 * n_title]):
            raise _damaged(path, "its title holds bytes that are not text")
        if i32(off) != 4 or i32(off + 8) != 4:
            raise _damaged(path, "its atom-count record is broken")
        if frames < 0 or first < 0 or interval < 1 or has_cell not in (0, 1):
            raise _damaged(path, f"header counts {frames} frames from step {first} every {interval} steps, unit cell "
                                 f"flag {has_cell}")
        # the last step follows the count (a writer killed between the two fields leaves it one frame behind)
        if frames > 0 and last not in (first + (frames - 1) * interval, first + max(frames - 2, 0) * interval):
            raise _damaged(path, f"header's last step {last} is not {first} + {frames - 1} x {interval}")
        if not (math.isfinite(dt_akma) and dt_akma > 0):
            raise _damaged(path, f"header's time step {dt_akma} is not a positive number")
    dt = float(dt_akma) * AKMA_TIME_PS if math.isfinite(dt_akma) and dt_akma > 0 else 0.0
    return DCDHeader(frames=int(frames), first_step=int(first), interval=max(int(interval), 1), dt_ps=dt,
                     atoms=int(atoms), has_cell=has_cell != 0, data_offset=off + 12,
                     frame_bytes=(_CELL_BYTES if has_cell else 0) + 3 * (8 + 4 * atoms), file_bytes=size)


def _check_frames(raw: np.ndarray, head: DCDHeader) -> np.ndarray:
    """Which frames of ``raw`` [F, frame_bytes] (uint8) are whole: their records' lengths are OpenMM's and every
    number in them is finite (OpenMM writes no NaN or infinite position). Returns a bool array [F]."""
    ints = raw.view("<i4")                              # (a frame is a whole number of 4-byte words)
    ok = np.ones(len(raw), dtype=bool)
    cell = 0
    if head.has_cell:
        ok &= (ints[:, 0] == 48) & (ints[:, 13] == 48)
        ok &= np.isfinite(raw[:, 4:52].copy().view("<f8")).all(axis=1)
        cell = _CELL_BYTES // 4
    n = head.atoms
    for axis in range(3):
        at = cell + axis * (n + 2)
        ok &= (ints[:, at] == 4 * n) & (ints[:, at + n + 1] == 4 * n)
        # finite: the float32's exponent bits are not all ones (an integer test, faster than isfinite)
        ok &= ((ints[:, at + 1:at + 1 + n] & 0x7F800000) != 0x7F800000).all(axis=1)
    return ok


def read_dcd(path: str, atoms: Optional[Sequence[int]] = None, notes: Optional[List[str]] = None,
             frames: Optional[Sequence[int]] = None, strict: bool = False) -> np.ndarray:
    """Positions [T, N, 3] in nm (float64) of a DCD file (with or without unit-cell records); ``atoms``
    selects particle indices, ``frames`` frame indices (default all).

    ``T`` is the number of frames the header counts that are complete in the file: frames past the header's
    count (written by a killed :class:`DCDWriter` before it could count them) and a partial last frame are
    not read. A file without such a frame (a run killed before its first frame) gives ``[0, N, 3]``.

    Every frame read is checked whole (:func:`_check_frames`: its records' lengths, finite numbers): a damaged
    frame is an :class:`InputError` naming it, or, with a ``notes`` list, ends the trajectory there -- the frames
    before it are returned and a line saying so is appended to ``notes``. ``strict``: the header as OpenMM writes
    it (:func:`read_header`).
    """
    head = read_header(path, strict)
    count = head.complete_frames
    wanted = np.arange(count) if frames is None else np.asarray(frames, dtype=np.int64)
    if len(wanted) and (wanted.min() < 0 or wanted.max() >= count):
        raise InputError(f"{path}: no frame {int(wanted.max())} (it has {count} complete frames)")
    idx = np.arange(head.atoms) if atoms is None else np.asarray(atoms, dtype=int)
    out = np.zeros((len(wanted), len(idx), 3))
    if not len(wanted):
        return out
    cell = _CELL_BYTES // 4 if head.has_cell else 0
    raw_all = np.memmap(path, dtype=np.uint8, mode="r", offset=head.data_offset, shape=(count, head.frame_bytes))
    step = max(1, _CHUNK_BYTES // head.frame_bytes)
    try:
        for lo in range(0, len(wanted), step):
            sel = wanted[lo:lo + step]
            contiguous = frames is None or bool(np.all(np.diff(sel) == 1))
            raw = np.ascontiguousarray(raw_all[sel[0]:sel[-1] + 1] if contiguous else raw_all[sel])
            ok = _check_frames(raw, head)
            good = len(sel) if ok.all() else int(np.argmin(ok))
            floats = raw[:good].view("<f4")
            for axis in range(3):
                at = cell + axis * (head.atoms + 2) + 1
                out[lo:lo + good, :, axis] = floats[:, at + idx]
            if good < len(sel):
                bad = int(sel[good])
                what = (f"frame {bad} (step {head.step(bad)}) is damaged: its record lengths or numbers are not "
                        "what OpenMM writes")
                if notes is None:
                    raise _damaged(path, what)
                notes.append(f"{os.path.basename(path)}: {what}; it and the frames after it are left out, "
                             f"the {lo + good} before it are used")
                return out[:lo + good] * 0.1
    finally:
        del raw_all
    return out * 0.1                                                   # Angstrom -> nm


# -- writing ---------------------------------------------------------------------------------------------------

class DCDWriter:
    """One DCD file, frame by frame, each frame written and flushed before the header counts it.

    The header is OpenMM's (``openmm.app.DCDFile`` writes it, or checks it with ``append=True``, for which
    the file must exist); frames carry the unit cell of ``topology`` when it has one, as ``DCDFile`` writes
    them without box vectors. The frame count, steps and time step are read back from the header bytes.
    """

    def __init__(self, path: str, topology, dt_ps: float, first_step: int = 0, interval: int = 1,
                 append: bool = False):
        import openmm.app as app
        from openmm.app.internal.unitcell import computeLengthsAndAngles

        self.path = path
        self._out = AppendedFile(path, "r+b" if append else "w+b", "writing the trajectory",
                                 "opening the trajectory")
        self.file = self._out.file
        try:
            app.DCDFile(self.file, topology, dt_ps, first_step, interval, append)
            f = self.file
            f.flush()
            f.seek(8)
            self.frames, first, every = struct.unpack("<3i", f.read(12))
            f.seek(44)
            (dt,) = struct.unpack("<f", f.read(4))
            f.seek(0, os.SEEK_END)
        except OSError as exc:
            self._out.failed = True
            self.close()
            raise output_error(exc, "writing the trajectory", path) from None
        except BaseException:
            self._out.failed = True
            self.close()
            raise
        self._steps = [first, every, dt]                    # first step, interval, time step, as in the file
        self._cell = b""
        box = topology.getPeriodicBoxVectors()
        if box is not None:                                 # as DCDFile: the topology's box, in Angstrom
            a, b, c, alpha, beta, gamma = computeLengthsAndAngles(box)
            self._cell = struct.pack("<i6di", 48, 10 * a, math.sin(math.pi / 2 - gamma), 10 * b,
                                     math.sin(math.pi / 2 - beta), math.sin(math.pi / 2 - alpha), 10 * c, 48)

    def _frame(self, xyz_nm: np.ndarray) -> bytes:
        if not np.isfinite(xyz_nm).all():
            raise ValueError("Particle position is NaN or infinite; not written to the DCD file")
        length = struct.pack("<i", 4 * xyz_nm.shape[0])
        parts = [self._cell]
        for axis in range(3):
            parts += [length, (10.0 * xyz_nm[:, axis]).astype("<f4").tobytes(), length]
        return b"".join(parts)

    def write(self, xyz_nm: np.ndarray) -> None:
        """Append one frame (positions [N, 3], nm), then count it in the header.

        A write that fails (a full disk, an I/O error) raises one :class:`~flashschnet.errors.OutputError` naming
        the file; the header never counts the frame (a checkpoint's resume cuts the file back), and :meth:`close`
        does not report the same failure again."""
        frame = self._frame(np.asarray(xyz_nm))
        self._out.io(lambda: self._append(frame))

    def _append(self, frame: bytes) -> None:
        f, head = self.file, self._steps
        n = self.frames + 1
        f.seek(0, os.SEEK_END)
        f.write(frame)
        f.flush()                                          # the frame is in the file ...
        if head[1] > 1 and head[0] + n * head[1] > 1 << 31:
            # as DCDFile: keep the 32-bit step fields in range by recording fewer, longer steps
            head[0] //= head[1]
            head[2] *= head[1]
            head[1] = 1
            f.seek(12)
            f.write(struct.pack("<ii", head[0], head[1]))
            f.seek(44)
            f.write(struct.pack("<f", head[2]))
        f.seek(8)
        f.write(struct.pack("<i", n))                      # ... before the header counts it
        f.seek(20)
        f.write(struct.pack("<i", head[0] + (n - 1) * head[1]))
        f.seek(0, os.SEEK_END)
        f.flush()
        self.frames = n

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self.file.tell() if not self.file.closed else os.path.getsize(self.path)

    def sync(self) -> None:
        """Flush and fsync (before a checkpoint that refers to the size)."""
        self._out.sync()

    def close(self) -> None:
        """Close the file (idempotent). After a failed write (already reported) the bytes it left unwritten are
        dropped silently: the file is closed all the same."""
        self._out.close()


def truncate_dcd(path: str, nbytes: int, nframes: int) -> None:
    """Cut a DCD file written by OpenMM back to ``nbytes`` holding ``nframes`` frames (header updated).

    Raises :class:`InputError` when the file is shorter than ``nbytes`` (data the checkpoint relies on was
    lost, e.g. by a system crash before it reached the disk)."""
    size = os.path.getsize(path) if os.path.exists(path) else -1
    if size < nbytes:
        raise InputError(f"{path}: {'missing' if size < 0 else f'holds {size} bytes'}, but the checkpoint "
                         f"counts {nbytes} bytes ({nframes} frames) in it; the trajectory lost data the checkpoint "
                         "relies on; start a new run")
    try:
        with open(path, "r+b") as f:
            f.truncate(nbytes)
            f.seek(8)
            f.write(struct.pack("<i", nframes))
            f.seek(12)
            first, interval = struct.unpack("<ii", f.read(8))
            f.seek(20)
            f.write(struct.pack("<i", first + max(nframes - 1, 0) * interval))
    except OSError as exc:        # nothing is lost: the checkpoint's bytes are in the file, the next resume cuts again
        raise output_error(exc, "cutting back (to the checkpoint) the trajectory", path) from None
