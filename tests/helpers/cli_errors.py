"""The one error line of a failed command, as the commands' tests (tests/scripts/) check it."""
from __future__ import annotations


def error_line(err: str, prog: str = "flashschnet-simulate") -> str:
    """The one error line of a failed command: its last line, the only one starting "PROG: error:"; no
    traceback, nothing but the command's own lines (notes, progress) before it."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(f"{prog}: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert all(ln.startswith(f"{prog}: ") for ln in lines), err
    return errors[0]
