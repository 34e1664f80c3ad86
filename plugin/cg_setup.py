"""The CG force field's side of a run: what it loads once (:func:`load_inputs`) and the System it builds for R packed
copies (:func:`build`).

A plain run (:func:`flashschnet.openmm.simulate.run`) loads its inputs and builds one System. An ensemble loads
and checks its inputs once in the driving process (every note said there, once) and hands each block a
:class:`CGBuilder`, which builds the block's System where the block lives (a Dask worker loads the model itself;
the driving process's filter tables travel with the builder, so every block computes with the same ones).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable, Dict, Optional

import numpy as np
import torch

from ..fused.engine import running_engine
from ..limits import check_replicas
from ..options import ModelOptions, prepare_model
from ..tablecache import FilterTables
from ..torchscript import keep_one_plan
from ..transforms import describe, describe_compression
from .cleaning import CleanedStructure, clean_pdb
from .dynamics import Dynamics, check_teacher, load_inner_for
from .energies import ReplicaEnergies
from .force import OpenMMNetwork, network_module
from .runner import flag
from .system import NO_PRIORS_NOTE, USE_MODEL_PRIORS, build_system, check_compatible, replica_positions_nm, resolve_priors
from .topology import cg_topology


@dataclass
class CGInputs:
    """What a CG run loads and maps once (:func:`load_inputs`), whatever the number of Systems built from it."""

    model: object                   # the prepared model (flashschnet.options.prepare_model: tables, variants)
    mol: object                     # the CG molecule (flashschnet.cg.CGMolecule)
    priors: object                  # the prior terms (flashschnet.priors.PriorSet) or None
    dynamics: Dynamics              # force groups and integrator (multiple time stepping with --mts)
    engine: str = ""                # the edge engine the network runs (flashschnet.fused.engine.running_engine)
    compress_default: bool = False  # the filter tables (or their absence) came from compress "auto"
    _topologies: Dict[int, object] = field(default_factory=dict, repr=False)

    def topology(self, replicas: int):
        """The OpenMM topology of ``replicas`` packed copies (:func:`~flashschnet.openmm.topology.cg_topology`),
        made once per count."""
        if replicas not in self._topologies:
            self._topologies[replicas] = cg_topology(self.mol, replicas=replicas)
        return self._topologies[replicas]


@dataclass
class CGSetup:
    """The CG network System of a run for ``replicas`` packed copies (:func:`build`), with its inputs."""

    inputs: CGInputs
    system: object
    energies: ReplicaEnergies       # the log's per-replica energies, from the module the force runs


def load_inputs(s, echo: Callable[[str], None] = lambda m: None, structure: Optional[CleanedStructure] = None,
                tables: Optional[FilterTables] = None) -> CGInputs:
    """Steps 1-2 of a run, and every check of them: the model (with its variants and filter tables), the CG
    mapping of the structure, the priors, the inner model of ``--mts``; their notes echoed. ``s``: the run's
    :class:`~flashschnet.openmm.simulate.RunSettings`, validated; ``s.mapping`` is set to the mapping used, and
    ``s.compress`` / ``s.compress_knots`` to the filter tables that run (a table dtype and its knots, or "none").
    ``structure``: what to map (default: ``s.pdb`` cleaned now); ``tables``: the filter tables to use (an ensemble
    block gets its driving process's)."""
    device = _device(s)
    by_default = s.compress == "auto"
    model = prepare_model(s.model, s.model_options(), device, tables=tables,
                          names={f.name: flag(f.name) for f in fields(ModelOptions)})
    tabulated = model.config.get("compression")
    s.compress, s.compress_knots = (tabulated["dtype"], tabulated["knots"]) if tabulated else ("none", None)
    s.mapping = s.mapping or model.config.get("cg_mapping") or "5bead"
    mol = (structure or clean_pdb(s.pdb)).molecule(s.mapping)
    for note in mol.notes:
        echo(f"note: {note}")
    check_compatible(mol, model)
    priors = resolve_priors(model, s.priors or USE_MODEL_PRIORS, mol)
    if priors is None:
        echo(f"note: {NO_PRIORS_NOTE}")
    else:
        priors.check_applies_to(mol)
    inner = load_inner_for(s.mts, mol) if s.mts else None
    if inner is not None:
        teacher_note = check_teacher(inner, s.mts, s.model, accept=bool(s.mts_any_teacher))
        if teacher_note:
            echo(f"note: {teacher_note}")
    dynamics = s.dynamics(inner)                  # (checked before the model's notes)
    for note in model.notes:
        echo(f"note: {note}")
    if dynamics.mts:
        echo(f"note: {dynamics.describe()}")
    engine = running_engine(model, device)
    echo(f"note: network backend {model.backend} (engine {engine}; {device}, {s.precision} precision; 16-bit weights: "
         f"{describe(model.config)}; filter tables: {describe_compression(model.config)})")
    if s.matmul not in ("auto", "ieee") and model.backend != "triton":
        echo(f"note: --matmul {s.matmul} is ignored: it sets the triton backend's tensor-core products (on CUDA); "
             f"the {model.backend} backend computes exact products")
    if s.cuda_graph and device != "cuda":
        echo("note: --cuda-graph is ignored: it replays the triton backend's step on CUDA (--platform CUDA on a GPU "
             "machine)")
    return CGInputs(model=model, mol=mol, priors=priors, dynamics=dynamics, engine=engine,
                    compress_default=by_default)


def build(inputs: CGInputs, s, replicas: int) -> CGSetup:
    """Step 3 of a run: the System of ``replicas`` packed copies of ``inputs`` and the network module its force
    runs (the per-replica energies of the log use it too)."""
    mol, model = inputs.mol, inputs.model
    check_replicas(replicas, mol.n_beads)      # before anything of size R is allocated
    types = torch.as_tensor(mol.bead_types, dtype=torch.long)
    module = (network_module(model, types, replicas) if s.network_force == "torch"
              else OpenMMNetwork(model, types, replicas))
    system = build_system(mol, model, replicas=replicas, priors=inputs.priors, module=module,
                          network_force=s.network_force, compress="none",   # (prepared: its tables are chosen)
                          dynamics=inputs.dynamics)
    return CGSetup(inputs=inputs, system=system,
                   energies=ReplicaEnergies(module, mol, inputs.priors, replicas, s.platform))


def _device(s) -> str:
    return "cuda" if s.platform == "CUDA" and torch.cuda.is_available() else "cpu"


class CGBuilder:
    """The ensemble builder of a CG run: ``builder(replicas) ->`` :class:`~flashschnet.openmm.ensemble.block.BlockSystem`
    (picklable: a block loads its inputs where it lives, quietly -- the driving process said the notes -- with the
    driving process's filter ``tables``)."""

    def __init__(self, settings, structure: CleanedStructure, tables: Optional[FilterTables] = None):
        self.settings = settings
        self.structure = structure
        self.tables = tables

    def __call__(self, replicas: int):
        from .ensemble.block import BlockSystem

        keep_one_plan()     # as a plain run: one TorchScript plan per module; a Dask worker keeps it for its life
        inputs = load_inputs(self.settings, structure=self.structure, tables=self.tables)
        cg = build(inputs, self.settings, replicas)
        mol = inputs.mol
        return BlockSystem(system=cg.system, topology=inputs.topology(replicas),
                           trajectory_topology=inputs.topology(1), particles=mol.n_beads,
                           masses_amu=np.asarray(mol.masses, dtype=float),
                           positions_nm=replica_positions_nm(mol, replicas), energies=cg.energies,
                           label=mol.bead_label, notes=list(mol.notes), dynamics=inputs.dynamics)
