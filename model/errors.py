"""Error types. Every error a user can cause by bad input is an :class:`InputError` whose message is one
line naming the file, residue or atom at fault and what to do; command-line front ends print it without a
traceback and exit with status 2. An output that cannot be written (a full disk, a read-only file system, an I/O
error) is an :class:`OutputError`, one line too, with exit status 5, 6 or 7 (:func:`os_error_status`)."""


class FlashSchNetError(Exception):
    """Base class of the errors this package raises on purpose."""


class InputError(FlashSchNetError, ValueError):
    """Bad user input (a file, a structure, a model, an argument). The message is one line."""


class SimulationInstabilityError(FlashSchNetError, RuntimeError):
    """A simulation produced NaN or huge energies/forces. The message names step and replica."""


class ClusterError(FlashSchNetError, RuntimeError):
    """The cluster running an ensemble's blocks cannot go on (no live worker left, the scheduler gone); the
    run's last checkpoint is intact, so ``--resume`` continues it. The message is one line."""


# -- outputs that cannot be written ----------------------------------------------------------------------------

#: exit statuses of a command whose output could not be written (:func:`os_error_status`; the command-line front
#: ends' ``finish``): 5 no space left, 6 not allowed to write, 7 any other I/O error
EXIT_NO_SPACE, EXIT_NOT_WRITABLE, EXIT_IO_ERROR = 5, 6, 7


def _errnos(*names: str) -> frozenset:
    import errno

    return frozenset(getattr(errno, n) for n in names if hasattr(errno, n))


#: errno values of a full disk (or quota, or file-size limit) and of a place one may not write to
NO_SPACE_ERRNOS = _errnos("ENOSPC", "EDQUOT", "EFBIG")
NOT_WRITABLE_ERRNOS = _errnos("EROFS", "EACCES", "EPERM")


def os_error_status(errno_value) -> int:
    """The exit status of an OS error with ``errno_value`` (None: unknown): :data:`EXIT_NO_SPACE` (ENOSPC, EDQUOT,
    EFBIG), :data:`EXIT_NOT_WRITABLE` (EROFS, EACCES, EPERM) or :data:`EXIT_IO_ERROR` (EIO and every other)."""
    if errno_value in NO_SPACE_ERRNOS:
        return EXIT_NO_SPACE
    if errno_value in NOT_WRITABLE_ERRNOS:
        return EXIT_NOT_WRITABLE
    return EXIT_IO_ERROR


def os_error_fix(errno_value, option: str = "--out") -> str:
    """What to do about an OS error with ``errno_value`` while writing (``option``: the command-line option that
    chose the place, for "choose another ...")."""
    import errno

    status = os_error_status(errno_value)
    if status == EXIT_NO_SPACE:
        return f"free space on its file system (or choose another {option})"
    if status == EXIT_NOT_WRITABLE:
        return f"make it writable (or choose another {option})"
    if errno_value == errno.EIO:
        return "check the disk and its file system (the kernel log, dmesg, names the fault)"
    return "check the file and its file system"


class OutputError(FlashSchNetError, OSError):
    """An output could not be written (a full disk, a read-only file system, an I/O error).

    An :class:`OSError` with the failing call's ``errno``, ``strerror`` and ``filename``, plus ``what`` (e.g.
    ``"writing the checkpoint"``) and ``option`` (the command-line option that chose the place, for the advice);
    ``str()`` is one line: what failed, the file, the OS's reason and what to do. ``status`` is the command-line
    exit status (:func:`os_error_status`). The writers of this package raise it after removing what they had
    written half (no stale temporary file); the previous complete file, e.g. the last checkpoint, is kept.
    """

    def __init__(self, what: str, errno_value, strerror: str, filename=None, option: str = "--out"):
        OSError.__init__(self, errno_value, strerror, filename)
        self.what, self.option = what, option

    def __reduce__(self):                     # picklable (a Dask worker's error travels to the driver)
        return type(self), (self.what, self.errno, self.strerror, self.filename, self.option)

    @property
    def status(self) -> int:
        return os_error_status(self.errno)

    def __str__(self) -> str:
        import errno

        code = errno.errorcode.get(self.errno) if self.errno is not None else None
        where = f" {self.filename}" if self.filename else ""
        return (f"{self.what}{where} failed: {self.strerror}{f' ({code})' if code else ''}; "
                f"{os_error_fix(self.errno, self.option)}")


def output_error(exc: OSError, what: str, filename=None, option: str = "--out") -> OutputError:
    """``exc`` (an OSError raised while writing ``filename``) as an :class:`OutputError` saying ``what`` failed; an
    OutputError is returned unchanged."""
    if isinstance(exc, OutputError):
        return exc
    reason = exc.strerror or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return OutputError(what, exc.errno, reason, filename if filename is not None else exc.filename, option)


def find_os_error(exc: BaseException):
    """The OSError ``exc`` is or was caused by (its ``__cause__`` / unsuppressed ``__context__`` chain, e.g. a
    library's RuntimeError raised while handling a failed write), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return None
