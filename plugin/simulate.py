"""PDB + model -> CG mapping -> System -> Simulation -> trajectories, log and checkpoints.

:func:`run` is the main job behind ``flashschnet-simulate``; it reads top to bottom in the order of the
data flow. Output directory layout::

    DIR/run.json            the run's settings (a resumed run must match them)
    DIR/cleaned.pdb         the PDB as cleaned for both force fields (:mod:`flashschnet.openmm.cleaning`); what was mapped
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
:mod:`flashschnet.openmm.ensemble` instead: the inputs are loaded and checked once here
(:func:`~flashschnet.openmm.cg_setup.load_inputs`), each block builds the same System
(:class:`~flashschnet.openmm.cg_setup.CGBuilder`, picklable for Dask workers) and
:func:`~flashschnet.openmm.ensemble.run.run_ensemble` runs them; the directory then also holds
``T<K>.dcd`` per temperature, ``exchanges.csv``, ``walkers.csv`` and ``blocks/`` (docs/ensembles.md).
"""
from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, ClassVar, List, Optional, Sequence

import torch

from ..errors import InputError
from ..names import ON_BLOWUP
from ..options import ModelOptions
from ..tablecache import FilterTables
from ..threads import run_threads
from ..torchscript import one_plan
from .cg_setup import CGBuilder, CGInputs, build, load_inputs
from .cleaning import CLEANED_NAME, CleanedStructure, clean_pdb
from .force import check_network_force
from .runner import (FLAGS, DynamicsSettings, MDJob, RunResult, check_mts, flag, open_run_dir,
                     require_new_run_inputs, resume_already_done, run_dir, run_job)
from .runner.resume import record_files
from .system import replica_positions_nm
from .topology import cg_topology, write_cg_pdb

#: settings that a resumed run must share with the run it continues
_FIXED_ON_RESUME = ("pdb", "model", "replicas", "dt_fs", "temperature_K", "friction_per_ps", "report_interval",
                    "checkpoint_interval", "mapping", "platform", "precision", "priors", "backend", "seed", "quantize",
                    "on_blowup", "matmul", "compress", "compress_knots", "temperatures", "exchange_interval", "blocks",
                    "mts", "outer_dt_fs")

#: input files recorded in run.json by content (:mod:`flashschnet.openmm.runner.resume`); a resumed run reads the
#: model and a priors file again, and maps its own cleaned.pdb (the PDB is compared only when given)
_FILES = {"pdb": (), "model": (), "priors": (), "mts": ()}
_NEEDED_ON_RESUME = ("model", "priors", "mts")

#: the temperature of a run given none (K)
DEFAULT_TEMPERATURE_K = 300.0

#: run.json files written before a setting existed resume with its default
_DEFAULTS_OF_NEWER_KEYS = {"quantize": "none", "on_blowup": "stop", "matmul": "auto", "compress": "none",
                           "compress_knots": None, "temperatures": None, "exchange_interval": 500, "blocks": None,
                           "mts": None, "outer_dt_fs": None, "mts_any_teacher": False}


@dataclass(kw_only=True)
class RunSettings(DynamicsSettings):
    """Everything that defines a CG run: the dynamics (:class:`~flashschnet.openmm.runner.DynamicsSettings`), the
    model options (fields of :class:`flashschnet.options.ModelOptions`: :meth:`model_options`) and the rest below;
    keyword arguments only.

    ``pdb``, ``model`` and ``steps`` may be None for a resumed run (taken from its run.json);
    ``temperature_K`` None means :data:`DEFAULT_TEMPERATURE_K` (parallel tempering: the ladder instead).
    """

    pdb: Optional[str]
    model: Optional[str]
    replicas: int = 1
    temperature_K: Optional[float] = None          # default DEFAULT_TEMPERATURE_K; not with temperatures
    mapping: Optional[str] = None                  # default: the model's
    priors: Optional[str] = None                   # a prior file overriding the model's priors
    precision: str = "single"                      # the model options (flashschnet.options.ModelOptions) ...
    backend: Optional[str] = None
    quantize: str = "none"
    matmul: str = "auto"
    cuda_graph: bool = False
    compress: str = "auto"                         # auto: float32 filter tables on the fused backends at single
    compress_knots: Optional[int] = None           # precision (flashschnet.options.resolve_compression) ... up to here
    network_force: str = "torch"                   # torch (TorchForce) | python (openmm.PythonForce)
    on_blowup: str = "stop"                        # stop | drop (a replica that blows up)
    temperatures: Optional[str] = None             # parallel tempering: "TMIN:TMAX:N" or "T1,T2,..." (K)
    exchange_interval: int = 500                   # steps between exchanges (parallel tempering)
    blocks: Optional[int] = None                   # walkers split into this many packed Contexts (default: workers)
    workers: Optional[int] = None                  # a local Dask cluster of this many worker processes
    scheduler: Optional[str] = None                # an existing Dask scheduler's address
    mts: Optional[str] = None                      # an inner model file (flashschnet-distill): multiple time stepping
    outer_dt_fs: Optional[float] = None            # with mts (and only then, no default): the outer step, fs
    mts_any_teacher: bool = False                  # with mts: accept an inner model distilled from another model

    #: a CG run's platform when none is given: Reference, not CPU. OpenMM's CPU platform hands each of its kernels
    #: to worker threads; for a CG System (tens to hundreds of beads, the network in PyTorch) those hand-offs cost
    #: more than the priors they compute: a raw loop of the trp-cage default System ran 1.29-1.31 ms per step on
    #: Reference and 1.59-1.62 on CPU (1 thread; 4 replicas 3.88 vs 4.04, 8 replicas on 2 threads 6.69 vs 6.97),
    #: and BPTI's 39,589 prior tuples no slower (12.8 vs 12.9 ms) -- docs/sampling.md. MARTINI stays on CPU.
    DEFAULT_PLATFORM: ClassVar[str] = "Reference"

    @property
    def step_fs(self) -> float:
        """The integrator's step, fs: ``dt_fs``, or with an inner model (``mts``) the outer step."""
        if self.mts:
            return float(self.outer_dt_fs if self.outer_dt_fs is not None else 2.0 * self.dt_fs)
        return float(self.dt_fs)

    @property
    def inner_steps(self) -> int:
        """Inner steps per step: ``step_fs / dt_fs`` with an inner model, else 1."""
        return int(round(self.step_fs / self.dt_fs)) if self.mts else 1

    @property
    def ensemble(self) -> bool:
        """A parallel-tempering or multi-block run (:mod:`flashschnet.openmm.ensemble`), not the one-Context path."""
        return bool(self.temperatures) or self.workers is not None or bool(self.scheduler) or self.blocks is not None

    def ladder(self) -> List[float]:
        """One temperature per walker (K): the ladder, or ``temperature_K`` for each replica."""
        if self.temperatures:
            from .ladder import check_names, parse_temperatures

            temps = parse_temperatures(self.temperatures)
            check_names(temps)
            return temps
        return [float(self.temperature_K)] * int(self.replicas)

    def model_options(self) -> ModelOptions:
        """The model options of this run (``cuda_graph`` None: False)."""
        options = ModelOptions.of(self)
        options.cuda_graph = bool(options.cuda_graph)
        return options

    def _check_temperature(self) -> None:
        if self.temperature_K is not None or not self.temperatures:     # tempering: the ladder's, checked there
            super()._check_temperature()

    def validate(self) -> None:
        """Check the settings (one-line :class:`InputError` naming the option); fill in the defaults that depend on
        others (``temperature_K``, ``report_interval``, ``checkpoint_interval``)."""
        if self.temperature_K is None and not self.temperatures:
            self.temperature_K = DEFAULT_TEMPERATURE_K
        super().validate()
        if self.replicas < 1:
            raise InputError(f"{flag('replicas')} must be >= 1, got {self.replicas}")
        if self.priors is not None and not str(self.priors).strip():
            raise InputError(f"{flag('priors')} is empty; give a prior file or leave {flag('priors')} out to use the "
                             "model's priors")
        check_network_force(self.network_force, flag("network_force"))
        self.model_options().validate(names={f.name: flag(f.name) for f in fields(ModelOptions)})
        if self.on_blowup not in ON_BLOWUP:
            raise InputError(f"{flag('on_blowup')} must be {' or '.join(ON_BLOWUP)}, got {self.on_blowup!r}")
        check_mts(self.mts, self.outer_dt_fs, self.step_fs, self.dt_fs, self.MAX_DT_FS)
        if self.mts_any_teacher and not self.mts:
            raise InputError("--mts-any-teacher applies to an inner model (--mts); there is none")
        if self.ensemble:
            self._validate_ensemble()

    def dynamics(self, inner=None):
        """The :class:`~flashschnet.openmm.dynamics.Dynamics` of these settings (``inner``: the loaded inner
        model when ``mts`` is set)."""
        from .dynamics import Dynamics

        if self.mts and inner is None:
            raise ValueError("the inner model must be loaded for a run with mts")
        return Dynamics(self.step_fs, self.friction_per_ps, self.inner_steps, inner if self.mts else None)

    def _validate_ensemble(self) -> None:
        if self.workers is not None and self.scheduler:
            w, sch = flag("workers"), flag("scheduler")
            raise InputError(f"{w} and {sch} exclude each other: {w} N starts a local Dask cluster, {sch} ADDRESS "
                             "uses an existing one")
        if self.scheduler is not None and not str(self.scheduler).strip():
            raise InputError(f"{flag('scheduler')} is empty; give the scheduler's address, e.g. tcp://10.0.0.5:8786")
        if self.temperatures and self.replicas != 1:
            raise InputError(f"{flag('replicas')} {self.replicas} with {flag('temperatures')}: parallel tempering runs "
                             f"one walker per temperature; leave {flag('replicas')} out")
        walkers = len(self.ladder())
        if self.workers is not None and not 1 <= self.workers <= walkers:
            raise InputError(f"{flag('workers')} {self.workers}: must be between 1 and the number of walkers "
                             f"({walkers}: " + ("one per temperature" if self.temperatures else flag("replicas")) + ")")
        from .ensemble.driver import check_plan

        check_plan(self.plan(self.out or ".", seed=1))

    def plan(self, out: str, seed: int):
        """The :class:`~flashschnet.openmm.ensemble.EnsemblePlan` of these settings."""
        from .ensemble.driver import EnsemblePlan

        blocks = self.blocks if self.blocks is not None else (self.workers or 1)
        return EnsemblePlan(out=out, steps=self.steps, temperatures_K=self.ladder(),
                            exchange_interval=self.exchange_interval if self.temperatures else None,
                            report_interval=self.report_interval, checkpoint_interval=self.checkpoint_interval,
                            dt_fs=self.step_fs, friction_per_ps=self.friction_per_ps, seed=seed, blocks=blocks,
                            platform=self.platform, max_force=self.max_force, on_blowup=self.on_blowup,
                            threads=self.threads if self.threads else (1 if self.workers or self.scheduler else None))


@one_plan()     # one TorchScript plan per module (flashschnet.torchscript): a resume repeats the run bitwise
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
    _open(s, out, resume, given)
    if s.temperatures:
        s.temperature_K = None                   # the ladder's (run.json files of older versions said 300)
    require_new_run_inputs(resume, [("the PDB file", s.pdb), ("--model", s.model), ("--steps", s.steps)])
    s.validate()
    done = resume_already_done(out, s.steps, len(s.ladder())) if resume else None
    if done is not None:
        if s.temperatures:
            from .ensemble.run import finish_rung_files
            from .run_checks import damaged_rungs
            from .run_reader import RunDir

            finish_rung_files(out, s.ladder(), s.report_interval, s.step_fs * 1e-3, lambda: cg_topology(
                run_structure(s, out, resume=True).molecule(s.mapping), replicas=1),
                lambda path, temps: damaged_rungs(RunDir(path), temps), echo)
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
    inputs = load_inputs(s, echo, structure)
    cg = build(inputs, s, s.replicas)
    run_threads(s.threads, echo)
    mol, R, N = inputs.mol, s.replicas, inputs.mol.n_beads

    def start(simulation) -> None:
        structure.write(os.path.join(out, CLEANED_NAME))
        write_cg_pdb(mol, os.path.join(out, "topology.pdb"))
        simulation.context.setPositions(replica_positions_nm(mol, R))

    # 4. run (the scaffold shared with flashschnet-martini) --------------------------------------------------
    job = MDJob(out=out, settings=s, topology=inputs.topology(R), system=cg.system, replicas=R, particles=N,
                trajectories=[os.path.join(out, f"replica_{r:03d}.dcd") for r in range(R)],
                trajectory_topology=inputs.topology(1), masses_amu=mol.masses, start=start,
                run_json=_ran(s, inputs), label=mol.bead_label, replica_energies=cg.energies,
                on_blowup=s.on_blowup, reporters=reporters, desc=f"{R} x {N} beads", dynamics=inputs.dynamics)
    result = run_job(job, resume=resume, progress=progress, echo=echo)
    result.notes = list(mol.notes)
    return result


def _open(s: RunSettings, out: str, resume: bool, given: Optional[Sequence[str]], write: bool = True) -> None:
    """``out`` opened for a new run of ``s``, or for continuing the run there (``resume``: ``s`` takes the settings
    not ``given`` from its run.json; the given ones that fix the run and the input files are checked against it)."""
    given = set(given) if given is not None else {k for k, v in asdict(s).items() if v is not None}
    if s.compress == "auto":
        given.discard("compress")                # the default: a resumed run keeps what its own default chose
    if s.temperatures and "temperature_K" in given:
        raise InputError(f"{flag('temperature_K')} {s.temperature_K:g} with {flag('temperatures')}: parallel tempering "
                         f"runs each walker at its rung of the ladder; leave {flag('temperature_K')} out")
    for key, value in open_run_dir(out, resume, asdict(s), _FIXED_ON_RESUME, given=given, files=_FILES,
                                   needed=_NEEDED_ON_RESUME, defaults=_DEFAULTS_OF_NEWER_KEYS, options=FLAGS,
                                   write=write).items():
        setattr(s, key, value)


def check_resume(settings: RunSettings) -> None:
    """What :func:`run` with ``resume=True`` checks of the run it would continue -- the settings against its
    run.json, the input files by content -- on a copy of ``settings``, nothing run or written
    (``flashschnet-compare`` calls it before the MARTINI run starts)."""
    s = replace(settings)
    _open(s, run_dir(s.out), True, None, write=False)


def _ran(s: RunSettings, inputs: CGInputs) -> dict:
    """run.json of a new run: its settings (``compress`` and ``compress_knots`` as they ran: a table dtype and its
    knots, or "none"), the engine, and whether the tables were the default's (``compress_default``; run.json files
    without it ran what their settings say)."""
    return dict(_run_json(s), engine=inputs.engine, compress_default=inputs.compress_default)


def _run_json(s: RunSettings) -> dict:
    """What run.json records: the settings (input files by absolute path and sha256, see
    :mod:`~flashschnet.openmm.runner.resume`) but those that belong to one invocation (threads, where the workers
    are); ``steps`` is the step count a resume goes on to unless given another."""
    return record_files({k: v for k, v in asdict(s).items() if k not in ("out", "threads", "workers", "scheduler")},
                        _FILES)


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


def _run_ensemble(s: RunSettings, out: str, resume: bool, progress: bool, echo: Callable[[str], None],
                  structure: CleanedStructure) -> RunResult:
    """Parallel tempering (``--temperatures``) or an ensemble of blocks (``--blocks``, Dask ``--workers`` /
    ``--scheduler``) of CG walkers (:class:`CGBuilder`): :func:`flashschnet.openmm.ensemble.run.run_ensemble`.
    Everything is checked (model, PDB, cluster) before the first file is written."""
    from .ensemble.run import run_ensemble
    from .runner import write_run_json

    plan = s.plan(out, s.seed)
    s.blocks = plan.blocks
    inputs = load_inputs(s, echo, structure)     # the model and the PDB, checked here before any output
    mol = inputs.mol

    def write_start() -> None:
        write_run_json(out, _ran(s, inputs))
        structure.write(os.path.join(out, CLEANED_NAME))
        write_cg_pdb(mol, os.path.join(out, "topology.pdb"))

    # the cleaned text travels with the builder (no shared /tmp needed)
    tables = FilterTables.of(inputs.model) if inputs.model.config.get("compression") else None
    return run_ensemble(plan, CGBuilder(s, structure, tables), mol.n_beads, inputs.topology(1), write_start,
                        resume=resume, progress=progress, echo=echo, workers=s.workers, scheduler=s.scheduler,
                        notes=mol.notes)

