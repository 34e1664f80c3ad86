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
* :func:`read_dcd` reads positions through mdtraj, capped at the header's frame count; :func:`read_header`
  reads that header.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import os
import struct
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..atomic import AppendedFile
from ..errors import InputError, output_error

AKMA_TIME_PS = 0.04888821            # the DCD header's time unit
_CELL_BYTES = 56                     # 4 + 6 float64 + 4


# -- reading ---------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _c_stdout_silenced():
    """Send the process's C-level stdout (file descriptor 1) to /dev/null inside the block.

    mdtraj's DCD reader is VMD's dcdplugin, which prints two ``dcdplugin) ...`` lines with C ``printf`` for every
    file it opens; no option turns them off (mdtraj/mdtraj#2173), and a run directory of 64 replicas would print
    128 of them. Python-level redirection cannot catch them, so the descriptor is swapped for the few
    milliseconds of the open and read (C's buffer is flushed before it is restored); output other threads write
    to stdout in that moment is lost too. Where there is no usable descriptor 1 the block runs unchanged."""
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@dataclass(frozen=True)
class DCDHeader:
    """What a DCD header says, and where its frames are."""

    frames: int            # frames the header counts
    first_step: int
    interval: int          # steps between frames (>= 1)
    dt_ps: float           # time step, 0 when not recorded
    atoms: int
    has_cell: bool         # each frame starts with a unit-cell record
    data_offset: int       # byte offset of the first frame
    frame_bytes: int       # bytes per frame
    file_bytes: int        # size of the file

    @property
    def complete_frames(self) -> int:
        """Frames that are counted by the header *and* completely in the file."""
        return max(min(self.frames, (self.file_bytes - self.data_offset) // self.frame_bytes), 0)


def read_header(path: str) -> DCDHeader:
    """The header of a little-endian CHARMM/OpenMM DCD file; :class:`InputError` when it is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            size = os.fstat(f.fileno()).st_size
        if len(head) < 100 or struct.unpack("<i", head[:4])[0] != 84 or head[4:8] != b"CORD":
            raise ValueError("not a little-endian CHARMM DCD file")
        frames, first, interval = struct.unpack("<3i", head[8:20])
        (dt_akma,) = struct.unpack("<f", head[44:48])
        (has_cell,) = struct.unpack("<i", head[48:52])
        (n_title,) = struct.unpack("<i", head[92:96])                  # title record
        off = 92 + 4 + n_title + 4
        (atoms,) = struct.unpack("<i", head[off + 4:off + 8])           # atom-count record
        if atoms < 1:
            raise ValueError(f"{atoms} atoms")
    except (OSError, struct.error, ValueError) as exc:
        raise InputError(f"{path}: not a readable DCD trajectory ({exc}); the file is damaged or not from "
                         "flashschnet-simulate/-martini") from None
    dt = float(dt_akma) * AKMA_TIME_PS if math.isfinite(dt_akma) and dt_akma > 0 else 0.0
    return DCDHeader(frames=int(frames), first_step=int(first), interval=max(int(interval), 1), dt_ps=dt,
                     atoms=int(atoms), has_cell=has_cell != 0, data_offset=off + 12,
                     frame_bytes=(_CELL_BYTES if has_cell else 0) + 3 * (8 + 4 * atoms), file_bytes=size)


def read_dcd(path: str, atoms: Optional[Sequence[int]] = None) -> np.ndarray:
    """Positions [T, N, 3] in nm (float64) of a DCD file (with or without unit-cell records); ``atoms``
    selects particle indices.

    ``T`` is the number of frames the header counts that are complete in the file: frames past the header's
    count (written by a killed :class:`DCDWriter` before it could count them) and a partial last frame are
    not read. A file without such a frame (a run killed before its first frame) gives ``[0, N, 3]``.
    """
    # mdtraj reads the frames, but it counts them from the file size whatever the header says (and cannot open
    # a file without a complete frame at all: "OSError: Could not open file"): the header's count, which our
    # writer raises only after a frame is complete and which a checkpoint records, is read here.
    head = read_header(path)
    count = head.complete_frames
    n = head.atoms if atoms is None else len(atoms)
    if count == 0:
        return np.zeros((0, n, 3))
    from mdtraj.formats import DCDTrajectoryFile

    idx = None if atoms is None else np.asarray(atoms, dtype=int)
    try:
        with _c_stdout_silenced(), DCDTrajectoryFile(path, "r") as f:
            xyz, _, _ = f.read(n_frames=count, atom_indices=idx)
    except (OSError, RuntimeError, ValueError) as exc:            # mdtraj's errors on a damaged file
        raise InputError(f"{path}: not a readable DCD trajectory ({exc}); the file is damaged or not from "
                         "flashschnet-simulate/-martini") from None
    return xyz.astype(np.float64) * 0.1                                 # Angstrom -> nm


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
