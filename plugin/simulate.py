"""PDB + model -> CG mapping -> System -> Simulation -> trajectories, log and checkpoints.

:func:`run` is the main job behind ``flashschnet-simulate``; it reads top to bottom in the order of the
data flow. Output directory layout::

    DIR/run.json            the run's settings (a resumed run must match them)
    DIR/topology.pdb        the CG structure (one replica), for loading the DCDs
    DIR/replica_000.dcd     one trajectory per replica
    DIR/log.csv             step, time_ps, replica, potential_energy_kJ_mol, temperature_K, ns_per_day
    DIR/checkpoint.chk      the last good state (atomic); --resume continues from it
    DIR/dropped.json        only with --on-blowup drop, once a replica was dropped: [{replica, step, reason}]

Reproducibility: a run resumed from its checkpoint on the same platform, with the same number of PyTorch
threads and the same software, repeats the uninterrupted run bitwise (DCD frames, log rows but the speed
column, final checkpoint). Three things make that so: OpenMM's checkpoint holds positions, velocities and
the integrator's random state exactly; the network's forces are a function of the positions alone (the
fused CPU path chunks only the pairs inside the cutoff, whatever its Verlet list holds); and TorchScript may
not specialise the network module after its first calls (its specialised plans round differently from the
first, profiling call, so a resumed run's first force evaluation would differ in the last bit).

Replicas blowing up (``on_blowup``): ``"stop"`` ends the run (exit status 3, the last good checkpoint is
kept); ``"drop"`` freezes the replica at fault at its last good frame (masses 0, velocities 0; see
:func:`~flashschnet.openmm.runner.freeze_replicas`), prints ``replica R dropped at step S: reason``,
records it in ``dropped.json`` and in the checkpoint (a resumed run freezes it again), and stops its DCD
frames and log rows; the others go on. Losing the last replica ends the run as ``"stop"`` does.
"""
from __future__ import annotations

import functools
import json
import os
import random
from dataclasses import asdict, dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import torch

from ..checkpoint import load_model
from ..cg.mapping import map_pdb
from ..errors import InputError, SimulationInstabilityError
from ..transforms import apply_variant, describe, variant
from ..limits import check_replicas
from .runner import (check_run_settings, checkpoint_hint, freeze_replicas, integrate, make_run_dir, ns_per_day,
                     open_run_dir, run_dir, write_run_json)
from .dcd import truncate_dcd
from .reporters import (CheckpointReporter, HealthReporter, ReplicaCSVReporter, ReplicaDCDReporter,
                        read_checkpoint, truncate_csv)
from .system import build_system, replica_positions_nm
from .topology import cg_topology, write_cg_pdb
from .units import conversion_factors

#: settings that a resumed run must share with the run it continues
_FIXED_ON_RESUME = ("pdb", "model", "replicas", "dt_fs", "temperature_K", "friction_per_ps", "report_interval",
                    "checkpoint_interval", "mapping", "platform", "precision", "priors", "backend", "seed", "quantize",
                    "on_blowup")

#: run.json files written before a setting existed resume with its default
_DEFAULTS_OF_NEWER_KEYS = {"quantize": "none", "on_blowup": "stop"}

#: what a replica that blows up does to the run (see the module docstring)
ON_BLOWUP = ("stop", "drop")


@dataclass
class RunSettings:
    """Everything that defines a run (units in the names: fs, K, 1/ps)."""

    pdb: str
    model: str
    out: str
    steps: int
    replicas: int = 1
    platform: str = "CPU"
    seed: Optional[int] = None
    dt_fs: float = 4.0
    temperature_K: float = 300.0
    friction_per_ps: float = 1.0
    report_interval: int = 1000
    checkpoint_interval: Optional[int] = None      # default: 10 report intervals
    mapping: Optional[str] = None                  # default: the model's
    priors: Optional[str] = None                   # a prior file overriding the model's priors
    precision: str = "single"                      # network dtype: single | double
    backend: Optional[str] = None
    quantize: str = "none"                         # none | fp16 | bf16 | fp16-cast | bf16-cast (see nn.quant)
    network_force: str = "torch"                   # torch (TorchForce) | python (openmm.PythonForce)
    threads: Optional[int] = None
    max_force: float = 1.0e5                       # kJ/mol/nm
    on_blowup: str = "stop"                        # stop | drop (a replica that blows up)

    def validate(self) -> None:
        check_run_settings(self, max_dt_fs=50.0)
        if self.replicas < 1:
            raise InputError(f"--replicas must be >= 1, got {self.replicas}")
        if self.priors is not None and not str(self.priors).strip():
            raise InputError("--priors is empty; give a prior file or leave --priors out to use the model's priors")
        if self.network_force not in ("torch", "python"):
            raise InputError(f"--network-force must be torch or python, got {self.network_force!r}")
        variant(self.quantize)      # raises InputError naming the known variants
        if self.precision not in ("single", "double"):
            raise InputError(f"--precision must be single or double, got {self.precision!r}")
        if self.on_blowup not in ON_BLOWUP:
            raise InputError(f"--on-blowup must be stop or drop, got {self.on_blowup!r}")


@dataclass
class RunResult:
    out: str
    steps_done: int
    replicas: int
    n_beads: int
    ns_per_day_per_replica: float
    notes: List[str] = field(default_factory=list)
    dropped: List[int] = field(default_factory=list)     # replicas dropped (on_blowup="drop"), in order
    on_blowup: str = "stop"


def _load_priors(path: str):
    from ..priors import load_priors

    return load_priors(path)


def _one_torchscript_plan(fn):
    """Run ``fn`` letting TorchScript run every call of a module with one plan: no shape-specialised plans
    after the first (profiling) calls. Such plans may round differently in the last bit, so the forces at a
    given state would depend on how many times the module had run -- and a resumed run would not repeat the
    uninterrupted one. The setting is process-wide (it decides a module's plan at its first call); it is
    restored when ``fn`` returns."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        old = torch.jit.set_fusion_strategy([("STATIC", 0), ("DYNAMIC", 0)])
        try:
            return fn(*args, **kwargs)
        finally:
            torch.jit.set_fusion_strategy(old)

    return wrapper


def _write_dropped(path: str, dropped: List[dict]) -> None:
    """``dropped.json`` (atomic); removed when nothing was dropped."""
    if not dropped:
        if os.path.exists(path):
            os.remove(path)
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dropped, f, indent=1)
    os.replace(tmp, path)


@_one_torchscript_plan
def run(settings: RunSettings, resume: bool = False, progress: bool = True,
        echo: Callable[[str], None] = print, reporters: Sequence = ()) -> RunResult:
    """Run (or resume) a CG simulation; see the module docstring for the outputs.

    ``reporters``: more OpenMM reporters, called after the built-in ones (so only with states the health
    check passed), e.g. to sample memory use.

    Raises :class:`InputError` for bad input and :class:`SimulationInstabilityError` (after keeping the last
    good checkpoint) when the simulation blows up.
    """
    s = settings
    out = run_dir(s.out)
    ckpt_path = os.path.join(out, "checkpoint.chk")
    for key, value in open_run_dir(out, resume, asdict(s), _FIXED_ON_RESUME, inherit=("checkpoint_interval", "seed", "mapping"),
                                   defaults=_DEFAULTS_OF_NEWER_KEYS).items():
        setattr(s, key, value)
    s.validate()
    if s.seed is None:
        s.seed = random.SystemRandom().randrange(1, 2**31 - 1)
    if s.threads:
        torch.set_num_threads(int(s.threads))

    # 1. model, 2. CG mapping of the PDB ----------------------------------------------------------------
    dtype = torch.float64 if s.precision == "double" else torch.float32
    device = "cuda" if s.platform == "CUDA" and torch.cuda.is_available() else "cpu"
    model = apply_variant(load_model(s.model, backend=s.backend, dtype=dtype, device=device), s.quantize)
    mapping = s.mapping or model.config.get("cg_mapping") or "5bead"
    s.mapping = mapping
    mol = map_pdb(s.pdb, mapping=mapping)
    check_replicas(s.replicas, mol.n_beads)      # before anything of size R is allocated
    for note in mol.notes:
        echo(f"note: {note}")
    priors = _load_priors(s.priors) if s.priors else model.priors_for(mol)
    if priors is None:
        echo("note: the model has no priors; running the network alone (no bonds hold the chain together "
             "unless the network was trained without priors)")

    # 3. System, integrator, Simulation --------------------------------------------------------------------
    R, N = s.replicas, mol.n_beads
    system = build_system(mol, model, replicas=R, priors=priors, network_force=s.network_force)
    meta, blob, dropped = None, None, []
    if resume:
        meta, blob = read_checkpoint(ckpt_path)
        dropped = list(meta.get("dropped", []))
        for d in dropped:           # frozen replicas stay frozen
            for i in range(int(d["replica"]) * N, (int(d["replica"]) + 1) * N):
                system.setParticleMass(i, 0.0)
    echo(f"note: network backend {model.backend} ({device}, {s.precision} precision; 16-bit weights: "
         f"{describe(model.config)})")
    dt_ps = (s.dt_fs * u.femtosecond).value_in_unit(u.picosecond)
    integrator = openmm.LangevinMiddleIntegrator(s.temperature_K * u.kelvin, s.friction_per_ps / u.picosecond,
                                                 dt_ps * u.picosecond)
    integrator.setRandomNumberSeed(int(s.seed))
    platform = openmm.Platform.getPlatformByName(s.platform)
    simulation = app.Simulation(cg_topology(mol, replicas=R), system, integrator, platform)

    make_run_dir(out)
    dcd_paths = [os.path.join(out, f"replica_{r:03d}.dcd") for r in range(R)]
    log_path = os.path.join(out, "log.csv")
    dropped_path = os.path.join(out, "dropped.json")
    if resume:
        simulation.context.loadCheckpoint(blob)
        simulation.currentStep = int(meta["step"])
        frames = meta["dcd_frames"]
        frames = frames if isinstance(frames, list) else [frames] * R      # older checkpoints: one count
        for p, nbytes, nframes in zip(dcd_paths, meta["dcd_bytes"], frames):
            truncate_dcd(p, nbytes, nframes)
        truncate_csv(log_path, meta["step"])
        _write_dropped(dropped_path, dropped)    # a drop after the checkpoint happens again (or not) now
        if os.path.exists(ckpt_path + ".tmp"):   # a save the last run did not finish
            os.remove(ckpt_path + ".tmp")
        echo(f"resuming {out} at step {meta['step']}" +
             (f" ({len(dropped)} of {R} replicas dropped)" if dropped else ""))
    else:
        write_run_json(out, {k: v for k, v in asdict(s).items() if k not in ("out", "steps", "threads")})
        write_cg_pdb(mol, os.path.join(out, "topology.pdb"))
        simulation.context.setPositions(replica_positions_nm(mol, R))
        simulation.context.setVelocitiesToTemperature(s.temperature_K * u.kelvin, int(s.seed))

    # 4. reporters: health first, so nothing records a broken state ----------------------------------------
    length_to_nm, energy_to_kj = conversion_factors(model.units)
    bead_types = torch.as_tensor(mol.bead_types, dtype=torch.long)

    def replica_energies(pos_nm: np.ndarray) -> np.ndarray:
        pos = torch.as_tensor(pos_nm, dtype=dtype, device=device).reshape(R, N, 3) / length_to_nm
        energy = model.energy_forces(pos, bead_types.to(device))[0].double().cpu() * energy_to_kj
        if priors is not None:
            from ..priors import prior_energy

            p_len, p_en = conversion_factors(priors.units)
            with torch.no_grad():
                pp = torch.as_tensor(pos_nm, dtype=torch.float64).reshape(R, N, 3) / p_len
                energy = energy + prior_energy(priors, pp) * p_en
        return energy.numpy()

    dcd = ReplicaDCDReporter(dcd_paths, s.report_interval, cg_topology(mol, replicas=1), dt_ps, append=resume,
                             first_step=s.report_interval)
    log = ReplicaCSVReporter(log_path, s.report_interval, R, mol.masses, dt_ps, replica_energies, append=resume)

    def sync_outputs() -> None:
        dcd.sync()
        log.sync()

    checkpoint = CheckpointReporter(ckpt_path, s.checkpoint_interval, before_save=sync_outputs,
                                    extra=lambda: {"dcd_bytes": dcd.sizes(), "dcd_frames": dcd.frame_counts,
                                                   "dropped": list(dropped)})
    hint = checkpoint_hint(checkpoint, simulation.currentStep if resume else None)

    def drop(simulation, bad, step: int) -> None:
        for r, reason in bad:
            if not np.isfinite(health.last_good[r]).all():
                raise SimulationInstabilityError(f"step {step}: replica {r}: {reason}; it has no good frame to be "
                                                 f"frozen at; stopping ({hint()})")
        freeze_replicas(simulation, [r for r, _ in bad], N, {r: health.last_good[r] for r, _ in bad})
        for r, reason in bad:
            dcd.active[r] = log.active[r] = False
            dropped.append({"replica": int(r), "step": int(step), "reason": reason})
            echo(f"replica {r} dropped at step {step}: {reason}")
        _write_dropped(dropped_path, dropped)
        if not health.active.any():
            raise SimulationInstabilityError(f"step {step}: all {R} replicas dropped; stopping ({hint()})")

    health = HealthReporter(s.report_interval, R, N, bead_label=mol.bead_label, max_force=s.max_force,
                            checkpoint_hint=hint, on_blowup=s.on_blowup, drop=drop)
    for d in dropped:
        r = int(d["replica"])
        health.active[r] = dcd.active[r] = log.active[r] = False
    start = simulation.context.getState(getPositions=True).getPositions(asNumpy=True)
    health.remember(start.value_in_unit(u.nanometer))     # what a drop before the first check falls back to
    simulation.reporters.extend([health, dcd, log, checkpoint, *reporters])

    # 5. run ---------------------------------------------------------------------------------------------
    done, wall = integrate(simulation, s.steps, s.report_interval, health, checkpoint, hint, outputs=(dcd, log),
                           clock=log, check_first=not resume, progress=progress, desc=f"{R} x {N} beads")
    speed = ns_per_day(done, dt_ps, wall)
    return RunResult(out=out, steps_done=simulation.currentStep, replicas=R, n_beads=N,
                     ns_per_day_per_replica=speed, notes=list(mol.notes),
                     dropped=[int(d["replica"]) for d in dropped], on_blowup=s.on_blowup)
