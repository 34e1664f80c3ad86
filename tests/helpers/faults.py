"""Fault injection for writes: a file that fills up, a file system that turns read-only, a disk that fails.

:class:`WriteFaults` (the ``write_faults`` fixture of ``conftest.py``) replaces ``open`` -- in one module's globals,
or ``builtins.open`` for library code such as Pillow -- by one that wraps the files whose names match in a
:class:`FailingFile`: it writes through to the real file until ``limit`` bytes (or characters, in text mode) went
through it, writes what still fits of the write that crosses the limit (a partial write, as a full disk leaves),
and raises ``OSError(errno)`` -- ENOSPC, EIO, EROFS, EACCES -- for that write and every later one, and, as
Python's buffered files on a full disk do, for every later ``flush`` and for ``close`` (which closes the file all
the same). ``on_open=True`` fails the ``open`` itself (EROFS, EACCES: the file cannot
be created at all). Nothing here needs privileges or a special file system, so CI runs it everywhere.
"""
from __future__ import annotations

import builtins
import errno as errno_module
import fnmatch
import os
from typing import List, Optional


class FailingFile:
    """A file object that fails once ``limit`` bytes went through :meth:`write` (see the module docstring)."""

    def __init__(self, real, code: int, limit: int):
        self._real, self._code, self._left = real, code, limit
        self.failed = False

    def write(self, data):
        if self.failed or len(data) > self._left:
            part = data[:max(self._left, 0)] if not self.failed else data[:0]
            if len(part):
                self._real.write(part)
            self._left = 0
            self.failed = True
            raise OSError(self._code, os.strerror(self._code))
        self._left -= len(data)
        return self._real.write(data)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def _raise(self):
        raise OSError(self._code, os.strerror(self._code))

    def flush(self):
        """After the failure the rest stays "buffered": flushing fails again, as on a full disk."""
        self._real.flush()
        if self.failed:
            self._raise()

    def close(self):
        """Closes the real file; after the failure raises again (Python's buffered files close their descriptor
        and re-raise the failed flush)."""
        if self._real.closed:
            return
        self._real.close()
        if self.failed:
            self._raise()

    @property
    def closed(self):
        return self._real.closed

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __iter__(self):
        return iter(self._real)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class WriteFaults:
    """Arms write failures for one test (``monkeypatch`` undoes them).

    ``fail(pattern, ...)`` makes files whose base name matches the glob ``pattern`` fail; ``module`` is the
    module whose ``open`` is replaced (default: ``builtins``, i.e. everything that calls the built-in ``open``).
    ``nth``: only the ``nth`` (1-based) matching open fails, earlier ones are left alone (e.g. the second
    checkpoint save). ``limit``: bytes written before the failure. ``errno``: the failure's errno.
    ``on_open``: the open itself fails. ``opened`` lists every matching path opened (for asserts).
    """

    def __init__(self, monkeypatch):
        self._monkeypatch = monkeypatch
        self.opened: List[str] = []
        self.failing: List[FailingFile] = []

    def fail(self, pattern: str, module=None, errno: int = errno_module.ENOSPC, limit: int = 0, nth: int = 1,
             on_open: bool = False, times: Optional[int] = 1) -> "WriteFaults":
        target = module if module is not None else builtins
        real_open = getattr(target, "open", builtins.open)
        count = {"n": 0}

        def fake_open(file, mode="r", *args, **kwargs):
            name = os.path.basename(os.fspath(file)) if isinstance(file, (str, bytes, os.PathLike)) else ""
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            writing = any(c in mode for c in "wax+")
            if not (writing and name and fnmatch.fnmatch(name, pattern)):
                return real_open(file, mode, *args, **kwargs)
            count["n"] += 1
            self.opened.append(os.fspath(file))
            armed = count["n"] >= nth and (times is None or count["n"] < nth + times)
            if armed and on_open:
                raise OSError(errno, os.strerror(errno), os.fspath(file))
            real = real_open(file, mode, *args, **kwargs)
            if not armed:
                return real
            wrapped = FailingFile(real, errno, limit)
            self.failing.append(wrapped)
            return wrapped

        self._monkeypatch.setattr(target, "open", fake_open, raising=False)
        return self


def mount_tmpfs(path, size: str = "200k", read_only: bool = False) -> Optional[str]:
    """Mount a small tmpfs at ``path`` (created); return None on success, else why it could not be mounted (not
    root, no ``mount``, a container that forbids it) -- the caller skips with that reason. Unmount with
    :func:`unmount`, in a ``finally``."""
    import shutil
    import subprocess

    os.makedirs(path, exist_ok=True)
    if shutil.which("mount") is None:
        return "no mount command"
    options = f"size={size}" + (",ro" if read_only else "")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", os.fspath(path)], capture_output=True,
                         text=True)
    if res.returncode != 0:
        return f"mount -t tmpfs is not permitted here ({(res.stderr or res.stdout).strip() or res.returncode})"
    return None


def unmount(path) -> None:
    """Unmount what :func:`mount_tmpfs` mounted at ``path`` (lazily, so an open file cannot block it)."""
    import subprocess

    subprocess.run(["umount", "-l", os.fspath(path)], capture_output=True)
