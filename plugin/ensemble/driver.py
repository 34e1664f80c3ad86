"""The driving loop of a parallel-tempering or ensemble run, whatever runs its blocks.

The walkers are split into blocks (:class:`~.block.WalkerBlock`, one packed Context each). This loop advances
every block to the next exchange (or report) step, writes the log from the energies they return, decides the
swaps (:class:`~.exchange.Exchanger`), hands each block its walkers' new temperatures, and every checkpoint
interval has each block save its state and then commits the run's checkpoint (:mod:`.records`). The blocks
live in this process (:class:`LocalBlocks`, the single-process path; no Dask) or as Dask actors
(:class:`flashschnet.openmm.ensemble.cluster.DaskBlocks`); both answer :meth:`call`.

Rules:

* the blocks meet at every report step (frames, log rows; checkpoints are at report steps too) and every
  exchange step, whatever the two intervals are; nothing is exchanged, written or checked in between;
* a new run records step 0 (the starting state, once checked): every walker's first frame, the log's and
  ``walkers.csv``'s first rows; no exchange happens at step 0;
* exchange ``n`` happens at step ``n * interval`` after that step's frames and log rows (which therefore show
  the walkers' temperatures of the steps before), before its checkpoint; a run that ends between exchanges
  checkpoints there and a resumed one goes on to the next;
* a block that is lost (its Dask worker died, :class:`BlocksLost`) is rebuilt elsewhere and *every* block goes
  back to the run's last checkpoint (the walkers are coupled by the exchanges, so they must all be at one
  step); the steps since then are run again -- on the CPU platform bitwise as the first time -- and the
  files cut back, so each frame is in the trajectories once;
* trajectories depend on the seed and the blocks (``blocks``: which walkers share a Context, an integrator
  and its random numbers), not on which worker runs a block or how many workers there are.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ...errors import InputError, SimulationInstabilityError
from ..runner.directory import few_frames_warning, write_dropped
from ..reporters import ns_per_day
from ..runner.settings import DynamicsSettings, flag
from .block import BlockSpec, WalkerBlock, block_checkpoint_path
from .demux import demultiplex
from .exchange import Exchanger
from .records import open_records, read_run_checkpoint, write_run_checkpoint


class BlocksLost(Exception):
    """Blocks whose process died; the blocks object has rebuilt them (not started: :meth:`restore` them)."""

    def __init__(self, blocks: Sequence[int], reason: str = ""):
        super().__init__(f"blocks {list(blocks)} lost{': ' + reason if reason else ''}")
        self.blocks = list(blocks)


class LocalBlocks:
    """The blocks as :class:`~.block.WalkerBlock` objects in this process (run one after another)."""

    def __init__(self, builder, specs: Sequence[BlockSpec]):
        self.blocks = [WalkerBlock(builder, s) for s in specs]

    def call(self, method: str, args: Optional[Sequence[tuple]] = None) -> list:
        """``method(*args[b])`` on every block ``b``; the results in block order."""
        args = args if args is not None else [()] * len(self.blocks)
        return [getattr(b, method)(*a) for b, a in zip(self.blocks, args)]

    def close(self) -> None:
        for b in self.blocks:
            b.close()


@dataclass(kw_only=True)
class EnsemblePlan(DynamicsSettings):
    """An ensemble run, as the driver sees it: the dynamics (:class:`~flashschnet.openmm.runner.DynamicsSettings`,
    intervals and seed resolved) and the fields below (units in the names); keyword arguments only.

    ``temperatures_K`` holds one temperature per walker: the ladder for parallel tempering
    (``exchange_interval`` set), else the one temperature repeated (a pure ensemble).
    """

    temperatures_K: List[float]
    temperature_K: Optional[float] = None          # unused: the walkers' temperatures are temperatures_K
    exchange_interval: Optional[int]
    blocks: int
    on_blowup: str = "stop"

    @property
    def walkers(self) -> int:
        return len(self.temperatures_K)

    @property
    def tempering(self) -> bool:
        return self.exchange_interval is not None

    def next_stop(self, step: int) -> int:
        """The first step after ``step`` where the blocks must meet: the next report (frames, log rows; also every
        checkpoint) or exchange, or the end."""
        stops = [step + self.report_interval - step % self.report_interval, self.steps]
        if self.tempering:
            stops.append(step + self.exchange_interval - step % self.exchange_interval)
        return min(stops)


def check_plan(p: EnsemblePlan) -> None:
    """The ensemble rules (module docstring); one-line :class:`InputError`s naming the options."""
    if p.tempering and p.exchange_interval < 1:
        raise InputError(f"{flag('exchange_interval')} must be >= 1, got {p.exchange_interval}")
    if not 1 <= p.blocks <= p.walkers:
        raise InputError(f"{flag('blocks')} {p.blocks}: must be between 1 and the number of walkers ({p.walkers})")


def block_seed(seed: int, block: int) -> int:
    """Block ``block``'s integrator seed, 1 .. 2**31 - 1, from the run's seed."""
    return int(np.random.SeedSequence([int(seed), int(block)]).generate_state(1)[0] % (2**31 - 2)) + 1


def block_specs(p: EnsemblePlan) -> List[BlockSpec]:
    """Contiguous walker ranges, sizes differing by at most one (the first blocks get the extra walker)."""
    bounds = np.linspace(0, p.walkers, p.blocks + 1).round().astype(int)
    return [BlockSpec(index=b, walkers=list(range(bounds[b], bounds[b + 1])),
                      temperatures_K=[p.temperatures_K[w] for w in range(bounds[b], bounds[b + 1])],
                      seed=block_seed(p.seed, b), plan=p)
            for b in range(p.blocks)]


@dataclass
class EnsembleResult:
    """What an ensemble run reports (speed: the step loop, rollbacks included)."""

    out: str
    steps_done: int
    walkers: int
    ns_per_day_aggregate: float
    temperatures_K: List[float]
    acceptance: List[float] = field(default_factory=list)     # per neighbour pair (parallel tempering)
    dropped: List[int] = field(default_factory=list)
    rollbacks: int = 0                                        # blocks lost and the run gone back to a checkpoint
    rung_frames: List[int] = field(default_factory=list)
    #: where the wall time went (s): ``loop`` (all), ``advance`` (the blocks' segments, as this process waited for
    #: them), ``block_steps`` / ``block_energies`` (per segment the slowest block's stepping / energy evaluation,
    #: summed), ``exchange`` (swaps decided, files, new temperatures handed out), ``checkpoint``; counts
    #: ``segments``, ``exchanges``
    timings: Dict[str, float] = field(default_factory=dict)


class _Run:
    """The state of the driving process; see :func:`drive`."""

    def __init__(self, p: EnsemblePlan, blocks, specs: List[BlockSpec], echo: Callable[[str], None]):
        self.p, self.blocks, self.specs, self.echo = p, blocks, specs, echo
        self.exchanger = Exchanger(p.temperatures_K, p.seed) if p.tempering else None
        self.walker_temps = np.asarray(p.temperatures_K, dtype=float)
        self.active = np.ones(p.walkers, dtype=bool)
        self.dropped: List[dict] = []
        self.step = 0
        self.checkpoint_step: Optional[int] = None
        self.ckpt_path = os.path.join(p.out, "checkpoint.chk")
        self.files: Dict[str, object] = {}     # records.open_records: log.csv (a ReplicaLog), exchanges, walkers

    # -- files -----------------------------------------------------------------------------------------------
    def open_files(self, sizes: Optional[Dict[str, int]] = None) -> None:
        self.close()
        self.files = open_records(self.p.out, self.p.dt_fs * 1e-3, self.p.temperatures_K if self.p.tempering else None,
                                  sizes)

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    # -- what the blocks return --------------------------------------------------------------------------------
    def gather(self, results: List[dict]) -> dict:
        energies = np.full(self.p.walkers, np.nan)
        kinetic = np.full(self.p.walkers, np.nan)
        time_ps = results[0]["time_ps"]
        for r in results:
            for w, e, k, a in zip(r["walkers"], r["energies"], r["kinetic_K"], r["active"]):
                energies[w], kinetic[w] = e, k
                self.active[w] = a
            for d in r["dropped"]:
                self.dropped.append(d)
                self.echo(f"replica {d['walker']} dropped at step {d['step']}: {d['reason']}")
                self.write_dropped()
        if not self.active.any():
            raise SimulationInstabilityError(f"step {self.step}: all {self.p.walkers} replicas dropped; stopping "
                                             f"({self.hint()})")
        return {"energies": energies, "kinetic": kinetic, "time_ps": time_ps}

    def write_dropped(self) -> None:
        """``dropped.json`` as flashschnet-simulate writes it: [{replica, step, reason}] (walker ids)."""
        write_dropped(os.path.join(self.p.out, "dropped.json"),
                      [{"replica": int(d["walker"]), "step": int(d["step"]), "reason": d["reason"]} for d in self.dropped])

    def hint(self) -> str:
        return (f"last good checkpoint: step {self.checkpoint_step} in {self.ckpt_path}"
                if self.checkpoint_step is not None else "no checkpoint yet")

    def report(self, now: dict) -> None:
        log = self.files["log.csv"]
        speed = log.speed(self.step)
        log.write(self.step, now["time_ps"], speed, now["energies"], now["kinetic"],
                  [w for w in range(self.p.walkers) if self.active[w]], thermostat=self.walker_temps)
        if self.p.tempering:
            self.files["walkers.csv"].rows([[self.step] + self.exchanger.walker_at.tolist()])

    def exchange(self, now: dict) -> None:
        ex = self.exchanger
        attempts = ex.exchange(self.step, self.step // self.p.exchange_interval, now["energies"], self.active)
        t = ex.temperatures
        self.files["exchanges.csv"].rows([[a.step, a.pair, f"{t[a.pair]:.10g}", f"{t[a.pair + 1]:.10g}", a.walker_lo,
                                           a.walker_hi, f"{a.probability:.6g}", int(a.accepted)] for a in attempts])
        if any(a.accepted for a in attempts):
            self.walker_temps = ex.walker_temperatures()
            self.blocks.call("set_temperatures", [(self.walker_temps[s.walkers].tolist(),) for s in self.specs])

    # -- checkpoints -----------------------------------------------------------------------------------------
    def checkpoint(self) -> None:
        self.blocks.call("save", [(self.step,)] * len(self.specs))
        meta = {"step": self.step, "ensemble": {
            "walkers": self.p.walkers, "blocks": self.p.blocks, "walker_temperatures_K": self.walker_temps.tolist(),
            "exchange": None if self.exchanger is None else self.exchanger.state(),
            "files": {n: f.sync() for n, f in self.files.items()}, "dropped": self.dropped}}
        write_run_checkpoint(self.ckpt_path, meta)
        self.checkpoint_step = self.step
        self.blocks.call("forget", [(self.step,)] * len(self.specs))

    def load_checkpoint(self) -> None:
        """Everything back to the run's checkpoint: this process's state and files, and every block."""
        meta = read_run_checkpoint(self.ckpt_path)
        e = meta["ensemble"]
        if e["walkers"] != self.p.walkers or e["blocks"] != self.p.blocks:
            raise InputError(f"{self.ckpt_path}: holds {e['walkers']} walkers in {e['blocks']} blocks, this run "
                             f"{self.p.walkers} in {self.p.blocks}; resume with the settings the run was started with")
        self.step = self.checkpoint_step = int(meta["step"])
        self.walker_temps = np.asarray(e["walker_temperatures_K"], dtype=float)
        if self.exchanger is not None:
            self.exchanger.load(e["exchange"])
        self.dropped = [dict(d) for d in e["dropped"]]
        self.active[:] = True
        for d in self.dropped:
            self.active[int(d["walker"])] = False
        self.write_dropped()
        self.open_files(e["files"])
        for b in range(self.p.blocks):
            if not os.path.exists(block_checkpoint_path(self.p.out, b, self.step)):
                raise InputError(f"{block_checkpoint_path(self.p.out, b, self.step)}: missing, but the run's checkpoint "
                                 f"(step {self.step}) needs it; start a new run")
        self.blocks.call("restore", [(self.step,)] * len(self.specs))      # (the log reopened: its speed clock unset)


def drive(p: EnsemblePlan, blocks, specs: List[BlockSpec], resume: bool, progress: bool = True,
          echo: Callable[[str], None] = print, trajectory_topology=None) -> EnsembleResult:
    """Run (or resume) plan ``p`` on ``blocks`` (:class:`LocalBlocks` or Dask's) to step ``p.steps``.

    ``trajectory_topology``: one walker's topology, for the per-temperature files (parallel tempering).
    Raises :class:`SimulationInstabilityError` when a walker blows up (policy ``"stop"``) or every walker is
    dropped; the run's last checkpoint is kept.
    """
    bar = None

    def say(line: str) -> None:
        """``echo(line)`` on a line of its own: with the progress bar on screen, tqdm clears it first and redraws
        it below (otherwise the line would be glued to the bar)."""
        if bar is None:
            echo(line)
            return
        with bar.external_write_mode(file=sys.stderr):
            echo(line)

    run = _Run(p, blocks, specs, say)
    rollbacks = 0
    warning = few_frames_warning(p.steps, p.report_interval)
    if warning:
        say(f"warning: {warning}")

    def go_back(lost: BlocksLost) -> None:
        """Every block (and this process) back to the run's last checkpoint; restoring may lose a worker too."""
        while True:
            say(f"{lost}; every block goes back to step {run.checkpoint_step} (the run's last checkpoint)")
            try:
                run.load_checkpoint()
                return
            except BlocksLost as again:
                lost = again

    if resume:
        try:
            run.load_checkpoint()
        except BlocksLost as lost:
            rollbacks += 1
            run.checkpoint_step = read_run_checkpoint(run.ckpt_path)["step"]
            go_back(lost)
        say(f"resuming {p.out} at step {run.step}"
             + (f" ({len(run.dropped)} of {p.walkers} replicas dropped)" if run.dropped else ""))
    else:
        while True:
            run.open_files()
            try:
                run.report(run.gather(blocks.call("start")))     # step 0: the log's and walkers.csv's first rows
                run.checkpoint()
                break
            except BlocksLost as lost:             # before the first checkpoint: start every block again
                rollbacks += 1
                say(f"{lost}; starting every block again")
    start_step = run.step
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max(p.steps - run.step, 0), unit="step", desc=f"{p.walkers} walkers", dynamic_ncols=True)
    t0 = time.perf_counter()
    run.files["log.csv"].start_clock(run.step)
    timing = dict(advance=0.0, block_steps=0.0, block_energies=0.0, exchange=0.0, checkpoint=0.0, segments=0,
                  exchanges=0)
    try:
        while run.step < p.steps:
            before = run.step
            target = p.next_stop(before)
            try:
                ta = time.perf_counter()
                try:
                    results = blocks.call("advance", [(target,)] * len(specs))
                except SimulationInstabilityError as exc:
                    raise SimulationInstabilityError(f"{exc} ({run.hint()})") from None
                timing["advance"] += time.perf_counter() - ta
                run.step = target
                timing["segments"] += 1
                timing["block_steps"] += max(r["step_s"] for r in results)
                timing["block_energies"] += max(r["energy_s"] for r in results)
                now = run.gather(results)
                if target % p.report_interval == 0:
                    run.report(now)
                if p.tempering and target % p.exchange_interval == 0:
                    tx = time.perf_counter()
                    run.exchange(now)
                    timing["exchange"] += time.perf_counter() - tx
                    timing["exchanges"] += 1
                if target % p.checkpoint_interval == 0 or target == p.steps:
                    tc = time.perf_counter()
                    run.checkpoint()
                    timing["checkpoint"] += time.perf_counter() - tc
                    if p.tempering and target != p.steps:
                        say(f"step {target}: {run.exchanger.summary()}")
            except BlocksLost as lost:
                rollbacks += 1
                go_back(lost)
                run.files["log.csv"].start_clock(run.step)
                if bar is not None:
                    bar.update(run.step - before)
                continue
            if bar is not None:
                bar.update(target - before)
    finally:
        if bar is not None:
            bar.close()
        run.close()
    wall = time.perf_counter() - t0
    timing["loop"] = wall
    rung_frames = []
    if p.tempering and trajectory_topology is not None:
        rung_frames = demultiplex(p.out, p.temperatures_K, p.report_interval, trajectory_topology,
                                  p.dt_fs * 1e-3, p.walkers)
    acc = run.exchanger.acceptance().tolist() if p.tempering else []
    if p.tempering:
        say(f"final {run.exchanger.summary()}")
    return EnsembleResult(out=p.out, steps_done=run.step, walkers=p.walkers,
                          ns_per_day_aggregate=p.walkers * ns_per_day(max(run.step - start_step, 0), p.dt_fs * 1e-3, wall),
                          temperatures_K=list(p.temperatures_K), acceptance=acc,
                          dropped=[int(d["walker"]) for d in run.dropped], rollbacks=rollbacks, rung_frames=rung_frames,
                          timings=timing)
