"""Dask for the runs that use it: connecting to a scheduler with one-line errors, and plain tasks.

:func:`connect_scheduler` is how ``flashschnet-simulate --scheduler`` (the ensemble's blocks as actors,
:mod:`flashschnet.openmm.ensemble.cluster`) and ``flashschnet-backmap --scheduler`` (frames as plain tasks,
:func:`results_as_completed`) reach a cluster. This module and the ensemble's ``cluster`` are the only ones that
import ``distributed``, and only when a run asks for Dask.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..errors import InputError


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``exc`` as one line of at most ``limit`` characters: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def connect_scheduler(scheduler: str, timeout_s: float = 10.0, worker_timeout_s: float = 60.0,
                      echo: Callable[[str], None] = print):
    """A ``distributed.Client`` of the Dask scheduler at ``scheduler`` with at least one worker (waiting up to
    ``worker_timeout_s`` for the first to join). InputError, one line, where it cannot be reached or no worker
    joins, or where Dask's ``distributed`` is not installed. (Also what ``flashschnet-backmap --scheduler``
    connects with.)"""
    try:
        import distributed
    except ImportError:
        raise InputError(f"--scheduler {scheduler}: needs Dask's distributed package, which is not installed: "
                         "pip install 'flashschnet[cluster]'") from None

    try:
        client = distributed.Client(scheduler, timeout=timeout_s)
    except Exception as exc:     # OSError (timed out), ValueError (bad address), garbage from a non-scheduler
        raise InputError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({one_line(exc)}); "
                         "start one (dask scheduler, dask-jobqueue's SLURMCluster, dask-cuda's "
                         "LocalCUDACluster) or check the address") from None
    if not client.scheduler_info().get("workers"):
        echo(f"waiting up to {worker_timeout_s:g} s for a Dask worker to join {scheduler}")
        try:
            client.wait_for_workers(1, timeout=worker_timeout_s)
        except Exception:
            client.close()
            raise InputError(f"--scheduler {scheduler}: no Dask worker joined within {worker_timeout_s:g} s; "
                             f"start workers (dask worker {scheduler}, or your cluster's jobs)") from None
    return client


def results_as_completed(client, fn: Callable, calls: Sequence[tuple], shared: Sequence = ()):
    """Run ``fn(*call, *shared)`` for every call on ``client``'s workers (``shared`` sent to each worker once;
    a task whose worker dies is run once more elsewhere) and yield the results as they complete; the tasks left are
    cancelled when the caller stops early or a task raises (its exception propagates)."""
    import distributed

    held = client.scatter(list(shared), broadcast=True) if shared else []
    futures = [client.submit(fn, *call, *held, pure=False, retries=1) for call in calls]
    try:
        for fut in distributed.as_completed(futures):
            yield fut.result()
    finally:
        client.cancel([f for f in futures if not f.done()])
