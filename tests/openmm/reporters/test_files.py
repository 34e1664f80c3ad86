"""What plain runs and ensembles share (``flashschnet.openmm.reporters.files``): one checkpoint file format, one
CSV appender, one set of cut-backs to a checkpoint (the log writer they share: test_log.py)."""
from __future__ import annotations

import errno
import json
import struct

import numpy as np
import openmm.app as app
import pytest

import flashschnet.atomic as atomic
from flashschnet.errors import InputError, OutputError
from flashschnet.openmm.dcd import DCDWriter, read_dcd
from flashschnet.openmm.reporters import (CHECKPOINT_MAGIC, CSVFile, cut_csv_to_size, cut_trajectories,
                                          read_checkpoint, write_checkpoint)


def test_one_checkpoint_file_with_or_without_an_openmm_state(tmp_path):
    """The layout every checkpoint has (plain runs, walker blocks, an ensemble's run checkpoint): magic, the header's
    length, the JSON header (with the state's sha256, when there is a state), then OpenMM's state, if any. A state
    that does not match its sha256 (damaged or cut short), a header cut short or garbled, or another file is one
    InputError line naming the file; a checkpoint of an older version (no sha256) still reads."""
    import hashlib

    meta = {"step": 20, "dcd_bytes": [1, 2], "dropped": []}
    for name, state in (("run.chk", b"openmm state"), ("ensemble.chk", b"")):
        path = tmp_path / name
        write_checkpoint(str(path), meta, state)
        stored = dict(meta, state_sha256=hashlib.sha256(state).hexdigest()) if state else meta
        header = json.dumps(stored).encode()
        assert path.read_bytes() == CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header + state
        assert read_checkpoint(str(path)) == (meta, state)
    assert not list(tmp_path.glob("*.tmp"))
    data = (tmp_path / "run.chk").read_bytes()
    older = json.dumps(meta).encode()
    for name, content, message in (
            ("other.chk", b"not a checkpoint at all", "not a flashschnet checkpoint"),
            ("empty.chk", b"", "empty"),
            ("cut_state.chk", data[:-3], "OpenMM state is damaged or cut short"),
            ("flipped_state.chk", data[:-3] + b"\xff\xff\xff", "OpenMM state is damaged or cut short"),
            ("cut_header.chk", data[:30], "cut short inside its header"),
            ("garbled_header.chk", data[:20] + b"\xff" * 8 + data[28:], "header is damaged")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InputError, match=message) as exc:
            read_checkpoint(str(tmp_path / name))
        assert name in str(exc.value) and "\n" not in str(exc.value)
    (tmp_path / "older.chk").write_bytes(CHECKPOINT_MAGIC + struct.pack("<Q", len(older)) + older + b"state")
    assert read_checkpoint(str(tmp_path / "older.chk")) == (meta, b"state")


def test_a_csv_file_starts_with_its_header_appends_and_is_cut_back_to_a_recorded_size(tmp_path):
    path = tmp_path / "walkers.csv"
    f = CSVFile(str(path), ["step", "T300.0"])
    f.rows([[0, 1]])
    size = f.sync()
    assert size == path.stat().st_size == len("step,T300.0\r\n0,1\r\n")
    f.rows([[10, 0], [20, 1]])
    f.close()
    f.close()                                                    # idempotent
    cut_csv_to_size(str(path), size)
    again = CSVFile(str(path), ["step", "T300.0"], append=True)   # no second header
    again.rows([[10, 1]])
    again.close()
    assert path.read_bytes() == b"step,T300.0\r\n0,1\r\n10,1\r\n"
    with pytest.raises(InputError, match=r"walkers\.csv: shorter than the checkpoint records \(1000 bytes\)"):
        cut_csv_to_size(str(path), 1000)


def test_a_failed_csv_write_is_one_error_naming_the_file_and_close_stays_quiet(tmp_path, write_faults):
    path = tmp_path / "exchanges.csv"
    write_faults.fail("exchanges.csv", module=atomic, errno=errno.EIO, limit=30)
    f = CSVFile(str(path), ["step", "pair"], what="writing the exchanges")
    with pytest.raises(OutputError) as err:
        f.rows([[i, 0] for i in range(20)])
    assert f"writing the exchanges {path} failed" in str(err.value) and "EIO" in str(err.value)
    f.close()                                                    # the failure was reported once: no second error


def test_trajectories_are_cut_back_to_the_checkpoint_also_from_an_older_single_count(tmp_path):
    top = app.Topology()
    top.addAtom("CA", app.Element.getBySymbol("C"), top.addResidue("ALA", top.addChain()))
    paths = [str(tmp_path / f"replica_{r:03d}.dcd") for r in range(2)]
    writers = [DCDWriter(p, top, 0.004) for p in paths]
    for w in writers:
        w.write(np.zeros((1, 3)))
    sizes = [w.size for w in writers]
    for w in writers:
        w.write(np.ones((1, 3)))
        w.close()
    for frames in (1, [1, 1]):                                   # older checkpoints: one count for every file
        cut_trajectories(paths, {"dcd_bytes": sizes, "dcd_frames": frames})
        assert [len(read_dcd(p)) for p in paths] == [1, 1]
