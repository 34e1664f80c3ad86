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

The CSV files are the plain run's writers (:mod:`flashschnet.openmm.reporters`): ``log.csv`` is a
:class:`~flashschnet.openmm.reporters.ReplicaLog` with the ``thermostat_K`` column, the others are
:class:`~flashschnet.openmm.reporters.CSVFile` s; they are appended, flushed per row and fsynced before a checkpoint
that records their sizes; a resumed (or rolled-back) run cuts them back to those sizes. The checkpoint is the
plain run's file format (:func:`~flashschnet.openmm.reporters.write_checkpoint`) without an OpenMM state.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence, Union

from ...errors import InputError
from ..reporters import CSVFile, ReplicaLog, cut_csv_to_size, read_checkpoint, write_checkpoint
from ..ladder import EXCHANGE_COLUMNS, rung_name


def open_records(out: str, dt_ps: float, ladder: Optional[Sequence[float]] = None,
                 sizes: Optional[Dict[str, int]] = None) -> Dict[str, Union[ReplicaLog, CSVFile]]:
    """The driving process's files in ``out``, by name: ``log.csv`` and, with a ``ladder`` (parallel tempering,
    K), ``exchanges.csv`` and ``walkers.csv``. New files (header written), or, with ``sizes`` (the run checkpoint's
    ``files``), the files cut back to those sizes and appended to."""
    columns = {"log.csv": None}
    if ladder is not None:
        columns["exchanges.csv"] = EXCHANGE_COLUMNS
        columns["walkers.csv"] = ["step"] + [rung_name(t) for t in ladder]
    files: Dict[str, Union[ReplicaLog, CSVFile]] = {}
    try:
        for name, cols in columns.items():
            path = os.path.join(out, name)
            if sizes is not None:
                cut_csv_to_size(path, sizes[name])
            files[name] = (ReplicaLog(path, dt_ps, append=sizes is not None, thermostat=True) if cols is None
                           else CSVFile(path, cols, append=sizes is not None))
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return files


def write_run_checkpoint(path: str, meta: Dict[str, object]) -> None:
    """The run's checkpoint: the header ``meta``, no OpenMM state (that is in the blocks' files); atomic."""
    write_checkpoint(path, meta)


def read_run_checkpoint(path: str) -> Dict[str, object]:
    meta, _ = read_checkpoint(path)
    if "ensemble" not in meta:
        raise InputError(f"{path}: not the checkpoint of an ensemble run (a run without --temperatures/--workers); "
                         "resume it with the settings it was started with")
    return meta
