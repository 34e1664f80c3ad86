"""DCD files compared byte for byte (tests/integration/test_long_runs.py,
tests/openmm/reporters/test_dcd_reporter.py)."""
from __future__ import annotations

import struct
from pathlib import Path


def dcd_parts(path):
    """(the header without its title record -- which holds the creation time --, the frames) of a DCD file."""
    data = Path(path).read_bytes()
    (n_title,) = struct.unpack("<i", data[92:96])
    off = 92 + 4 + n_title + 4 + 12
    return data[:92] + data[92 + 4 + n_title:off], data[off:]
