"""One block of walkers: a packed OpenMM Context whose replicas each have their own temperature.

A parallel-tempering or ensemble run splits its walkers into blocks (``--blocks``, contiguous walker ranges);
each block is one :class:`WalkerBlock`, in the driving process (:class:`~.driver.LocalBlocks`) or as a Dask
actor on a worker (:mod:`.cluster`). A block owns its walkers' dynamics, health checks, trajectories
(``replica_WWW.dcd``, written where the block runs: the run directory must be shared) and checkpoints
(``blocks/block_BBB.sSTEP.chk``); what it sends back are per-walker energies, temperatures and drops.

The System comes from a *builder*: a picklable callable ``builder(replicas) -> BlockSystem`` (the CG network
System of flashschnet-simulate, :class:`flashschnet.openmm.cg_setup.CGBuilder`, or any other, e.g. the
harmonic test systems), so the same block drives both.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u

from ..reporters import (HealthReporter, ReplicaDCDReporter, cut_trajectories, read_checkpoint, replica_temperatures,
                         write_checkpoint)
from ..runner.loop import drop_replicas, step_with_rescue
from ..units import BOLTZMANN_KJ_MOL_K
from ..dynamics import Dynamics
from ..integrators import particle_temperatures, set_particle_temperatures

if TYPE_CHECKING:
    from .driver import EnsemblePlan


@dataclass
class BlockSystem:
    """What a builder returns for ``replicas`` packed copies of one system.

    Attributes
    ----------
    system : openmm.System
        ``replicas * particles`` particles; replica ``r`` owns ``r*particles .. (r+1)*particles - 1``; no force
        couples two replicas.
    topology : openmm.app.Topology
        The packed topology.
    trajectory_topology : openmm.app.Topology
        One replica's topology (the DCD files' atoms).
    particles : int
    masses_amu : ndarray [particles]
    positions_nm : ndarray [replicas * particles, 3]
        Starting positions.
    energies : callable
        ``positions_nm [replicas*particles, 3] -> [replicas]`` potential energies, kJ/mol, from the code that
        drives the dynamics (:class:`~flashschnet.openmm.energies.ReplicaEnergies` for the CG network).
    label : callable(int) -> str
        Names particle ``i`` of a replica in messages.
    properties : dict
        OpenMM platform properties.
    notes : list of str
    dynamics : Dynamics or None
        The force groups and integrator the System was built for (:class:`~flashschnet.openmm.dynamics.Dynamics`:
        an inner model means multiple time stepping); None: single stepping with the plan's step and friction.
    """

    system: openmm.System
    topology: app.Topology
    trajectory_topology: app.Topology
    particles: int
    masses_amu: np.ndarray
    positions_nm: np.ndarray
    energies: Callable[[np.ndarray], np.ndarray]
    label: Callable[[int], str] = lambda i: f"bead {i}"
    properties: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    dynamics: Optional["Dynamics"] = None


@dataclass
class BlockSpec:
    """One block's share of a run: its walkers, their starting temperatures and its seed; ``plan`` is the run
    every block shares (:class:`~.driver.EnsemblePlan`: the run directory, time step, friction, report interval,
    platform, force limit, what a blow-up does, threads per block's process)."""

    index: int
    walkers: List[int]                  # global walker ids, increasing
    temperatures_K: List[float]         # each walker's starting temperature
    seed: int                           # this block's integrator and velocity seed
    plan: "EnsemblePlan"


def block_checkpoint_path(out: str, block: int, step: int) -> str:
    return os.path.join(out, "blocks", f"block_{block:03d}.s{int(step)}.chk")


def walker_trajectory(out: str, walker: int) -> str:
    return os.path.join(out, f"replica_{walker:03d}.dcd")


#: platforms whose CustomIntegrator draws its gaussian numbers from OpenMM's one generator per process (the
#: Reference kernel's SimTKOpenMMUtilities; the CPU platform uses that kernel for custom integrators), which a
#: Context's creation reseeds and its checkpoint saves and restores
SHARED_RANDOM_PLATFORMS = ("CPU", "Reference")


class _Random:
    """Which block's random stream OpenMM's process-wide generator holds now (see SHARED_RANDOM_PLATFORMS).

    Several blocks in one process (LocalBlocks with --blocks > 1, or one Dask worker hosting several) would
    otherwise draw from one stream in whatever order they run, and a block's trajectory would depend on where
    it runs. So a block *owns* the generator while it touches its Context: taking it over snapshots the
    previous owner (its Context with the generator's state, ``createCheckpoint``) and reloads the new owner's
    last snapshot. Each block then draws exactly the numbers it would draw alone in a process, and its
    checkpoints hold its own stream. A block alone in its process never snapshots."""

    owner: Optional["WalkerBlock"] = None

    @classmethod
    def park(cls) -> None:
        """Snapshot the owner (if any) and leave the generator unowned (before something reseeds or reloads it)."""
        if cls.owner is not None:
            cls.owner._snapshot = cls.owner.simulation.context.createCheckpoint()
            cls.owner = None


class WalkerBlock:
    """One packed Context of walkers at their own temperatures (see the module docstring).

    Every method returns plain data (lists, dicts, floats), so it works the same as a Dask actor.
    """

    def __init__(self, builder: Callable[[int], "BlockSystem"], spec: BlockSpec):
        self._shared_random = spec.plan.platform in SHARED_RANDOM_PLATFORMS
        self._snapshot: Optional[str] = None
        if self._shared_random:
            _Random.park()                # creating this Context reseeds the process-wide generator
        if spec.plan.threads:
            import torch

            torch.set_num_threads(int(spec.plan.threads))
        self.spec = spec
        self.index = spec.index
        self.walkers = list(spec.walkers)
        self.R = len(self.walkers)
        self.bs = builder(self.R)
        self.N = int(self.bs.particles)
        self.masses = np.asarray(self.bs.masses_amu, dtype=float)
        self.dt_ps = spec.plan.dt_fs * 1e-3
        self.temps = np.asarray(spec.temperatures_K, dtype=float)
        dynamics = self.bs.dynamics or Dynamics(spec.plan.dt_fs, spec.plan.friction_per_ps)
        if abs(dynamics.step_fs - spec.plan.dt_fs) > 1e-12 * spec.plan.dt_fs:
            raise ValueError(f"the block's System was built for {dynamics.step_fs} fs steps, the run's are "
                             f"{spec.plan.dt_fs} fs")
        self.integrator = dynamics.integrator(self._per_particle(self.temps), spec.seed)
        props = dict(self.bs.properties)
        if spec.plan.platform == "CPU" and spec.plan.threads:
            props.setdefault("Threads", str(int(spec.plan.threads)))
        platform = openmm.Platform.getPlatformByName(spec.plan.platform)
        self.simulation = app.Simulation(self.bs.topology, self.bs.system, self.integrator, platform, props)
        if self._shared_random:
            _Random.owner = self          # the generator now holds this block's freshly seeded stream
        self.dropped: List[dict] = []     # [{walker, step, reason}] (global walker ids)
        self._new_drops: List[dict] = []
        self.dcd: Optional[ReplicaDCDReporter] = None
        self.health: Optional[HealthReporter] = None

    # -- helpers ---------------------------------------------------------------------------------------------
    def _own(self) -> None:
        """Make the process-wide generator hold this block's stream (before anything changes the Context)."""
        if self._shared_random and _Random.owner is not self:
            _Random.park()
            if self._snapshot is not None:
                self.simulation.context.loadCheckpoint(self._snapshot)
            _Random.owner = self

    def _per_particle(self, temps: Sequence[float]) -> np.ndarray:
        return np.repeat(np.asarray(temps, dtype=float), self.N)

    def _reporters(self, append: bool) -> None:
        s = self.spec.plan
        os.makedirs(os.path.join(s.out, "blocks"), exist_ok=True)
        self.dcd = ReplicaDCDReporter([walker_trajectory(s.out, w) for w in self.walkers], s.report_interval,
                                      self.bs.trajectory_topology, self.dt_ps, append=append, first_step=0)
        self.health = HealthReporter(s.report_interval, self.R, self.N, bead_label=self.bs.label,
                                     max_force=s.max_force, checkpoint_hint=lambda: "",
                                     on_blowup=s.on_blowup, drop=self._drop)
        for d in self.dropped:
            r = self.walkers.index(int(d["walker"]))
            self.health.active[r] = self.dcd.active[r] = False
        self.simulation.reporters[:] = [self.health, self.dcd]
        pos = self.simulation.context.getState(getPositions=True).getPositions(asNumpy=True)
        self.health.remember(pos.value_in_unit(u.nanometer))

    def _drop(self, simulation, bad, step: int) -> None:
        drop_replicas(simulation, self.health, bad, self.N, step, (self.dcd,), label=lambda r: self.walkers[r])
        for r, reason in bad:
            d = {"walker": int(self.walkers[r]), "step": int(step), "reason": reason}
            self.dropped.append(d)
            self._new_drops.append(d)

    def _set_masses(self) -> None:
        """System masses: the builder's, except the dropped walkers' (0: OpenMM does not move them)."""
        frozen = {self.walkers.index(int(d["walker"])) for d in self.dropped}
        system = self.simulation.system
        for r in range(self.R):
            for i in range(self.N):
                system.setParticleMass(r * self.N + i, 0.0 if r in frozen else float(self.masses[i]))

    # -- the run ---------------------------------------------------------------------------------------------
    def start(self) -> Dict[str, object]:
        """A new run: starting positions, Maxwell-Boltzmann velocities at each walker's temperature, step 0 (checked,
        then written as each walker's first frame)."""
        self._own()
        context = self.simulation.context
        context.setPositions(self.bs.positions_nm)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(self.spec.seed), 0x7E10C])))
        m = np.tile(self.masses, self.R)
        kt = BOLTZMANN_KJ_MOL_K * self._per_particle(self.temps)
        sigma = np.sqrt(np.divide(kt, m, out=np.zeros_like(m), where=m > 0))
        context.setVelocities(rng.standard_normal((self.R * self.N, 3)) * sigma[:, None])
        self.simulation.currentStep = 0
        context.setTime(0.0)
        self._reporters(append=False)
        state = context.getState(getEnergy=True, getForces=True, getPositions=True)
        self.health.report(self.simulation, state)       # the starting structure, before the first step
        self.dcd.report(self.simulation, state)          # ... and its frame (step 0)
        return self.energies()

    def restore(self, step: int) -> Dict[str, object]:
        """Go back to this block's checkpoint of ``step`` (a new run's block, or a running one rolled back):
        state, temperatures, drops; its trajectories are cut back to that step."""
        if self.dcd is not None:
            self.dcd.close()
        meta, blob = read_checkpoint(block_checkpoint_path(self.spec.plan.out, self.index, step))
        if self._shared_random:
            _Random.park()                # the checkpoint below sets the generator to this block's stream
            _Random.owner = self
        self.dropped = [dict(d) for d in meta.get("dropped", [])]
        self._new_drops = []
        self._set_masses()
        self.simulation.context.reinitialize()
        self.simulation.context.loadCheckpoint(blob)
        self.simulation.currentStep = int(meta["step"])
        self.temps = np.asarray(meta["temperatures_K"], dtype=float)
        cut_trajectories([walker_trajectory(self.spec.plan.out, w) for w in self.walkers], meta)
        self._reporters(append=True)
        return self.energies()

    def advance(self, to_step: int) -> Dict[str, object]:
        """Step to ``to_step`` (the reporters -- health check, trajectories -- at their steps on the way, drops
        included) and return :meth:`energies` there."""
        self._own()
        t0 = time.perf_counter()
        simulation = self.simulation
        while simulation.currentStep < to_step:      # the plain run's chunk (the driver adds where the checkpoint is)
            step_with_rescue(simulation, int(to_step) - simulation.currentStep, self.health)
        t1 = time.perf_counter()
        out = self.energies()
        out.update(step_s=t1 - t0, energy_s=time.perf_counter() - t1)
        return out

    def energies(self) -> Dict[str, object]:
        """Now: ``step``, ``time_ps``, per-walker ``energies`` (kJ/mol) and kinetic ``temperatures`` (K),
        ``active`` flags, and the ``dropped`` walkers since the last call ([{walker, step, reason}])."""
        state = self.simulation.context.getState(getPositions=True, getVelocities=True)
        pos = state.getPositions(asNumpy=True).value_in_unit(u.nanometer)
        energies = np.asarray(self.bs.energies(pos), dtype=float)
        kinetic = replica_temperatures(state, self.masses, self.R)
        active = np.ones(self.R, dtype=bool)
        for d in self.dropped:
            active[self.walkers.index(int(d["walker"]))] = False
        drops, self._new_drops = self._new_drops, []
        return {"step": int(self.simulation.currentStep), "time_ps": state.getTime().value_in_unit(u.picosecond),
                "walkers": list(self.walkers), "energies": energies.tolist(), "kinetic_K": kinetic.tolist(),
                "active": active.tolist(), "dropped": drops}

    def set_temperatures(self, temperatures_K: Sequence[float]) -> None:
        """Give each walker of the block its (new) temperature; a walker whose temperature changes has its
        velocities scaled by sqrt(T_new / T_old)."""
        new = np.asarray(temperatures_K, dtype=float)
        if np.array_equal(new, self.temps):
            return
        self._own()
        context = self.simulation.context
        v = context.getState(getVelocities=True).getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)
        scale = np.repeat(np.sqrt(new / self.temps), self.N)
        context.setVelocities(np.asarray(v) * scale[:, None])
        set_particle_temperatures(self.integrator, self._per_particle(new))
        self.temps = new

    def temperatures(self) -> List[float]:
        """Each walker's thermostat temperature (K), read back from the integrator."""
        return particle_temperatures(self.integrator)[::self.N].tolist()

    # -- checkpoints -----------------------------------------------------------------------------------------
    def save(self, step: int) -> str:
        """Write this block's checkpoint of the current state (which must be at ``step``), atomically; return its
        path. The run's checkpoint (:mod:`.driver`) points at the blocks' files of one step."""
        if self.simulation.currentStep != int(step):
            raise RuntimeError(f"block {self.index} is at step {self.simulation.currentStep}, not {step}")
        self._own()                       # the checkpoint holds the generator's state: this block's stream
        self.dcd.sync()
        meta = {"step": int(step), "block": self.index, "walkers": self.walkers, "temperatures_K": self.temps.tolist(),
                "dcd_bytes": self.dcd.sizes(), "dcd_frames": self.dcd.frame_counts, "dropped": self.dropped}
        path = block_checkpoint_path(self.spec.plan.out, self.index, step)
        write_checkpoint(path, meta, self.simulation.context.createCheckpoint(), what="writing the block checkpoint")
        return path

    def forget(self, keep_step: int) -> None:
        """Remove this block's checkpoints other than ``keep_step``'s (after the run's checkpoint moved on)."""
        folder = os.path.join(self.spec.plan.out, "blocks")
        prefix = f"block_{self.index:03d}.s"
        keep = os.path.basename(block_checkpoint_path(self.spec.plan.out, self.index, keep_step))
        for name in os.listdir(folder):
            if name.startswith(prefix) and name != keep:
                os.remove(os.path.join(folder, name))

    def close(self) -> None:
        if self.dcd is not None:
            self.dcd.close()
        if _Random.owner is self:
            _Random.owner = None

    def ping(self) -> int:
        """The id of the process this block runs in (a Dask worker's, or the driving process's)."""
        return os.getpid()
