"""Writes that fail, fuzzed (hypothesis): a tiny ``flashschnet-simulate`` run whose checkpoint, trajectory, log or
run.json fails after a drawn number of bytes, at a drawn occurrence, with ENOSPC, EIO, EROFS or EACCES
(tests/helpers/faults.py). Oracle: exit 0 (the fault was never reached) or the errno's own status (5, 6, 7) with one
``error:`` line and no traceback; no ``*.tmp`` or staging folder left; then, with the fault gone, ``--resume`` (or,
before the first checkpoint, a new start) ends bitwise equal to the uninterrupted run."""
from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import flashschnet.atomic as atomic
from tests.conftest import EXAMPLES
from flashschnet.errors import os_error_status
from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.reporters import read_checkpoint
from flashschnet.scripts.simulate import main as simulate
from tests.helpers.faults import WriteFaults

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
COMMON = ["--report-interval", "5", "--checkpoint-interval", "10", "--seed", "5", "--quiet", "--threads", "1"]
STEPS = 20
#: (file name pattern, the module whose ``open`` writes it, how many times it is opened for writing in a run)
TARGETS = [("checkpoint.chk.tmp", atomic, 3), ("run.json.tmp", atomic, 1), ("replica_000.dcd", atomic, 1),
           ("log.csv", atomic, 1)]
ERRNOS = [errno.ENOSPC, errno.EIO, errno.EROFS, errno.EACCES]


def _simulate(out, *extra):
    return simulate([PDB, "--model", MODEL, "--steps", str(STEPS), "--out", str(out), *COMMON, *extra])


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    assert _simulate(out) == 0
    return out


def _rows(out):
    with open(out / "log.csv") as f:
        return [line.rsplit(",", 1)[0] for line in f]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(TARGETS), code=st.sampled_from(ERRNOS), limit=st.sampled_from([0, 60, 2000, 10**6]),
       nth=st.integers(1, 3))
def test_a_failed_write_is_one_line_and_the_run_finishes_bitwise_after_it(straight, tmp_path_factory, capsys,
                                                                          target, code, limit, nth):
    pattern, module, opens = target
    out = tmp_path_factory.mktemp("faulty") / "run"
    with pytest.MonkeyPatch.context() as mp:
        WriteFaults(mp).fail(pattern, module=module, errno=code, limit=limit, nth=min(nth, opens))
        capsys.readouterr()
        rc = _simulate(out)
    err = capsys.readouterr().err
    event(f"exit {rc}")
    assert "Traceback" not in err
    assert rc in (0, os_error_status(code)), err
    if rc:
        assert sum(line.startswith("flashschnet-simulate: error: ") for line in err.splitlines()) == 1, err
    left = [n for n in os.listdir(out) if n.endswith(".tmp") or n.startswith(".partial")] if out.exists() else []
    assert not left, left
    if rc and (out / "checkpoint.chk").exists():
        assert _simulate(out, "--resume") == 0, capsys.readouterr().err
    elif rc:                                  # failed before its first checkpoint: start again
        assert "--resume" not in err.splitlines()[-1] or "start" in err.splitlines()[-1], err
        shutil.rmtree(out)
        assert _simulate(out) == 0
    assert np.array_equal(read_dcd(str(out / "replica_000.dcd")), read_dcd(str(straight / "replica_000.dcd")))
    assert _rows(out) == _rows(straight)
    assert read_checkpoint(str(out / "checkpoint.chk"))[0]["step"] == STEPS
