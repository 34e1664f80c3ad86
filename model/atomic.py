"""Files written whole or not at all: a full disk, a read-only file system or an I/O error never leaves a
truncated file where a complete one is expected, nor a stale temporary file.

* :func:`atomic_write` -- one file: written to ``PATH.tmp`` in the same folder (``unique=True``: a temporary name
  of its own, for files that several processes may write at once, e.g. the filter-table cache), flushed and
  fsynced, renamed over ``PATH`` (the folder fsynced); on any failure the temporary file is removed and the
  previous ``PATH``, if any, is untouched.
* :func:`staged_files` -- several files of one report (figures, ``report.md``, ``report.json``): written into a
  hidden folder inside the destination, then each renamed into place; on failure the folder is removed and
  nothing of the new report is in the destination.
* :class:`AppendedFile` -- a file a run appends to (trajectory, logs): every failed write is one error naming the
  file, reported once; the run's checkpoint, not this class, decides what a resume keeps.
* :func:`fsync_dir` -- make a rename durable.

An :class:`OSError` becomes an :class:`~flashschnet.errors.OutputError` naming the file (one line, with its
exit status); other exceptions pass unchanged after the clean-up.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Callable, Iterator, Optional, TypeVar

from .errors import output_error

T = TypeVar("T")


def fsync_dir(path: str) -> None:
    """fsync a directory, so a rename in it survives a system crash (no-op where directories cannot be
    opened, e.g. Windows)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's file-creation mask (read without changing it where Linux tells it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_quietly(path: str) -> None:
    """Remove a file or folder if it is there; ignore what cannot be removed (clean-up after a failure)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
    except OSError:
        pass


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file: the same existing file (links and other spellings included),
    or the same absolute path. An output that is one of its command's inputs is refused with this."""
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(os.fspath(a)) == os.path.abspath(os.fspath(b))


def check_not_an_input(path, option: str, inputs) -> None:
    """Refuse an output that is one of its command's own inputs (``inputs``: ``(what, path)`` pairs; the same file
    by any spelling or link, :func:`same_file`), ``--force`` or not: it would be written over what it is made
    from."""
    from .errors import InputError

    for what, given in inputs:
        if given and same_file(path, given):
            raise InputError(f"{option} {path} is the {what} itself: it would be written over its own input "
                             "(--force or not); choose another file")


@contextlib.contextmanager
def atomic_write(path, mode: str = "wb", what: str = "writing", option: str = "--out", unique: bool = False,
                 **open_kwargs) -> Iterator:
    """Open ``PATH.tmp`` for writing and yield the file object; when the block ends, flush, fsync and rename it
    over ``path`` (then fsync the folder).

    Parameters
    ----------
    path : str or PathLike
    mode : str
        ``"wb"`` or ``"w"`` (text; ``open_kwargs`` such as ``newline=""`` or ``encoding`` are passed on).
    what : str
        What is being written, for the message, e.g. ``"writing the checkpoint"``.
    option : str
        The command-line option that chose the place (``"choose another --out"``).
    unique : bool
        Write to a temporary file of a name no other writer uses (``PATH.<random>.tmp``) instead of ``PATH.tmp``:
        writers racing for one ``path`` then never share a temporary file, and the last rename wins whole.

    Raises
    ------
    OutputError
        An OSError while writing, syncing or renaming (the temporary file removed, ``path`` as it was).
    """
    path = os.fspath(path)
    tmp = None if unique else path + ".tmp"      # (a failed mkstemp must not remove another writer's file)
    try:
        if unique:
            fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                       dir=os.path.dirname(os.path.abspath(path)))
            os.close(fd)
            os.chmod(tmp, 0o666 & ~_umask())           # as open() would make it (mkstemp's is 0600)
        with open(tmp, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        if tmp is not None:
            remove_quietly(tmp)
        raise output_error(exc, what, path, option) from None
    except BaseException:
        if tmp is not None:
            remove_quietly(tmp)
        raise


def _newest_file(folder: str) -> Optional[str]:
    """The most recently modified file in ``folder`` (the one being written when a write failed), or None."""
    try:
        entries = [e for e in os.scandir(folder) if e.is_file()]
    except OSError:
        return None
    return max(entries, key=lambda e: e.stat().st_mtime_ns).name if entries else None


@contextlib.contextmanager
def staged_files(folder, what: str = "writing the report", option: str = "--out") -> Iterator[str]:
    """Yield a new hidden folder inside ``folder`` (which must exist) to write a set of files into; when the block
    ends, fsync them and rename each into ``folder`` (replacing files of the same name), then remove the staging
    folder. On failure the staging folder and everything in it are removed: ``folder`` keeps its previous files,
    and no partly written one (a truncated figure) appears in it.

    Raises
    ------
    OutputError
        An OSError while writing (naming the file that was being written, when it can be told), syncing or
        renaming.
    """
    folder = os.fspath(folder)
    try:
        stage = tempfile.mkdtemp(prefix=".partial-", dir=folder)
    except OSError as exc:
        raise output_error(exc, what, folder, option) from None
    current = None
    try:
        yield stage
        names = sorted(os.listdir(stage))
        for name in names:
            current = name
            fd = os.open(os.path.join(stage, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for name in names:
            current = name
            os.replace(os.path.join(stage, name), os.path.join(folder, name))
        fsync_dir(folder)
    except OSError as exc:
        name = current or _newest_file(stage)
        remove_quietly(stage)
        raise output_error(exc, what, os.path.join(folder, name) if name else folder, option) from None
    except BaseException:
        remove_quietly(stage)
        raise
    remove_quietly(stage)


class AppendedFile:
    """An output file held open over a run and appended to (a DCD trajectory, a CSV log).

    Every :class:`OSError` of a write, flush, fsync or close becomes one :class:`~flashschnet.errors.OutputError`
    naming the file (``what`` says what was being done, e.g. "writing the log"). A failure is reported once:
    after it, :meth:`close` closes the file quietly (the bytes a full disk left buffered are dropped; the run's
    checkpoint records the size a resume cuts the file back to).

    Parameters
    ----------
    path : str
    mode : str
        ``open``'s mode (``"w"``/``"a"`` text with ``newline=""`` for CSV, ``"w+b"``/``"r+b"`` for DCD).
    what, opening : str
        What a write does and what opening does, for the error line ("writing the log", "opening the log").
    """

    def __init__(self, path: str, mode: str, what: str = "writing", opening: str = "opening", **open_kwargs):
        self.path, self.what = path, what
        self.failed = False
        try:
            self.file = open(path, mode, **open_kwargs)
        except OSError as exc:
            raise output_error(exc, opening, path) from None

    def io(self, write: Callable[[], T]) -> T:
        """Run ``write`` (which uses :attr:`file`) and return its result; an OSError becomes the file's one error
        (and marks it failed)."""
        try:
            return write()
        except OSError as exc:
            self.failed = True
            raise output_error(exc, self.what, self.path) from None

    def sync(self) -> None:
        """Flush and fsync (before a checkpoint that records the file's size); nothing once closed."""
        if not self.file.closed:
            self.io(lambda: (self.file.flush(), os.fsync(self.file.fileno())))

    def close(self) -> None:
        """Close (idempotent); quiet after a failure already reported."""
        if self.file.closed:
            return
        try:
            self.file.close()
        except OSError as exc:
            if not self.failed:
                self.failed = True
                raise output_error(exc, self.what, self.path) from None
