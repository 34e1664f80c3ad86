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
kept); ``"drop"`` freezes the replica at fault at its last good frame and the others go on (see
:mod:`flashschnet.openmm.runner.job`, the run scaffold this module shares with flashschnet-martini).

The log's per-replica potential energies come from the code that drives the dynamics: the network module the
TorchForce (or PythonForce) runs and OpenMM's own prior forces (:class:`~flashschnet.openmm.energies.ReplicaEnergies`).
"""
from __future__ import annotations

import functools
import os
import random
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence

import torch

from ..cg.mapping import map_pdb
from ..checkpoint import load_model
from ..errors import InputError
from ..limits import check_replicas
from ..names import COMPRESSIONS, MATMULS, NETWORK_FORCES, ON_BLOWUP, PRECISIONS
from ..transforms import apply_compression, apply_variant, describe, describe_compression, variant
from .energies import ReplicaEnergies
from .force import OpenMMNetwork, network_module
from .runner import MDJob, RunResult, check_run_settings, open_run_dir, run_dir, run_job
from .system import build_system, replica_positions_nm
from .topology import cg_topology, write_cg_pdb

#: settings that a resumed run must share with the run it continues
_FIXED_ON_RESUME = ("pdb", "model", "replicas", "dt_fs", "temperature_K", "friction_per_ps", "report_interval",
                    "checkpoint_interval", "mapping", "platform", "precision", "priors", "backend", "seed", "quantize",
                    "on_blowup", "matmul", "compress", "compress_knots")

#: run.json files written before a setting existed resume with its default
_DEFAULTS_OF_NEWER_KEYS = {"quantize": "none", "on_blowup": "stop", "matmul": "auto", "compress": "none",
                           "compress_knots": None}


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
    quantize: str = "none"                         # none | fp16 | bf16 | fp16-cast | bf16-cast (names.VARIANTS)
    network_force: str = "torch"                   # torch (TorchForce) | python (openmm.PythonForce)
    threads: Optional[int] = None
    max_force: float = 1.0e5                       # kJ/mol/nm
    on_blowup: str = "stop"                        # stop | drop (a replica that blows up)
    matmul: str = "auto"                           # triton backend's product precision (names.MATMULS)
    cuda_graph: bool = False                       # replay each network step as a CUDA graph (speed only)
    compress: str = "none"                         # filter tables: none | float32 | float16 | bfloat16
    compress_knots: Optional[int] = None           # knots per table (None: transforms.DEFAULT_KNOTS)

    def validate(self) -> None:
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
        echo: Callable[[str], None] = print, reporters: Sequence = ()) -> RunResult:
    """Run (or resume) a CG simulation; see the module docstring for the outputs.

    ``reporters``: more OpenMM reporters, called after the built-in ones (so only with states the health
    check passed), e.g. to sample memory use.

    Raises :class:`InputError` for bad input and :class:`SimulationInstabilityError` (after keeping the last
    good checkpoint) when the simulation blows up.
    """
    s = settings
    out = run_dir(s.out)
    for key, value in open_run_dir(out, resume, asdict(s), _FIXED_ON_RESUME, inherit=("checkpoint_interval", "seed", "mapping"),
                                   defaults=_DEFAULTS_OF_NEWER_KEYS).items():
        setattr(s, key, value)
    s.validate()
    if s.seed is None:
        s.seed = random.SystemRandom().randrange(1, 2**31 - 1)
    if s.threads:
        torch.set_num_threads(int(s.threads))

    # 1. model, 2. CG mapping of the PDB ----------------------------------------------------------------
    dtype = getattr(torch, PRECISIONS[s.precision])
    device = "cuda" if s.platform == "CUDA" and torch.cuda.is_available() else "cpu"
    model = load_model(s.model, backend=s.backend, dtype=dtype, device=device, matmul=s.matmul,
                       cuda_graph=bool(s.cuda_graph))
    model = apply_variant(apply_compression(model, s.compress, s.compress_knots), s.quantize)
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

    # 3. the System, and the network module its force runs (the log's energies come from it too) ------------
    R, N = s.replicas, mol.n_beads
    types = torch.as_tensor(mol.bead_types, dtype=torch.long)
    module = network_module(model, types, R) if s.network_force == "torch" else OpenMMNetwork(model, types, R)
    system = build_system(mol, model, replicas=R, priors=priors, module=module, network_force=s.network_force)
    echo(f"note: network backend {model.backend} ({device}, {s.precision} precision; 16-bit weights: "
         f"{describe(model.config)}; filter tables: {describe_compression(model.config)})")

    def start(simulation) -> None:
        write_cg_pdb(mol, os.path.join(out, "topology.pdb"))
        simulation.context.setPositions(replica_positions_nm(mol, R))

    # 4. run (the scaffold shared with flashschnet-martini) --------------------------------------------------
    job = MDJob(out=out, settings=s, topology=cg_topology(mol, replicas=R), system=system, replicas=R, particles=N,
                trajectories=[os.path.join(out, f"replica_{r:03d}.dcd") for r in range(R)],
                trajectory_topology=cg_topology(mol, replicas=1), masses_amu=mol.masses, start=start,
                run_json={k: v for k, v in asdict(s).items() if k not in ("out", "steps", "threads")},
                label=mol.bead_label, replica_energies=ReplicaEnergies(module, mol, priors, R, s.platform),
                on_blowup=s.on_blowup, reporters=reporters, desc=f"{R} x {N} beads")
    result = run_job(job, resume=resume, progress=progress, echo=echo)
    result.notes = list(mol.notes)
    return result
