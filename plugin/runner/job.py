"""The run scaffold both force fields use: an OpenMM System in, a run directory out.

:func:`flashschnet.openmm.simulate.run` (the CG network) and :func:`flashschnet.openmm.martini.run.run_martini`
(MARTINI 3) each build their System and describe it as an :class:`MDJob`; :func:`run_job` does the rest, the
same way for both: the integrator, the Simulation, a new start (``run.json``, the force field's own start:
positions, minimisation, topology file; velocities) or a resume (the checkpoint loaded, trajectories and log cut
back to it, dropped replicas frozen again), the reporters (health first, one DCD per replica, the CSV log, atomic
checkpoints), the step loop, and the result. A new run records its starting state (once the health check passed
it) as step 0: the first frame of every trajectory (DCD header: first step 0) and the log's first rows, so frame
``k`` is step ``k * report_interval``; a resumed run goes on from its checkpoint without writing step 0 again.
Run directories written before step 0 was recorded keep their numbering (first step = one report interval) when
resumed.

A replica that blows up (``job.on_blowup``): ``"stop"`` ends the run (:class:`SimulationInstabilityError`, the
last good checkpoint kept); ``"drop"`` freezes it at its last good frame (:func:`~.loop.drop_replicas`), prints
``replica R dropped at step S: reason``, records it in ``dropped.json`` and in the checkpoint (a resumed run
freezes it again) and stops its frames and log rows; losing the last replica ends the run as ``"stop"`` does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u

from ...errors import SimulationInstabilityError
from ..dynamics import Dynamics
from ..reporters import (CheckpointReporter, HealthReporter, ReplicaCSVReporter, ReplicaDCDReporter, cut_trajectories,
                         ns_per_day, read_checkpoint, truncate_csv)
from .directory import few_frames_warning, make_run_dir, resumed_step, write_dropped, write_run_json
from .loop import checkpoint_hint, drop_replicas, integrate


@dataclass
class RunResult:
    """What a finished run reports (speed: the step loop only, reporters included)."""

    out: str
    steps_done: int
    replicas: int
    n_beads: int
    ns_per_day_per_replica: float
    notes: List[str] = field(default_factory=list)
    dropped: List[int] = field(default_factory=list)     # replicas dropped (on_blowup="drop"), in order
    on_blowup: str = "stop"
    temperatures_K: List[float] = field(default_factory=list)   # parallel tempering: the ladder
    acceptance: List[float] = field(default_factory=list)       # parallel tempering: accepted fraction per pair
    rollbacks: int = 0                                          # ensembles: lost blocks and the rollbacks they caused
    timings: Dict[str, float] = field(default_factory=dict)     # ensembles: EnsembleResult.timings
    nothing_to_do: bool = False         # a resume of a run already at its step count: nothing was run or written
    steps_target: Optional[int] = None  # the step count asked for (with nothing_to_do: at most steps_done)


def resume_already_done(out: str, steps: int, replicas: int) -> Optional[RunResult]:
    """For a resume: the :class:`RunResult` of "nothing to do" when the run in ``out`` is already at ``steps`` (or
    beyond) -- nothing is run or written -- else None (the run goes on)."""
    at = resumed_step(out)
    if at < steps:
        return None
    return RunResult(out=out, steps_done=at, replicas=replicas, n_beads=0, ns_per_day_per_replica=float("nan"),
                     nothing_to_do=True, steps_target=steps)


@dataclass
class MDJob:
    """A force field's System, described for :func:`run_job`.

    Attributes
    ----------
    out : str
        The run directory (absolute; checked by :func:`~.directory.open_run_dir`).
    settings : object
        The run settings (validated): ``steps, dt_fs, temperature_K, friction_per_ps, seed, platform,
        report_interval, checkpoint_interval, max_force``.
    topology, system
        The whole System's OpenMM topology and System (``replicas`` packed copies: replica ``r`` owns
        particles ``r*particles .. r*particles+particles-1``).
    replicas, particles : int
    trajectories : list of str
        One DCD path per replica.
    trajectory_topology : openmm.app.Topology
        One replica's topology (the DCD files' atoms).
    masses_amu : ndarray [particles]
        One replica's masses (for the temperature).
    start : callable(Simulation)
        Starts a new run: positions (and whatever else the force field does first: minimisation, the topology
        file). Velocities are drawn afterwards, here.
    run_json : dict
        What a new run writes to ``run.json`` (the settings a resumed run must match).
    label : callable(int) -> str
        Names particle ``i`` of a replica in messages.
    replica_energies : callable or None
        ``positions_nm [R*particles, 3] -> [R]`` potential energies in kJ/mol for the log, computed by the code
        that drives the dynamics (:class:`~flashschnet.openmm.energies.ReplicaEnergies`); None (one replica
        only): the state's potential energy.
    dof : int or None
        Degrees of freedom per replica for the temperature (default 3 x particles).
    properties : dict
        OpenMM platform properties.
    on_blowup : {"stop", "drop"}
    reporters : sequence
        More OpenMM reporters, after the built-in ones (so only with states the health check passed).
    desc : str
        The progress bar's label.
    dynamics : Dynamics or None
        The integrator and force groups the System was built for (:class:`~flashschnet.openmm.dynamics.Dynamics`);
        None: single stepping with ``settings``' time step and friction (OpenMM's ``LangevinMiddleIntegrator``).
    """

    out: str
    settings: object
    topology: app.Topology
    system: openmm.System
    replicas: int
    particles: int
    trajectories: Sequence[str]
    trajectory_topology: app.Topology
    masses_amu: np.ndarray
    start: Callable[[app.Simulation], None]
    run_json: Dict[str, object]
    label: Callable[[int], str]
    replica_energies: Optional[Callable[[np.ndarray], np.ndarray]] = None
    dof: Optional[int] = None
    properties: Dict[str, str] = field(default_factory=dict)
    on_blowup: str = "stop"
    reporters: Sequence = ()
    desc: str = ""
    dynamics: Optional[Dynamics] = None


def run_job(job: MDJob, resume: bool = False, progress: bool = True,
            echo: Callable[[str], None] = print) -> RunResult:
    """Run (or resume) ``job`` to step ``job.settings.steps``; see the module docstring. Raises
    :class:`SimulationInstabilityError` (after keeping the last good checkpoint) when the simulation blows up."""
    s, out, R, N = job.settings, job.out, job.replicas, job.particles
    ckpt_path = os.path.join(out, "checkpoint.chk")
    log_path = os.path.join(out, "log.csv")
    dropped_path = os.path.join(out, "dropped.json")
    meta, blob, dropped = None, None, []
    if resume:
        meta, blob = read_checkpoint(ckpt_path)
        dropped = list(meta.get("dropped", []))
        for d in dropped:                        # frozen replicas stay frozen
            for i in range(int(d["replica"]) * N, (int(d["replica"]) + 1) * N):
                job.system.setParticleMass(i, 0.0)

    # the Simulation --------------------------------------------------------------------------------------------
    dynamics = job.dynamics if job.dynamics is not None else Dynamics(s.step_fs, s.friction_per_ps)
    dt_ps = dynamics.step_ps
    integrator = dynamics.integrator(s.temperature_K, s.seed, particles=R * N)
    platform = openmm.Platform.getPlatformByName(s.platform)
    simulation = app.Simulation(job.topology, job.system, integrator, platform, job.properties)

    # a new start, or the checkpoint and the outputs cut back to it ----------------------------------------------
    make_run_dir(out)
    if resume:
        simulation.context.loadCheckpoint(blob)
        simulation.currentStep = int(meta["step"])
        cut_trajectories(job.trajectories, meta)
        truncate_csv(log_path, meta["step"])
        write_dropped(dropped_path, dropped)     # a drop after the checkpoint happens again (or not) now
        if os.path.exists(ckpt_path + ".tmp"):   # a save the last run did not finish
            os.remove(ckpt_path + ".tmp")
        echo(f"resuming {out} at step {meta['step']}" +
             (f" ({len(dropped)} of {R} replicas dropped)" if dropped else ""))
    else:
        write_run_json(out, job.run_json)
        job.start(simulation)
        simulation.context.setVelocitiesToTemperature(s.temperature_K * u.kelvin, int(s.seed))

    # reporters: health first, so nothing records a broken state -----------------------------------------------------
    # a new run's files start at step 0 (its starting state, once checked); a resumed one keeps its header
    dcd = ReplicaDCDReporter(job.trajectories, s.report_interval, job.trajectory_topology, dt_ps, append=resume,
                             first_step=0)
    log = ReplicaCSVReporter(log_path, s.report_interval, R, job.masses_amu, dt_ps, job.replica_energies,
                             append=resume, dof=job.dof)

    def sync_outputs() -> None:
        dcd.sync()
        log.sync()

    checkpoint = CheckpointReporter(ckpt_path, s.checkpoint_interval, before_save=sync_outputs,
                                    extra=lambda: {"dcd_bytes": dcd.sizes(), "dcd_frames": dcd.frame_counts,
                                                   "dropped": list(dropped)})
    hint = checkpoint_hint(checkpoint, simulation.currentStep if resume else None)

    def drop(simulation, bad, step: int) -> None:
        drop_replicas(simulation, health, bad, N, step, (dcd, log), hint=hint)
        for r, reason in bad:
            dropped.append({"replica": int(r), "step": int(step), "reason": reason})
            echo(f"replica {r} dropped at step {step}: {reason}")
        write_dropped(dropped_path, dropped)
        if not health.active.any():
            raise SimulationInstabilityError(f"step {step}: all {R} replicas dropped; stopping ({hint()})")

    health = HealthReporter(s.report_interval, R, N, bead_label=job.label, max_force=s.max_force,
                            checkpoint_hint=hint, on_blowup=job.on_blowup, drop=drop)
    for d in dropped:
        r = int(d["replica"])
        health.active[r] = dcd.active[r] = log.active[r] = False
    start = simulation.context.getState(getPositions=True).getPositions(asNumpy=True)
    health.remember(start.value_in_unit(u.nanometer))     # what a drop before the first check falls back to
    simulation.reporters.extend([health, dcd, log, checkpoint, *job.reporters])

    # the step loop -----------------------------------------------------------------------------------------------
    warning = few_frames_warning(s.steps, s.report_interval)
    if warning:
        echo(f"warning: {warning}")
    done, wall = integrate(simulation, s.steps, s.report_interval, health, checkpoint, hint, outputs=(dcd, log),
                           clock=log, check_first=not resume, progress=progress, desc=job.desc,
                           start_reports=(dcd, log))
    return RunResult(out=out, steps_done=simulation.currentStep, replicas=R, n_beads=N,
                     ns_per_day_per_replica=ns_per_day(done, dt_ps, wall),
                     dropped=[int(d["replica"]) for d in dropped], on_blowup=job.on_blowup)
