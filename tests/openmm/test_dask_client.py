"""flashschnet.openmm.dask_client: exceptions as one line, and --scheduler without Dask's distributed refused in one
line naming the extra to install. (A real scheduler: tests/openmm/ensemble/test_cluster.py.)"""
from __future__ import annotations

import sys

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.dask_client import connect_scheduler, one_line


def test_an_exception_is_its_type_and_first_line_cut_to_the_limit():
    assert one_line(OSError("Timed out trying to connect\nafter 10 s")) == "OSError: Timed out trying to connect"
    assert one_line(ValueError()) == "ValueError" and one_line(ValueError("  \n ")) == "ValueError"
    long = one_line(RuntimeError("x" * 500), limit=40)
    assert len(long) == 40 and long == "RuntimeError: " + "x" * 23 + "..."
    assert one_line(RuntimeError("x" * 26), limit=40) == "RuntimeError: " + "x" * 26


def test_a_scheduler_without_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)              # as if not installed
    with pytest.raises(InputError) as exc:
        connect_scheduler("tcp://10.0.0.5:8786", echo=lambda line: pytest.fail(line))
    assert str(exc.value) == ("--scheduler tcp://10.0.0.5:8786: needs Dask's distributed package, which is not "
                              "installed: pip install 'flashschnet[cluster]'")
