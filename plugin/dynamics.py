"""The dynamics of a CG System in one object: which forces, in which force groups, under which integrator.

:class:`Dynamics` is built in one place (:func:`flashschnet.openmm.cg_setup.load_inputs`, from the run settings) and
used alike by plain runs (:func:`flashschnet.openmm.runner.run_job`), parallel tempering and Dask ensembles (the
walker blocks of :mod:`flashschnet.openmm.ensemble.block`):

* **single stepping** (no inner model): the network in force group :data:`NETWORK_GROUP` and the priors in
  :data:`PRIOR_GROUP`, both every step, under OpenMM's ``LangevinMiddleIntegrator`` at one temperature or its
  per-particle twin (:func:`~flashschnet.openmm.integrators.tempering_integrator`) for a ladder of temperatures;
* **distilled multiple time stepping** (DMTS; Cattin et al., J. Phys. Chem. Lett. 2026): an *inner model*, cheap
  and distilled from the network (``flashschnet-distill``, :mod:`flashschnet.distill`), takes the fast part of the
  network's forces. The inner group (:data:`INNER_GROUP`, the priors' group) holds the priors and the inner model
  and is evaluated every inner step ``h``; the outer group (:data:`OUTER_GROUP`, the network's group) holds
  ``full - inner`` and is evaluated once per outer step ``k h``
  (:func:`~flashschnet.openmm.integrators.mts_integrator`). The potential energy OpenMM reports is still priors +
  network: the inner model enters once with each sign.

An inner model is either a distilled classical model (:class:`flashschnet.distill.InnerModel`: native OpenMM
forces, :func:`~flashschnet.openmm.inner_forces.add_inner_forces`; ``full - inner`` is then the network's
TorchForce plus the inner forces with the opposite sign) or any CGSchNet model (a second TorchForce in the inner
group, and the outer force one module computing ``full - inner``: :class:`~flashschnet.openmm.force.OuterNetwork`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import openmm
import openmm.unit as u
import torch

from ..errors import InputError
from ..loaded import LoadedModel
from .force import FORCE_NAME, OpenMMNetwork, OuterNetwork, make_network_force
from .integrators import mts_integrator, tempering_integrator

#: single stepping: the network's group and the priors' group (``getState(groups=...)`` splits energies)
NETWORK_GROUP = 0
PRIOR_GROUP = 1
#: multiple time stepping: the outer group (full - inner) is the network's, the inner one (priors + inner) the priors'
OUTER_GROUP = NETWORK_GROUP
INNER_GROUP = PRIOR_GROUP


@dataclass(frozen=True)
class Dynamics:
    """How a CG System is integrated.

    Attributes
    ----------
    step_fs : float
        The integrator's step, fs: the time step of single stepping, the outer step of multiple time stepping (a
        run's step count, report interval and times count these steps).
    friction_per_ps : float
        Langevin friction, 1/ps.
    inner_steps : int
        Inner steps per step (k); 1 without an inner model.
    inner : InnerModel, LoadedModel or None
        The inner model of multiple time stepping (None: single stepping).
    """

    step_fs: float
    friction_per_ps: float
    inner_steps: int = 1
    inner: Any = None

    def __post_init__(self):
        if self.inner is None and self.inner_steps != 1:
            raise InputError(f"{self.inner_steps} inner steps per step need an inner model (--mts)")
        if int(self.inner_steps) < 1:
            raise InputError(f"inner steps per step must be >= 1, got {self.inner_steps}")

    @property
    def mts(self) -> bool:
        """True: multiple time stepping with an inner model."""
        return self.inner is not None

    @property
    def inner_step_fs(self) -> float:
        """The inner time step, fs (the step itself when single stepping)."""
        return self.step_fs / self.inner_steps

    @property
    def step_ps(self) -> float:
        return self.step_fs * 1e-3

    def describe(self) -> str:
        """One line for a run's notes."""
        if not self.mts:
            return f"single stepping, {self.step_fs:g} fs"
        kind = "distilled classical model" if not isinstance(self.inner, LoadedModel) else "network"
        return (f"multiple time stepping: network - inner every {self.step_fs:g} fs, priors + inner model "
                f"({kind}) every {self.inner_step_fs:g} fs ({self.inner_steps} inner steps)")

    # -- forces ------------------------------------------------------------------------------------------------
    def add_network(self, system: openmm.System, module: Union[torch.jit.ScriptModule, OpenMMNetwork], mol,
                    replicas: int, network_force: str = "torch",
                    torch_properties: Optional[Dict[str, str]] = None) -> None:
        """Add the network (``module``: the full model, scripted for a TorchForce, eager for a PythonForce) and,
        with an inner model, the inner model's forces, to ``system`` (``replicas`` packed copies of ``mol``)."""
        if not self.mts:
            _add_module(system, module, network_force, NETWORK_GROUP, torch_properties)
            return
        if isinstance(self.inner, LoadedModel):
            types = torch.as_tensor(mol.bead_types, dtype=torch.long)
            inner = OpenMMNetwork(self.inner, types, replicas)
            outer = OuterNetwork(module, inner)
            if network_force == "torch":
                outer, inner = torch.jit.script(outer), torch.jit.script(inner)
            _add_module(system, outer, network_force, OUTER_GROUP, torch_properties, f"{FORCE_NAME} minus inner model")
            _add_module(system, inner, network_force, INNER_GROUP, torch_properties, f"{FORCE_NAME} inner model")
            return
        from .inner_forces import add_inner_forces

        _add_module(system, module, network_force, OUTER_GROUP, torch_properties)
        add_inner_forces(system, self.inner, replicas, mol.n_beads, group=INNER_GROUP, sign=1.0)
        add_inner_forces(system, self.inner, replicas, mol.n_beads, group=OUTER_GROUP, sign=-1.0)

    # -- integrator --------------------------------------------------------------------------------------------
    def integrator(self, temperature_K: Union[float, Sequence[float]], seed: int,
                   particles: Optional[int] = None) -> openmm.Integrator:
        """The integrator: at one temperature (a float; ``particles`` needed only with an inner model) or one per
        particle (a sequence: parallel tempering). Single stepping at one temperature is OpenMM's
        ``LangevinMiddleIntegrator`` (as runs have always used: their checkpoints resume bitwise)."""
        dt_ps = self.step_ps
        if np.ndim(temperature_K) == 0:
            if not self.mts:
                integrator = openmm.LangevinMiddleIntegrator(float(temperature_K) * u.kelvin,
                                                             self.friction_per_ps / u.picosecond,
                                                             dt_ps * u.picosecond)
                integrator.setRandomNumberSeed(int(seed))
                return integrator
            if particles is None:
                raise ValueError("particles is needed for the multiple-time-step integrator at one temperature")
            temperature_K = [float(temperature_K)] * int(particles)
        if not self.mts:
            return tempering_integrator(dt_ps, self.friction_per_ps, temperature_K, seed)
        return mts_integrator(dt_ps, self.inner_steps, self.friction_per_ps, temperature_K, seed,
                              outer_group=OUTER_GROUP, inner_group=INNER_GROUP)


def _add_module(system, module, network_force: str, group: int, torch_properties, name: str = FORCE_NAME) -> None:
    system.addForce(make_network_force(network_force, None, None, force_group=group, module=module,
                                       properties=torch_properties, name=name))


def load_inner_for(path: str, mol):
    """The inner model of ``--mts`` (:func:`flashschnet.distill.load_inner`), checked against the molecule (one
    line naming the file otherwise)."""
    from ..distill import load_inner

    inner = load_inner(path)
    inner.check_applies_to(mol, source=str(path))
    return inner


#: the option that accepts an inner model distilled from another model file
ANY_TEACHER_FLAG = "--mts-any-teacher"


def check_teacher(inner, inner_path: str, model_path: str, accept: bool = False) -> Optional[str]:
    """Whether the inner model ``inner`` (of ``--mts inner_path``) was distilled from the bytes of ``--model
    model_path`` (the teacher's sha256 ``flashschnet-distill`` records): None when it was; when it was not (or
    records no teacher), an :class:`InputError` -- its forces would be subtracted from another network's, and the
    outer step would carry the difference -- or, with ``accept`` (:data:`ANY_TEACHER_FLAG`), the note to print."""
    from ..tablecache import file_sha256

    teacher = (getattr(inner, "meta", None) or {}).get("teacher") or {}
    want = teacher.get("sha256")
    if want is not None and want == file_sha256(model_path):
        return None
    told = (f"was distilled from {teacher.get('path') or 'another model file'} (sha256 {want[:12]}), not from "
            f"--model {model_path}" if want else "records no teacher model (not made by flashschnet-distill?)")
    if accept:
        return f"--mts {inner_path} {told}; used anyway ({ANY_TEACHER_FLAG})"
    raise InputError(f"--mts {inner_path} {told}; distill an inner model from this model (flashschnet-distill) or "
                     f"pass {ANY_TEACHER_FLAG} to use it anyway")
