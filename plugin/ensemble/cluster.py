"""The blocks of an ensemble run as Dask actors: ``--workers N`` (a local cluster) or ``--scheduler ADDRESS``.

Each block (:class:`~.block.WalkerBlock`, one packed Context) lives as a stateful Dask actor on one worker;
the driving process (:func:`~.driver.drive`) calls the same methods on every block at once and collects the
plain results (energies, temperatures, file sizes) -- positions and velocities stay on the workers, which
write the trajectories and checkpoints into the (shared) run directory themselves.

Which walkers share a Context is fixed by the run (``--blocks``); workers only host blocks, round-robin
(one worker may host several; a worker hosts them one call at a time). So the trajectories do not depend on
how many workers there are or which one runs a block.

A worker that dies (its process killed, its node lost, the scheduler gave up on it) loses the blocks it
hosted: :meth:`DaskBlocks.call` rebuilds them on live workers (constructed, not started) and raises
:class:`~.driver.BlocksLost`; the driver then restores every block from the run's last checkpoint and runs
the steps since then again. A block's own exceptions (:class:`~flashschnet.errors.SimulationInstabilityError`,
:class:`~flashschnet.errors.InputError`, anything raised while its worker lives) propagate unchanged.

What a lost worker looks like (distributed 2026.8; found by SIGKILLing a worker process): the pending or next
method call of an actor on it fails with ``OSError("Unable to contact Actor's worker")`` (within milliseconds
when the process is gone: the connection is closed or refused); once the scheduler has removed the worker,
the actor's task is *erred* (its future's ``status`` is ``"error"``) and even looking a method up on the
actor raises ``RuntimeError("Worker holding Actor was lost.  Status: error")``. The nanny of a local cluster
starts a new worker process, at a new address. A call that hangs on a worker that vanished without closing its
connections is given up when the scheduler removes that worker (the actor's future turns ``"error"``).

It and :mod:`flashschnet.openmm.dask_client` (connecting to a scheduler, plain tasks: also what
``flashschnet-backmap --scheduler`` uses) are the only modules that import ``distributed``, for
``--workers``/``--scheduler`` only.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Callable, Dict, List, Optional, Sequence

from ...errors import ClusterError, InputError
from ..dask_client import connect_scheduler, one_line
from .block import BlockSpec, WalkerBlock
from .driver import BlocksLost

_UNREACHABLE = "Unable to contact Actor's worker"        # distributed.actor's OSError for a worker it cannot reach
_GONE_PREFIX = "Worker holding Actor was lost"            # distributed.actor's RuntimeError once the task erred
_LOST = object()                                          # a call's outcome: the block's worker is gone
_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENMM_CPU_THREADS")
_SAME_CALL_LOSSES = 3        # a call that loses its worker this often (rollbacks in between) is not a bad worker


def _malloc_trim_threshold():
    """This process's MALLOC_TRIM_THRESHOLD_ (run on the workers), or None when unset or not a number."""
    try:
        return int(os.environ["MALLOC_TRIM_THRESHOLD_"])
    except (KeyError, ValueError):
        return None


class WorkersLost(ClusterError):
    """The blocks cannot be hosted any more: no live Dask worker to rebuild lost blocks on, or a block that
    kills its worker every time. The run's last checkpoint is intact: resume from it."""


class DaskBlocks:
    """The blocks as Dask actors; the interface of :class:`~.driver.LocalBlocks` (:meth:`call`, :meth:`close`).

    Parameters
    ----------
    builder : callable(int) -> BlockSystem
        Picklable; the workers must be able to import its module.
    specs : sequence of BlockSpec
        The blocks (:func:`~.driver.block_specs`); block ``b`` is ``specs[b]``.
    workers : int, optional
        Start a local cluster of this many worker processes (one Dask thread each), closed by :meth:`close`.
    scheduler : str, optional
        The address of an existing Dask scheduler (``tcp://host:8786``); exactly one of ``workers`` and
        ``scheduler``.
    threads_per_worker : int
        CPU threads of each local worker's numerical libraries (OpenMP, MKL, OpenBLAS, OpenMM's CPU platform,
        set in the workers' environment; a block's ``threads`` sets PyTorch's and OpenMM's itself).
    connect_timeout_s : float
        How long to try to reach ``scheduler``.
    echo : callable(str)
        Notes for the user (idle workers).
    worker_timeout_s : float
        How long to wait for a live worker: for the first one to join ``scheduler``, and for one to rebuild
        lost blocks on.

    Raises
    ------
    InputError
        ``workers`` out of range (at least 1, at most the number of walkers), ``scheduler`` unreachable or
        without workers; one line each, before any block is built.
    """

    def __init__(self, builder: Callable, specs: Sequence[BlockSpec], workers: Optional[int] = None,
                 scheduler: Optional[str] = None, threads_per_worker: int = 1, connect_timeout_s: float = 10,
                 echo: Callable[[str], None] = print, worker_timeout_s: float = 60.0):
        if (workers is None) == (not scheduler):
            raise InputError("give one of --workers N (a local Dask cluster) and --scheduler ADDRESS (an existing "
                             "one)" + (", not both" if workers is not None else ""))
        self.builder, self.specs, self.echo = builder, list(specs), echo
        self.scheduler, self.worker_timeout_s = scheduler, float(worker_timeout_s)
        self.cluster = self.client = None
        self.futures: List[object] = []       # the actors' Dask futures (holding them keeps the actors alive)
        self.actors: List[object] = []
        self.hosts: List[str] = []            # the address of the worker hosting each block
        self._same_call_losses: Dict[tuple, int] = {}
        walkers = sum(len(s.walkers) for s in self.specs)
        if workers is not None:
            workers = int(workers)
            if not 1 <= workers <= walkers:
                raise InputError(f"--workers {workers}: must be between 1 and the number of walkers ({walkers}; "
                                 "a worker hosts one block of walkers or more)")
        import dask
        import distributed

        self._distributed = distributed
        spawn_env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
        self._env_before = {k: os.environ.get(k) for k in list(spawn_env) + ["PYTHONHASHSEED"]}
        # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536 (glibc then returns freed memory to the
        # system at almost every free): a network step, which allocates and frees its activations each time, runs
        # at half speed under it (measured: 42 vs 21 ms per step, trp-cage, 2 walkers, 1 thread; in a plain
        # process too). Our local workers start without it, for as long as this object lives (a nanny that
        # restarts a killed worker reads the setting then).
        self._spawn_env_config = dask.config.config.get("distributed", {}).get("nanny", {}).get("pre-spawn-environ")
        if workers is not None:
            dask.config.set({"distributed.nanny.pre-spawn-environ":
                             {k: v for k, v in spawn_env.items() if k != "MALLOC_TRIM_THRESHOLD_"}})
        try:
            if workers is not None:
                self._start_local(workers, threads_per_worker)
            else:
                self._connect(scheduler, connect_timeout_s)
            self._place()
        except BaseException:
            self.close()
            raise

    # -- the cluster -----------------------------------------------------------------------------------------
    def _start_local(self, workers: int, threads_per_worker: int) -> None:
        distributed = self._distributed
        threads = str(max(int(threads_per_worker), 1))
        self.cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=logging.WARNING, memory_limit=0,     # a simulation's memory does not grow: no restarts
            env={k: threads for k in _THREAD_ENV},
            # no dashboard; the scheduler's HTTP endpoints (health, metrics) on a free local port, not 8787
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
        self._restore_env()       # the nannies set their workers' environment in this process too
        self.client = distributed.Client(self.cluster)

    def _connect(self, scheduler: str, timeout_s: float) -> None:
        self.client = connect_scheduler(scheduler, timeout_s, self.worker_timeout_s, self.echo)

    def _workers(self) -> List[str]:
        """The addresses of the workers the scheduler knows now (sorted)."""
        where = f" at {self.scheduler}" if self.scheduler else ""
        try:
            if self.client.status in ("running", "connecting", "newly-created"):
                return sorted(self.client.scheduler_info()["workers"])
            problem = f"the client is {self.client.status}"
        except Exception as exc:
            problem = one_line(exc)
        raise WorkersLost(f"lost the Dask scheduler{where} ({problem}); the run's last checkpoint is intact: "
                          "resume from it")

    def _submit(self, b: int, host: str):
        return self.client.submit(WalkerBlock, self.builder, self.specs[b], actor=True, workers=[host],
                                  allow_other_workers=True,
                                  key=f"flashschnet-block-{b:03d}-{uuid.uuid4().hex[:12]}")

    def _place(self) -> None:
        hosts = self._workers()
        n = len(self.specs)
        if len(hosts) > n:
            self.echo(f"note: {len(hosts)} Dask workers for {n} block(s): {len(hosts) - n} idle "
                      f"(--blocks {len(hosts)} would use them all)")
        if self.cluster is None:
            trims = self.client.run(_malloc_trim_threshold)
            small = sorted(h for h, v in trims.items() if v is not None and v < 2**20)
            if small:
                self.echo(f"note: {len(small)} of the cluster's workers run with MALLOC_TRIM_THRESHOLD_ below 1 MiB "
                          "(Dask's default for its nannies), which halves the network's speed; start the workers "
                          "with DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_TRIM_THRESHOLD_=2147483647 "
                          "(docs/ensembles.md)")
        self.futures = [self._submit(b, hosts[b % len(hosts)]) for b in range(n)]
        self.actors = [f.result() for f in self.futures]         # built in parallel, one worker each
        self.hosts = [self._address(b) for b in range(n)]

    def _address(self, b: int) -> str:
        return getattr(self.actors[b], "_address", None) or self.hosts[b]

    def _gone(self, b: int) -> bool:
        """The scheduler has given block ``b``'s actor up (its worker was removed)."""
        f = self.futures[b]
        return f is None or f.status in ("error", "lost", "cancelled")

    def _is_lost(self, b: int, exc: BaseException) -> bool:
        """Whether ``exc``, from a call on block ``b``, means its worker is gone (not the block's own error)."""
        if isinstance(exc, OSError) and str(exc) == _UNREACHABLE:
            return True
        if isinstance(exc, RuntimeError) and str(exc).startswith(_GONE_PREFIX):
            return True
        return isinstance(exc, (OSError, self._distributed.comm.CommClosedError)) and self._gone(b)

    # -- calls -----------------------------------------------------------------------------------------------
    def _start_calls(self, method: str, args: Sequence[tuple]) -> Dict[int, object]:
        calls = {}
        for b, a in enumerate(args):
            if self._gone(b):
                calls[b] = _LOST
                continue
            try:
                calls[b] = getattr(self.actors[b], method)(*a)
            except RuntimeError as exc:
                if not self._is_lost(b, exc):
                    raise
                calls[b] = _LOST
        return calls

    def _outcomes(self, calls: Dict[int, object]) -> Dict[int, tuple]:
        """Wait for every call: ``{b: ("ok", result) | ("error", exc) | ("lost", None)}``."""
        out: Dict[int, tuple] = {b: ("lost", None) for b, f in calls.items() if f is _LOST}
        pending = {b: f for b, f in calls.items() if f is not _LOST}
        while pending:
            for b, f in list(pending.items()):
                if f.done():
                    del pending[b]
                    try:
                        out[b] = ("ok", f.result())
                    except Exception as exc:
                        out[b] = ("lost", None) if self._is_lost(b, exc) else ("error", exc)
                elif self._gone(b):                  # a call to a worker that vanished without closing its sockets
                    del pending[b]
                    out[b] = ("lost", None)
            if pending:
                try:
                    next(iter(pending.values())).result(timeout=0.5)   # wake when it is done (or look again)
                except Exception:
                    pass
        return out

    def call(self, method: str, args: Optional[Sequence[tuple]] = None) -> list:
        """``method(*args[b])`` on every block ``b`` at once; the results in block order.

        Raises :class:`~.driver.BlocksLost` (after rebuilding them) when blocks' workers died; else the first
        exception a block raised, unchanged (after every call has returned).
        """
        n = len(self.specs)
        args = list(args) if args is not None else [()] * n
        out = self._outcomes(self._start_calls(method, args))
        lost = sorted(b for b, (kind, _) in out.items() if kind == "lost")
        if lost:
            key = (method, repr(args))
            self._same_call_losses[key] = self._same_call_losses.get(key, 0) + 1
            if self._same_call_losses[key] >= _SAME_CALL_LOSSES:
                raise WorkersLost(f"blocks {lost}: their worker died {self._same_call_losses[key]} times in the same "
                                  f"call ({method}{tuple(args[lost[0]])}): the block itself kills its process (out of "
                                  "memory? a crash in OpenMM or PyTorch?); see the workers' logs; the run's last "
                                  "checkpoint is intact")
            hosts = sorted({self.hosts[b] for b in lost})
            self._rebuild(lost)
            raise BlocksLost(lost, f"Dask worker(s) {', '.join(hosts)} died during {method}; rebuilt on "
                                   f"{', '.join(sorted({self.hosts[b] for b in lost}))}")
        for b in range(n):
            kind, value = out[b]
            if kind == "error":
                raise value
        return [out[b][1] for b in range(n)]

    # -- lost blocks -----------------------------------------------------------------------------------------
    def _rebuild(self, lost: List[int]) -> None:
        """New actors for blocks ``lost`` (constructed, not started) on live workers, the least loaded first.

        Waits up to ``worker_timeout_s`` for a live worker (a local cluster's nanny restarts a killed one); a
        worker that dies while building one is tried again (the scheduler moves the task or gives up on it,
        KilledWorker); the builder's own errors propagate."""
        dead = {self.hosts[b] for b in lost}
        for b in lost:
            self.actors[b] = self.futures[b] = None       # the client releases the erred tasks
        deadline = time.monotonic() + self.worker_timeout_s
        while True:
            live = [w for w in self._workers() if w not in dead]
            if live:
                load = {w: sum(1 for b, h in enumerate(self.hosts) if h == w and self.futures[b] is not None)
                        for w in live}
                for b in lost:
                    host = min(live, key=lambda w: (load[w], w))
                    load[host] += 1
                    self.futures[b] = self._submit(b, host)
                try:
                    for b in lost:
                        self.actors[b] = self.futures[b].result()
                        self.hosts[b] = self._address(b)
                    return
                except self._distributed.KilledWorker:
                    for b in lost:
                        self.actors[b] = self.futures[b] = None
                    dead |= set(live) - set(self._workers())
            if time.monotonic() > deadline:
                raise WorkersLost(f"blocks {lost} lost with their Dask worker and no live worker to rebuild them on "
                                  f"within {self.worker_timeout_s:g} s; the run's last checkpoint is intact")
            time.sleep(0.5)

    # -- shutdown ------------------------------------------------------------------------------------------
    def _restore_env(self) -> None:
        for k, v in getattr(self, "_env_before", {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def close(self) -> None:
        """Close the blocks (their trajectories), then the client and a local cluster. A block's own error in
        closing is raised after the cluster is closed; lost workers are ignored."""
        error = None
        try:
            live = {b: a for b, a in enumerate(self.actors) if a is not None and not self._gone(b)}
            if live and self.client is not None:
                calls = {}
                for b, a in live.items():
                    try:
                        calls[b] = a.close()
                    except RuntimeError:
                        pass
                for b, (kind, value) in self._outcomes(calls).items():
                    if kind == "error" and error is None:
                        error = value
        finally:
            self.actors, self.futures = [], []
            if self.client is not None:
                try:
                    self.client.close()
                except Exception:
                    pass
            if self.cluster is not None:
                try:
                    self.cluster.close()
                except Exception:
                    pass
            self.client = self.cluster = None
            self._restore_env()
            if self._spawn_env_config is not None:
                import dask

                dask.config.set({"distributed.nanny.pre-spawn-environ": self._spawn_env_config})
        if error is not None:
            raise error
