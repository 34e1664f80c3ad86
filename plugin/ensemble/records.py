"""The files the driving process writes for an ensemble run, and the run's checkpoint.

* ``log.csv``: one row per walker per report -- ``step, time_ps, replica, potential_energy_kJ_mol,
  temperature_K`` (kinetic), ``ns_per_day`` (per walker), ``thermostat_K`` (the walker's ladder temperature
  during the segment that ends at this step);
* ``exchanges.csv`` (parallel tempering): one row per tried swap -- ``step, pair`` (rungs ``pair`` and
  ``pair+1``), ``T_lo_K, T_hi_K, walker_lo, walker_hi`` (before the swap), ``probability, accepted`` (0/1);
* ``walkers.csv`` (parallel tempering): one row per report -- ``step`` and, per rung, the walker that was at
  that rung during the segment ending at this step (so rung ``k``'s frame of that step is that walker's);
* ``checkpoint.chk``: the run's checkpoint -- the step, the exchange state (who is where, the counters, the
  generator), the bytes of the three files above that belong to it and the walkers dropped; the blocks' own
  checkpoints of that step are ``blocks/block_BBB.sSTEP.chk``.

The CSV files are appended, flushed per row and fsynced before a checkpoint that records their sizes; a resumed
(or rolled-back) run cuts them back to those sizes.
"""
from __future__ import annotations

import csv
import json
import os
import struct
from typing import Dict, List, Optional, Sequence

from ...atomic import AppendedFile, atomic_write
from ...errors import output_error
from ..reporters.checkpoint import CHECKPOINT_MAGIC, read_checkpoint

LOG_COLUMNS = ["step", "time_ps", "replica", "potential_energy_kJ_mol", "temperature_K", "ns_per_day", "thermostat_K"]
EXCHANGE_COLUMNS = ["step", "pair", "T_lo_K", "T_hi_K", "walker_lo", "walker_hi", "probability", "accepted"]


class AppendCSV:
    """A CSV file the run appends rows to (header written when new; :meth:`cut` back to a byte size). A write
    that fails raises one :class:`~flashschnet.errors.OutputError` naming the file (a resume cuts it back to its
    checkpoint's size); :meth:`close` does not report it again."""

    def __init__(self, path: str, columns: Sequence[str], size: Optional[int] = None):
        self.path = path
        if size is not None:
            self.cut(path, size)
        self._out = AppendedFile(path, "w" if size is None else "a", newline="")
        self._file = self._out.file
        self._writer = csv.writer(self._file)
        if size is None:
            try:
                self._out.io(lambda: (self._writer.writerow(columns), self._file.flush()))
            except OSError:
                self.close()              # (quietly: the failure is being reported)
                raise

    @staticmethod
    def cut(path: str, size: int) -> None:
        try:
            with open(path, "r+b") as f:
                if os.fstat(f.fileno()).st_size < size:
                    from ...errors import InputError

                    raise InputError(f"{path}: shorter than the checkpoint records ({size} bytes); the file lost "
                                     "data the checkpoint relies on; start a new run")
                f.truncate(size)
        except OSError as exc:
            raise output_error(exc, "cutting back (to the checkpoint)", path) from None

    def rows(self, rows: List[list]) -> None:
        self._out.io(lambda: (self._writer.writerows(rows), self._file.flush()))

    def size(self) -> int:
        self._out.io(self._file.flush)
        return self._file.tell()

    def sync(self) -> int:
        """fsync; return the size."""
        self._out.sync()
        return self._file.tell()

    def close(self) -> None:
        self._out.close()


def write_run_checkpoint(path: str, meta: Dict[str, object]) -> None:
    """The run's checkpoint: CHECKPOINT_MAGIC, the header length, the JSON header, no OpenMM state (that is in
    the blocks' files); atomic (temporary file, fsync, rename, directory fsync)."""
    header = json.dumps(meta).encode()
    with atomic_write(path, "wb", what="writing the checkpoint") as f:
        f.write(CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header)


def read_run_checkpoint(path: str) -> Dict[str, object]:
    meta, _ = read_checkpoint(path)
    if "ensemble" not in meta:
        from ...errors import InputError

        raise InputError(f"{path}: not the checkpoint of an ensemble run (a run without --temperatures/--workers); "
                         "resume it with the settings it was started with")
    return meta
