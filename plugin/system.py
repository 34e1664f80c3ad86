"""Build OpenMM Systems for a CG molecule: particles with masses, prior forces, the network.

R replicas are packed (:func:`build_system` with ``replicas=R``): one System of ``R * N`` particles, replica ``r``
owning particles ``r*N .. r*N+N-1``; no force couples two replicas; the network runs once per step for all.
:func:`add_model_forces` is the one way the model's forces (network and priors) enter a System, a new one
(:func:`build_system`) or the caller's (OpenMM-ML). R Systems of one replica each can share one model by passing
the same ``module`` (:func:`~flashschnet.openmm.force.network_module`) to each :func:`build_system`.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import numpy as np
import openmm
import torch

from ..errors import InputError
from ..loaded import LoadedModel, as_loaded
from ..options import default_network
from .dynamics import NETWORK_GROUP, PRIOR_GROUP
from .force import OpenMMNetwork, check_network_force, make_network_force, network_module
from .units import conversion_factors

#: ``priors="model"``: the priors the model brings (:func:`resolve_priors`)
USE_MODEL_PRIORS = "model"


#: the note a run prints (and OpenMM-ML warns) when the model brings no priors and none are given
NO_PRIORS_NOTE = ("the model has no priors; running the network alone (no bonds hold the chain together unless the "
                  "network was trained without priors)")


def resolve_priors(model, priors, mol=None):
    """The prior terms a System gets, whatever form the caller names them in -- the one place that is decided:
    ``"model"`` (:data:`USE_MODEL_PRIORS`): the model's for ``mol`` (:meth:`LoadedModel.priors_for`: its priors,
    or its type tables applied to ``mol``; None for a bare network or no model); a path (str or os.PathLike): that
    prior file (:func:`flashschnet.priors.load_priors`); a :class:`~flashschnet.priors.PriorSet` as it is; None:
    none."""
    if isinstance(priors, str) and priors == USE_MODEL_PRIORS:
        return None if model is None else as_loaded(model).priors_for(mol)
    if isinstance(priors, (str, os.PathLike)):
        from ..priors import load_priors

        return load_priors(priors)
    return priors


def check_compatible(mol, model) -> None:
    """Raise :class:`InputError` if ``model`` cannot run on ``mol`` (bead types, mapping)."""
    want = model.config.get("cg_mapping")
    if want is not None and want != mol.mapping:
        raise InputError(
            f"{mol.source or 'the structure'}: mapped with the {mol.mapping!r} mapping, but the model expects "
            f"{want!r}; use --mapping {want}"
        )
    model.check_bead_types(mol.bead_types, mol.source or "the structure")


def build_system(mol, model=None, replicas: int = 1, priors=USE_MODEL_PRIORS, module=None,
                 network_force: str = "torch", torch_properties: Optional[Dict[str, str]] = None,
                 compress: str = "auto", dynamics=None) -> openmm.System:
    """An OpenMM System for ``replicas`` packed copies of the CG molecule ``mol``.

    The network runs the default path, as ``flashschnet-simulate`` does: an exact model of a fused backend at
    float32 gets float32 filter tables (``compress="auto"``; :func:`flashschnet.options.default_network`);
    ``compress="none"`` runs the model as given.

    Parameters
    ----------
    mol : flashschnet.cg.CGMolecule
        The CG molecule (bead types, masses in amu).
    model : LoadedModel, CGSchNet or None
        The model (:func:`flashschnet.load_model`; a bare CGSchNet brings no priors); None builds a priors-only
        System.
    replicas : int
        Number of packed, non-interacting copies.
    priors : "model", path, PriorSet or None
        Prior terms to add as native OpenMM forces (:func:`resolve_priors`); ``"model"`` (default) takes the
        model's (:meth:`LoadedModel.priors_for`: its priors, or its type tables applied to ``mol``).
    module : ScriptModule or OpenMMNetwork, optional
        A ready network module to run (it must be made for the same number of replicas):
        :func:`~flashschnet.openmm.force.network_module` for ``network_force="torch"``, an eager
        :class:`~flashschnet.openmm.force.OpenMMNetwork` for ``"python"``.
    network_force : str
        ``"torch"`` (an openmm-torch TorchForce, default) or ``"python"`` (an ``openmm.PythonForce``).
    torch_properties : dict, optional
        openmm-torch properties of the TorchForce (``network_force="torch"`` only), e.g.
        :data:`~flashschnet.openmm.force.CUDA_GRAPH_PROPERTIES` for CUDA-graph capture; default none.
    compress : str
        "auto" (default): float32 filter tables where :func:`flashschnet.options.resolve_compression` chooses them
        for the model's backend, dtype, weights and products (tabulated now: about 0.1 s, more on a process's first
        call; a model in memory is not cached, ``flashschnet.prepare_model(path)`` caches by file); "none": the
        model as given (the exact filter network of :func:`flashschnet.load_model`); "float32", "float16",
        "bfloat16": tables of that dtype. Ignored with ``module`` (the module runs what it was made from).
    dynamics : Dynamics, optional
        How the System will be integrated (:class:`flashschnet.openmm.dynamics.Dynamics`): with an inner model
        (multiple time stepping) its forces are added too, in the groups the integrator expects; default: single
        stepping.

    Returns
    -------
    openmm.System
        Non-periodic; the network (with an inner model: ``full - inner``) in force group 0, the priors (and the
        inner model) in group 1.
    """
    if replicas < 1:
        raise InputError(f"replicas must be at least 1, got {replicas}")
    if model is not None and module is None:
        check_compatible(mol, as_loaded(model))        # before tables are made for a model that cannot run here
        model = default_network(model, compress)
    system = openmm.System()
    masses = np.asarray(mol.masses, dtype=float)
    for _ in range(replicas):
        for m in masses:
            system.addParticle(float(m))
    add_model_forces(system, mol, model, replicas, priors=priors, module=module, network_force=network_force,
                     torch_properties=torch_properties, dynamics=dynamics)
    return system


def add_model_forces(system: openmm.System, mol, model=None, replicas: int = 1, priors=USE_MODEL_PRIORS,
                     module=None, network_force: str = "torch", network_group: int = NETWORK_GROUP,
                     prior_group: int = PRIOR_GROUP, torch_properties: Optional[Dict[str, str]] = None,
                     dynamics=None) -> None:
    """Add the network and prior forces for ``replicas`` packed copies of ``mol`` to an existing ``system``
    whose particles ``0 .. replicas * mol.n_beads - 1`` are those copies (replica-major).

    Parameters are those of :func:`build_system`; ``network_group`` / ``prior_group`` are the force groups (with
    an inner model, ``dynamics`` decides them: the integrator's).
    """
    mts = dynamics is not None and dynamics.mts
    if mts and (network_group, prior_group) != (NETWORK_GROUP, PRIOR_GROUP):
        raise InputError("multiple time stepping puts the network and the priors in force groups "
                         f"{NETWORK_GROUP} and {PRIOR_GROUP}; other groups cannot be given with an inner model")
    check_network_force(network_force, "network_force")
    if torch_properties and network_force != "torch":     # before anything is built, with a model or without
        raise InputError(f"torch_properties apply to the TorchForce only, not network_force={network_force!r}")
    model = None if model is None else as_loaded(model)
    if model is not None:
        check_compatible(mol, model)
        types = torch.as_tensor(mol.bead_types, dtype=torch.long)
        if mts:
            if module is None:
                module = (network_module(model, types, replicas) if network_force == "torch"
                          else OpenMMNetwork(model, types, replicas))
            if not isinstance(dynamics.inner, LoadedModel):
                dynamics.inner.check_applies_to(mol)
            dynamics.add_network(system, module, mol, replicas, network_force, torch_properties)
        else:
            system.addForce(make_network_force(network_force, model, types, replicas, network_group, module=module,
                                               properties=torch_properties))
    prior_set = resolve_priors(model, priors, mol)
    if prior_set is not None:
        from .priors import add_prior_forces

        prior_set.check_applies_to(mol)
        length_to_nm, energy_to_kj = conversion_factors(prior_set.units)
        add_prior_forces(system, prior_set, replicas=replicas, n_beads=mol.n_beads,
                         length_to_nm=length_to_nm, energy_to_kj=energy_to_kj, force_group=prior_group)


def replica_positions_nm(mol, replicas: int, positions_angstrom: Optional[np.ndarray] = None) -> np.ndarray:
    """Packed starting positions ``[R*N, 3]`` in nm: every replica at ``mol.positions`` (or the given
    ``[N, 3]`` / ``[R, N, 3]`` positions in Angstrom)."""
    pos = np.asarray(mol.positions if positions_angstrom is None else positions_angstrom, dtype=float)
    if pos.ndim == 2:
        pos = np.broadcast_to(pos, (replicas,) + pos.shape)
    nm_per_angstrom = (1.0 * openmm.unit.angstrom).value_in_unit(openmm.unit.nanometer)
    return np.ascontiguousarray(pos.reshape(-1, 3) * nm_per_angstrom)
