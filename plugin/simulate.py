"""PDB + model -> CG mapping -> System -> Simulation -> trajectories, log and checkpoints.

:func:`run` is the main job behind ``flashschnet-simulate``; it reads top to bottom in the order of the
data flow. Output directory layout::

    DIR/run.json            the run's settings (a resumed run must match them)
    DIR/cleaned.pdb         the PDB as cleaned for both engines (:mod:`flashschnet.openmm.cleaning`); what was mapped
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
Without ``threads`` the PyTorch thread count follows the cores free when the run starts
(:mod:`flashschnet.threads`): give ``--threads`` for a run that must repeat bitwise on a machine whose load varies.

Replicas blowing up (``on_blowup``): ``"stop"`` ends the run (exit status 3, the last good checkpoint is
kept); ``"drop"`` freezes the replica at fault at its last good frame and the others go on (see
:mod:`flashschnet.openmm.runner.job`, the run scaffold this module shares with flashschnet-martini).

The log's per-replica potential energies come from the code that drives the dynamics: the network module the
TorchForce (or PythonForce) runs and OpenMM's own prior forces (:class:`~flashschnet.openmm.energies.ReplicaEnergies`).

Parallel tempering and ensembles (``temperatures``, ``workers``, ``scheduler`` or ``blocks`` set) go through
:mod:`flashschnet.openmm.ensemble` instead: :func:`prepare` builds the same System for each block
(:class:`CGBuilder`, picklable for Dask workers) and the ensemble driver runs them; the directory then also holds
``T<K>.dcd`` per temperature, ``exchanges.csv``, ``walkers.csv`` and ``blocks/`` (docs/ensembles.md).
"""
from __future__ import annotations

import functools
import os
import random
from dataclasses import asdict, dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch

from ..cg.mapping import map_pdb_text
from ..checkpoint import load_model
from ..errors import InputError
from ..limits import check_replicas
from ..names import COMPRESSIONS, MATMULS, NETWORK_FORCES, ON_BLOWUP, PRECISIONS
from ..threads import run_threads
from ..transforms import apply_compression, apply_variant, describe, describe_compression, variant
from .cleaning import CLEANED_NAME, CleanedStructure, clean_pdb
from .energies import ReplicaEnergies
from .force import OpenMMNetwork, network_module
from .runner import (MDJob, RunResult, check_run_settings, open_run_dir, require_new_run_inputs, resume_already_done,
                     run_dir, run_job)
from .runner.resume import record_files
from .system import NO_PRIORS_NOTE, build_system, replica_positions_nm
from .topology import cg_topology, write_cg_pdb

#: settings that a resumed run must share with the run it continues
_FIXED_ON_RESUME = ("pdb", "model", "replicas", "dt_fs", "temperature_K", "friction_per_ps", "report_interval",
                    "checkpoint_interval", "mapping", "platform", "precision", "priors", "backend", "seed", "quantize",
                    "on_blowup", "matmul", "compress", "compress_knots", "temperatures", "exchange_interval", "blocks")

#: input files recorded in run.json by content (:mod:`flashschnet.openmm.runner.resume`); a resumed run reads the
#: model and a priors file again, and maps its own cleaned.pdb (the PDB is compared only when given)
_FILES = {"pdb": (), "model": (), "priors": ()}
_NEEDED_ON_RESUME = ("model", "priors")

#: command-line spellings of the settings (messages)
OPTIONS = {"pdb": "PDB", "dt_fs": "--dt", "temperature_K": "--temperature", "friction_per_ps": "--friction"}

#: the temperature of a run given none (K)
DEFAULT_TEMPERATURE_K = 300.0

#: run.json files written before a setting existed resume with its default
_DEFAULTS_OF_NEWER_KEYS = {"quantize": "none", "on_blowup": "stop", "matmul": "auto", "compress": "none",
                           "compress_knots": None, "temperatures": None, "exchange_interval": 500, "blocks": None}


@dataclass
class RunSettings:
    """Everything that defines a run (units in the names: fs, K, 1/ps).

    ``pdb``, ``model`` and ``steps`` may be None for a resumed run (taken from its run.json);
    ``temperature_K`` None means :data:`DEFAULT_TEMPERATURE_K` (parallel tempering: the ladder instead).
    """

    pdb: Optional[str]
    model: Optional[str]
    out: str
    steps: Optional[int]
    replicas: int = 1
    platform: str = "CPU"
    seed: Optional[int] = None
    dt_fs: float = 4.0
    temperature_K: Optional[float] = None          # default DEFAULT_TEMPERATURE_K; not with temperatures
    friction_per_ps: float = 1.0
    report_interval: Optional[int] = None          # default: steps // 100 (runner.default_report_interval)
    checkpoint_interval: Optional[int] = None      # default: 10 report intervals, <= 10000 steps where possible
    mapping: Optional[str] = None                  # default: the model's
    priors: Optional[str] = None                   # a prior file overriding the model's priors
    precision: str = "single"                      # network dtype: single | double
    backend: Optional[str] = None
    quantize: str = "none"                         # none | fp16 | bf16 | fp16-cast | bf16-cast (names.VARIANTS)
    network_force: str = "torch"                   # torch (TorchForce) | python (openmm.PythonForce)
    threads: Optional[int] = None
    max_force: float = 1.0e5                       # kJ/mol/nm
    on_blowup: str = "stop"                        # stop | drop (a replica that blows up)
    matmul: str = "auto"                           # triton backend's product precision (names.MATMULS)
    cuda_graph: bool = False                       # replay each network step as a CUDA graph (speed only)
    compress: str = "none"                         # filter tables: none | float32 | float16 | bfloat16
    compress_knots: Optional[int] = None           # knots per table (None: transforms.DEFAULT_KNOTS)
    temperatures: Optional[str] = None             # parallel tempering: "TMIN:TMAX:N" or "T1,T2,..." (K)
    exchange_interval: int = 500                   # steps between exchanges (parallel tempering)
    blocks: Optional[int] = None                   # walkers split into this many packed Contexts (default: workers)
    workers: Optional[int] = None                  # a local Dask cluster of this many worker processes
    scheduler: Optional[str] = None                # an existing Dask scheduler's address

    @property
    def ensemble(self) -> bool:
        """A parallel-tempering or multi-block run (:mod:`flashschnet.openmm.ensemble`), not the one-Context path."""
        return bool(self.temperatures) or self.workers is not None or bool(self.scheduler) or self.blocks is not None

    def ladder(self) -> List[float]:
        """One temperature per walker (K): the ladder, or ``temperature_K`` for each replica."""
        if self.temperatures:
            from .ensemble.ladder import check_names, parse_temperatures

            temps = parse_temperatures(self.temperatures)
            check_names(temps)
            return temps
        return [float(self.temperature_K)] * int(self.replicas)

    def validate(self) -> None:
        """Check the settings (one-line :class:`InputError` naming the option); fill in the defaults that depend on
        others (``temperature_K``, ``report_interval``, ``checkpoint_interval``)."""
        if self.temperature_K is None and not self.temperatures:
            self.temperature_K = DEFAULT_TEMPERATURE_K
        check_run_settings(self, max_dt_fs=50.0)
        if self.replicas < 1:
            raise InputError(f"--replicas must be >= 1, got {self.replicas}")
        if self.priors is not None and not str(self.priors).strip():
            raise InputError("--priors is empty; give a prior file or leave --priors out to use the model's priors")
        if self.network_force not in NETWORK_FORCES:
            raise InputError(f"--network-force must be {' or '.join(NETWORK_FORCES)}, got {self.network_force!r}")
        variant(self.quantize)      # raises InputError naming the known variants
        if self.precision not in PRECISIONS:
            raise InputError(f"--precision must be {' or '.join(PRECISIONS)}, got {self.precision!r}")
        if self.on_blowup not in ON_BLOWUP:
            raise InputError(f"--on-blowup must be {' or '.join(ON_BLOWUP)}, got {self.on_blowup!r}")
        if self.matmul not in MATMULS:
            raise InputError(f"--matmul must be one of {', '.join(MATMULS)}, got {self.matmul!r}")
        check_compression(self.compress, self.compress_knots, "--compress", "--compress-knots")
        if self.ensemble:
            self._validate_ensemble()

    def _validate_ensemble(self) -> None:
        if self.workers is not None and self.scheduler:
            raise InputError("--workers and --scheduler exclude each other: --workers N starts a local Dask cluster, "
                             "--scheduler ADDRESS uses an existing one")
        if self.scheduler is not None and not str(self.scheduler).strip():
            raise InputError("--scheduler is empty; give the scheduler's address, e.g. tcp://10.0.0.5:8786")
        if self.temperatures and self.replicas != 1:
            raise InputError(f"--replicas {self.replicas} with --temperatures: parallel tempering runs one walker per "
                             "temperature; leave --replicas out")
        walkers = len(self.ladder())
        if self.workers is not None and not 1 <= self.workers <= walkers:
            raise InputError(f"--workers {self.workers}: must be between 1 and the number of walkers ({walkers}: "
                             + ("one per temperature" if self.temperatures else "--replicas") + ")")
        from .ensemble.driver import check_plan

        check_plan(self.plan(self.out or ".", seed=1))

    def plan(self, out: str, seed: int):
        """The :class:`~flashschnet.openmm.ensemble.EnsemblePlan` of these settings."""
        from .ensemble.driver import EnsemblePlan

        blocks = self.blocks if self.blocks is not None else (self.workers or 1)
        return EnsemblePlan(out=out, steps=self.steps, temperatures_K=self.ladder(),
                            exchange_interval=self.exchange_interval if self.temperatures else None,
                            report_interval=self.report_interval, checkpoint_interval=self.checkpoint_interval,
                            dt_fs=self.dt_fs, friction_per_ps=self.friction_per_ps, seed=seed, blocks=blocks,
                            platform=self.platform, max_force=self.max_force, on_blowup=self.on_blowup,
                            threads=self.threads if self.threads else (1 if self.workers or self.scheduler else None))


def check_compression(name, knots, option: str, knots_option: str) -> None:
    """One-line :class:`InputError` unless ``name`` is one of :data:`COMPRESSIONS` and ``knots`` is None or an
    integer >= 4 given with a compression (the table itself checks the rest, see :func:`flashschnet.compress`)."""
    if name not in COMPRESSIONS:
        raise InputError(f"{option} must be one of {', '.join(COMPRESSIONS)}, got {name!r}")
    if knots is None:
        return
    if isinstance(knots, bool) or not isinstance(knots, int) or knots < 4:
        raise InputError(f"{knots_option} must be an integer >= 4, got {knots!r}")
    if name == "none":
        raise InputError(f"{knots_option} needs a compression: pass {option} float32, float16 or bfloat16")


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


@_one_torchscript_plan
def run(settings: RunSettings, resume: bool = False, progress: bool = True,
        echo: Callable[[str], None] = print, reporters: Sequence = (),
        given: Optional[Sequence[str]] = None) -> RunResult:
    """Run (or resume) a CG simulation; see the module docstring for the outputs.

    ``reporters``: more OpenMM reporters, called after the built-in ones (so only with states the health
    check passed), e.g. to sample memory use.

    ``given``: the settings the caller chose (the command line's options); a resumed run takes the others from
    its run.json, checks the given ones that fix the run against it, and compares the model, the PDB and a
    priors file by content (:mod:`~flashschnet.openmm.runner.resume`). Default: every setting that is not None.
    A resume of a run already at ``steps`` (or beyond) changes nothing and returns ``nothing_to_do=True``.

    Raises :class:`InputError` for bad input and :class:`SimulationInstabilityError` (after keeping the last
    good checkpoint) when the simulation blows up.
    """
    s = settings
    out = run_dir(s.out)
    given = set(given) if given is not None else {k for k, v in asdict(s).items() if v is not None}
    if s.temperatures and "temperature_K" in given:
        raise InputError(f"--temperature {s.temperature_K:g} with --temperatures: parallel tempering runs each walker "
                         "at its rung of the ladder; leave --temperature out")
    for key, value in open_run_dir(out, resume, asdict(s), _FIXED_ON_RESUME, given=given, files=_FILES,
                                   needed=_NEEDED_ON_RESUME, defaults=_DEFAULTS_OF_NEWER_KEYS, options=OPTIONS).items():
        setattr(s, key, value)
    if s.temperatures:
        s.temperature_K = None                   # the ladder's (run.json files of older versions said 300)
    require_new_run_inputs(resume, [("the PDB file", s.pdb), ("--model", s.model), ("--steps", s.steps)])
    s.validate()
    done = resume_already_done(out, s.steps, len(s.ladder())) if resume else None
    if done is not None:
        if s.temperatures:
            _finish_rung_files(s, out, echo)
        return done
    if s.seed is None:
        s.seed = random.SystemRandom().randrange(1, 2**31 - 1)
    if s.threads:
        torch.set_num_threads(int(s.threads))

    structure = run_structure(s, out, resume, echo)
    # PyTorch's threads: --threads, else the cores free now (flashschnet.threads); chosen once the input is known
    # good, so that its note never comes before an input error
    if s.ensemble:
        run_threads(s.threads, echo)
        return _run_ensemble(s, out, resume, progress, echo, structure)
    cg = prepare(s, s.replicas, echo, structure)
    run_threads(s.threads, echo)
    mol, R, N = cg.mol, s.replicas, cg.mol.n_beads

    def start(simulation) -> None:
        structure.write(os.path.join(out, CLEANED_NAME))
        write_cg_pdb(mol, os.path.join(out, "topology.pdb"))
        simulation.context.setPositions(replica_positions_nm(mol, R))

    # 4. run (the scaffold shared with flashschnet-martini) --------------------------------------------------
    job = MDJob(out=out, settings=s, topology=cg_topology(mol, replicas=R), system=cg.system, replicas=R, particles=N,
                trajectories=[os.path.join(out, f"replica_{r:03d}.dcd") for r in range(R)],
                trajectory_topology=cg_topology(mol, replicas=1), masses_amu=mol.masses, start=start,
                run_json=_run_json(s), label=mol.bead_label, replica_energies=cg.energies,
                on_blowup=s.on_blowup, reporters=reporters, desc=f"{R} x {N} beads")
    result = run_job(job, resume=resume, progress=progress, echo=echo)
    result.notes = list(mol.notes)
    return result


def _finish_rung_files(s: RunSettings, out: str, echo: Callable[[str], None]) -> None:
    """A tempering run at its step count whose per-temperature files (``T<K>.dcd``) are missing or older than
    ``walkers.csv`` (the run stopped, e.g. on a full disk, after its last checkpoint but before it demultiplexed):
    write them now from the walker files, as the end of the run would have."""
    from .ensemble.demux import demultiplex, rung_trajectory

    temps = s.ladder()
    log = os.path.join(out, "walkers.csv")
    if not os.path.exists(log):
        return
    stale = [t for t in temps if not os.path.exists(rung_trajectory(out, t))
             or os.path.getmtime(rung_trajectory(out, t)) < os.path.getmtime(log)]
    if not stale:
        return
    structure = run_structure(s, out, resume=True)
    mol = map_pdb_text(structure.text, source=structure.source, mapping=s.mapping)
    demultiplex(out, temps, s.report_interval, cg_topology(mol, replicas=1), s.dt_fs * 1e-3, len(temps))
    echo(f"note: wrote the per-temperature trajectories ({len(temps)} T<K>.dcd files) the run had not finished")


def _run_json(s: RunSettings) -> dict:
    """What run.json records: the settings (input files by absolute path and sha256, see
    :mod:`~flashschnet.openmm.runner.resume`) but those that belong to one invocation (threads, where the workers
    are); ``steps`` is the step count a resume goes on to unless given another."""
    return record_files({k: v for k, v in asdict(s).items() if k not in ("out", "threads", "workers", "scheduler")},
                        _FILES)


@dataclass
class CGSetup:
    """The CG network System of a run, for ``replicas`` packed copies (what :func:`prepare` builds)."""

    model: object
    mol: object
    priors: object
    system: object
    energies: ReplicaEnergies


def run_structure(s: RunSettings, out: str, resume: bool, echo: Callable[[str], None] = lambda m: None) -> CleanedStructure:
    """The structure a run maps. A new run cleans ``s.pdb`` (:func:`~flashschnet.openmm.cleaning.clean_pdb`, its
    notes echoed; nothing is written: the run writes ``OUT/cleaned.pdb`` once its directory exists). A resumed run
    maps its own ``OUT/cleaned.pdb``; a run directory from before the cleaning step has none, and its PDB is
    mapped as read, as it was then."""
    path = os.path.join(out, CLEANED_NAME)
    if resume and os.path.isfile(path):
        return CleanedStructure.from_file(path)
    if resume:
        return CleanedStructure.from_file(s.pdb)
    structure = clean_pdb(s.pdb)
    for note in structure.notes:
        echo(f"note: {note}")
    return structure


def prepare(s: RunSettings, replicas: int, echo: Callable[[str], None] = lambda m: None,
            structure: Optional[CleanedStructure] = None) -> CGSetup:
    """Steps 1-3 of a run: the model (with its variants), the CG mapping of the structure, the priors, and the
    System of ``replicas`` packed copies with the network module its force runs (which the per-replica energies
    use too). ``structure``: what to map (default: ``s.pdb`` cleaned now). ``s`` is validated; ``s.mapping`` is
    set to the mapping used."""
    # 1. model, 2. CG mapping of the PDB ----------------------------------------------------------------
    dtype = getattr(torch, PRECISIONS[s.precision])
    device = "cuda" if s.platform == "CUDA" and torch.cuda.is_available() else "cpu"
    model = load_model(s.model, backend=s.backend, dtype=dtype, device=device, matmul=s.matmul,
                       cuda_graph=bool(s.cuda_graph))
    model = apply_variant(apply_compression(model, s.compress, s.compress_knots), s.quantize)
    mapping = s.mapping or model.config.get("cg_mapping") or "5bead"
    s.mapping = mapping
    if structure is None:
        structure = clean_pdb(s.pdb)
    mol = map_pdb_text(structure.text, source=structure.source, mapping=mapping)
    check_replicas(replicas, mol.n_beads)      # before anything of size R is allocated
    for note in mol.notes:
        echo(f"note: {note}")
    priors = _load_priors(s.priors) if s.priors else model.priors_for(mol)
    if priors is None:
        echo(f"note: {NO_PRIORS_NOTE}")

    # 3. the System, and the network module its force runs (the log's energies come from it too) ------------
    types = torch.as_tensor(mol.bead_types, dtype=torch.long)
    module = (network_module(model, types, replicas) if s.network_force == "torch"
              else OpenMMNetwork(model, types, replicas))
    system = build_system(mol, model, replicas=replicas, priors=priors, module=module, network_force=s.network_force)
    echo(f"note: network backend {model.backend} ({device}, {s.precision} precision; 16-bit weights: "
         f"{describe(model.config)}; filter tables: {describe_compression(model.config)})")
    if s.matmul not in ("auto", "ieee") and model.backend != "triton":
        echo(f"note: --matmul {s.matmul} is ignored: it sets the triton backend's tensor-core products (on CUDA); "
             f"the {model.backend} backend computes exact products")
    if s.cuda_graph and device != "cuda":
        echo("note: --cuda-graph is ignored: it replays the triton backend's step on CUDA (--platform CUDA on a GPU "
             "machine)")
    return CGSetup(model=model, mol=mol, priors=priors, system=system,
                   energies=ReplicaEnergies(module, mol, priors, replicas, s.platform))


class CGBuilder:
    """The ensemble builder of a CG run: ``builder(replicas) ->`` :class:`~flashschnet.openmm.ensemble.block.BlockSystem`
    (picklable: a Dask worker builds its block's System from the settings, loading the model itself)."""

    def __init__(self, settings: RunSettings, structure: CleanedStructure):
        self.settings = settings
        self.structure = structure

    def __call__(self, replicas: int):
        from .ensemble.block import BlockSystem

        # one TorchScript plan per module, as _one_torchscript_plan: a worker process keeps it for its life
        torch.jit.set_fusion_strategy([("STATIC", 0), ("DYNAMIC", 0)])
        cg = prepare(self.settings, replicas, structure=self.structure)
        mol = cg.mol
        return BlockSystem(system=cg.system, topology=cg_topology(mol, replicas=replicas),
                           trajectory_topology=cg_topology(mol, replicas=1), particles=mol.n_beads,
                           masses_amu=np.asarray(mol.masses, dtype=float),
                           positions_nm=replica_positions_nm(mol, replicas), energies=cg.energies,
                           label=mol.bead_label, notes=list(mol.notes))


def _run_ensemble(s: RunSettings, out: str, resume: bool, progress: bool, echo: Callable[[str], None],
                  structure: CleanedStructure) -> RunResult:
    """Parallel tempering (``--temperatures``) or an ensemble of blocks on Dask (``--workers``/``--scheduler``):
    :mod:`flashschnet.openmm.ensemble`. Everything is checked (model, PDB, cluster) before the first file is
    written."""
    from .ensemble.driver import LocalBlocks, block_specs, drive
    from .runner import make_run_dir, write_run_json

    plan = s.plan(out, s.seed)
    s.blocks = plan.blocks
    cg = prepare(s, 1, echo, structure)         # the model and the PDB, checked here before any output
    mol = cg.mol
    check_replicas(max(len(sp.walkers) for sp in block_specs(plan)), mol.n_beads)
    specs = block_specs(plan)
    builder = CGBuilder(s, structure)         # the cleaned text travels with it (no shared /tmp needed)
    if s.workers is not None or s.scheduler:
        from .ensemble.cluster import DaskBlocks

        blocks = DaskBlocks(builder, specs, workers=s.workers, scheduler=s.scheduler,
                            threads_per_worker=plan.threads or 1, echo=echo)
    else:
        blocks = None
    try:
        make_run_dir(out)
        if not resume:
            write_run_json(out, _run_json(s))
            structure.write(os.path.join(out, CLEANED_NAME))
            write_cg_pdb(mol, os.path.join(out, "topology.pdb"))
        if blocks is None:
            blocks = LocalBlocks(builder, specs)
        what = (f"parallel tempering: {plan.walkers} walkers at {', '.join(f'{t:.1f}' for t in plan.temperatures_K)} K, "
                f"exchanges every {plan.exchange_interval} steps" if plan.tempering
                else f"ensemble: {plan.walkers} replicas")
        echo(f"note: {what}; {plan.blocks} block(s) of {', '.join(str(len(sp.walkers)) for sp in specs)} walkers"
             + (f" on {s.workers} local Dask workers" if s.workers else f" on the Dask cluster at {s.scheduler}"
                if s.scheduler else " in this process"))
        r = drive(plan, blocks, specs, resume=resume, progress=progress, echo=echo,
                  trajectory_topology=cg_topology(mol, replicas=1))
    finally:
        if blocks is not None:
            blocks.close()
    return RunResult(out=out, steps_done=r.steps_done, replicas=r.walkers, n_beads=mol.n_beads,
                     ns_per_day_per_replica=r.ns_per_day_aggregate / r.walkers, notes=list(mol.notes),
                     dropped=r.dropped, on_blowup=s.on_blowup, temperatures_K=r.temperatures_K if plan.tempering else [],
                     acceptance=r.acceptance, rollbacks=r.rollbacks, timings=r.timings)

