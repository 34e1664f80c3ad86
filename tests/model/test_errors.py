"""flashschnet.errors: the exit status of each errno, the one-line OutputError (an OSError that pickles whole),
and the OSError found behind a library's own exception. Writes that fail (flashschnet.atomic):
tests/model/test_atomic.py."""
from __future__ import annotations

import errno
import os
import pickle

import pytest

from flashschnet.errors import (EXIT_IO_ERROR, EXIT_NO_SPACE, EXIT_NOT_WRITABLE, FlashSchNetError, OutputError,
                                find_os_error, os_error_status, output_error)


@pytest.mark.parametrize("code, status", [
    (errno.ENOSPC, EXIT_NO_SPACE), (errno.EDQUOT, EXIT_NO_SPACE), (errno.EFBIG, EXIT_NO_SPACE),
    (errno.EROFS, EXIT_NOT_WRITABLE), (errno.EACCES, EXIT_NOT_WRITABLE), (errno.EPERM, EXIT_NOT_WRITABLE),
    (errno.EIO, EXIT_IO_ERROR), (errno.ENOENT, EXIT_IO_ERROR), (None, EXIT_IO_ERROR)])
def test_exit_status_of_each_errno(code, status):
    assert (EXIT_NO_SPACE, EXIT_NOT_WRITABLE, EXIT_IO_ERROR) == (5, 6, 7)
    assert os_error_status(code) == status
    exc = output_error(OSError(code, os.strerror(code) if code else "failed"), "writing the log", "/x/log.csv")
    assert exc.status == status and exc.errno == code and exc.filename == "/x/log.csv"
    line = str(exc)
    assert "\n" not in line and line.startswith("writing the log /x/log.csv failed: ")
    advice = {EXIT_NO_SPACE: "free space", EXIT_NOT_WRITABLE: "make it writable", EXIT_IO_ERROR: "check the"}[status]
    assert advice in line, line
    if code is not None:
        assert f"({errno.errorcode[code]})" in line


def test_output_error_is_an_oserror_and_pickles():
    exc = output_error(OSError(errno.EROFS, "Read-only file system"), "writing the checkpoint", "/r/checkpoint.chk",
                       option="OUTPUT")
    assert isinstance(exc, OSError) and isinstance(exc, FlashSchNetError)
    assert "choose another OUTPUT" in str(exc)
    back = pickle.loads(pickle.dumps(exc))        # a Dask worker's error reaches the driving process whole
    assert type(back) is OutputError and str(back) == str(exc) and back.status == EXIT_NOT_WRITABLE
    assert output_error(exc, "something else") is exc


def test_find_os_error_follows_causes_but_not_suppressed_contexts():
    try:
        try:
            raise OSError(errno.EIO, "Input/output error")
        except OSError as inner:
            raise RuntimeError("[enforce fail] file write failed") from inner
    except RuntimeError as exc:
        assert find_os_error(exc).errno == errno.EIO
    try:
        try:
            raise OSError(errno.EIO, "Input/output error")
        except OSError:
            raise ValueError("bad value") from None
    except ValueError as exc:
        assert find_os_error(exc) is None
    assert find_os_error(KeyError("x")) is None
