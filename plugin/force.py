"""The network as an openmm-torch ``TorchForce``.

:class:`OpenMMNetwork` is the TorchScript module OpenMM runs: it takes OpenMM's positions ``[R*N, 3]`` (nm)
of R packed replicas, calls the network once for all replicas with the unit factors of
:func:`flashschnet.openmm.units.conversion_factors` (nm -> the model's length, the model's energy -> kJ/mol;
the fused backends apply them inside the op, the triton engine in its first and last kernels), and returns the
total energy (kJ/mol) and the forces ``[R*N, 3]`` (kJ/mol/nm), so the force is created with
``setOutputsForces(True)`` and OpenMM does no second autograd pass.

``import flashschnet`` must happen before a TorchForce holding custom flashschnet ops is created or a
serialized System is loaded (the System XML carries the TorchScript, not the ops); the reference backend
uses only built-in ops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Tuple

import torch
from torch import nn

import openmm  # noqa: F401  (import order: torch first, then openmm/openmmtorch)

from ..errors import InputError
from ..loaded import as_loaded
from ..names import NETWORK_FORCES
from .units import conversion_factors

if TYPE_CHECKING:  # openmm-torch is imported lazily (see create_torch_force)
    import openmmtorch


class OpenMMNetwork(nn.Module):
    """TorchScript-able wrapper: OpenMM positions (nm) -> (energy kJ/mol, forces kJ/mol/nm).

    Parameters
    ----------
    model : LoadedModel or CGSchNet
        The network (a LoadedModel's ``network``), in the dtype it should run in (float32 or float64).
    bead_types : Tensor, [N], int64
        Bead types of one replica.
    replicas : int
        R, the number of packed copies; OpenMM's particles are ``r * N + i``.
    """

    def __init__(self, model: nn.Module, bead_types: torch.Tensor, replicas: int = 1):
        super().__init__()
        model = as_loaded(model).network
        length_to_nm, energy_to_kj = conversion_factors(model.units)
        self.model = model
        # on the network's device: openmm-torch moves a TorchForce's whole module to the Context's device, but a
        # PythonForce and the log's per-replica energies call this module where it was made (a CUDA network
        # with CPU bead types failed there: the first GPU run, 2026-12-04)
        device = next(model.parameters()).device
        self.register_buffer("bead_types", torch.as_tensor(bead_types, dtype=torch.long).clone().to(device))
        self.replicas = int(replicas)
        self.n_beads = int(self.bead_types.shape[0])
        self.nm_to_model = 1.0 / length_to_nm
        self.energy_to_kj = energy_to_kj
        self.force_to_openmm = energy_to_kj / length_to_nm
        self.dtype = next(model.parameters()).dtype

    def forward(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        pos = positions.to(self.dtype).reshape(self.replicas, self.n_beads, 3)
        _, forces, total = self.model.energy_forces_scaled(pos, self.bead_types, self.nm_to_model,
                                                           self.energy_to_kj, self.force_to_openmm)
        return total.to(positions.dtype), forces.reshape(-1, 3).to(positions.dtype)

    @torch.jit.export
    def replica_energies(self, positions: torch.Tensor) -> torch.Tensor:
        """Per-replica network energies [R] in kJ/mol (float64) for positions [R*N, 3] in nm."""
        pos = positions.to(self.dtype).reshape(self.replicas, self.n_beads, 3) * self.nm_to_model
        energy, _ = self.model.energy_forces(pos, self.bead_types)
        return energy.to(torch.float64) * self.energy_to_kj


class OuterNetwork(nn.Module):
    """TorchScript-able: the outer force of distilled multiple time stepping, ``full - inner`` as one force.

    Both networks see the same OpenMM positions ``[R*N, 3]`` (nm) and return (energy kJ/mol, forces kJ/mol/nm)
    of the R packed replicas (:class:`OpenMMNetwork`); this module returns their difference, so OpenMM evaluates
    it once per outer step (:mod:`flashschnet.openmm.dynamics`). Where ``inner`` computes the same function as
    ``full`` the difference is exactly zero, and the run repeats single stepping.
    """

    def __init__(self, full: nn.Module, inner: nn.Module):
        super().__init__()
        if full.replicas != inner.replicas or full.n_beads != inner.n_beads:
            raise ValueError(f"the full ({full.replicas} x {full.n_beads}) and inner ({inner.replicas} x "
                             f"{inner.n_beads}) networks must run the same packed replicas")
        self.full = full
        self.inner = inner

    def forward(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        e_full, f_full = self.full(positions)
        e_inner, f_inner = self.inner(positions)
        return e_full - e_inner, f_full - f_inner


def network_module(model, bead_types, replicas: int = 1) -> torch.jit.ScriptModule:
    """Script :class:`OpenMMNetwork` for ``model``. One module can serve several Systems (replica
    Contexts sharing one model)."""
    return torch.jit.script(OpenMMNetwork(model, bead_types, replicas))


def _import_openmmtorch():
    """``import openmmtorch`` without the root-logger warning its ``import simtk.openmm`` prints (openmm-torch
    1.5 still imports the deprecated alias; the warning is about that package, not the user's script)."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        import openmmtorch
    finally:
        root.setLevel(level)
    return openmmtorch


#: openmm-torch properties that make the TorchForce capture the module as a CUDA graph (CUDA platform only;
#: ``CUDAGraphWarmupSteps`` eager calls first): the ``properties`` of :func:`create_torch_force`
CUDA_GRAPH_PROPERTIES = {"useCUDAGraphs": "true", "CUDAGraphWarmupSteps": "3"}


#: the network force's name in a System (:meth:`openmm.Force.getName`)
FORCE_NAME = "CGSchNet"


def create_torch_force(module: torch.jit.ScriptModule, force_group: int = 0,
                       properties: Optional[Dict[str, str]] = None, name: str = FORCE_NAME) -> "openmmtorch.TorchForce":
    """A ``TorchForce`` running ``module`` (from :func:`network_module`), with forces returned by the
    module (``setOutputsForces(True)``). openmm-torch is imported here, not at module import, so the rest of
    :mod:`flashschnet.openmm` (e.g. the PythonForce path) works where openmm-torch is absent.

    ``properties``: openmm-torch ``TorchForce`` properties to set (``setProperty``), e.g.
    :data:`CUDA_GRAPH_PROPERTIES`; default none (openmm-torch's defaults: no CUDA graph). ``name``: the force's
    name in the System."""
    openmmtorch = _import_openmmtorch()
    force = openmmtorch.TorchForce(module)
    for key, value in (properties or {}).items():
        force.setProperty(str(key), str(value))
    force.setOutputsForces(True)
    force.setForceGroup(force_group)
    force.setName(name)
    return force


def create_python_force(model, bead_types, replicas: int = 1, force_group: int = 0,
                        module: Optional["OpenMMNetwork"] = None, name: str = FORCE_NAME) -> "openmm.PythonForce":
    """The network as an ``openmm.PythonForce`` (no openmm-torch needed; e.g. with a PyTorch that
    openmm-torch does not support). Each evaluation copies positions and forces between OpenMM and PyTorch
    in Python, so it is slower than a TorchForce for small systems; the numbers are the same. ``module``: a
    ready (eager) :class:`OpenMMNetwork` to run, made for the same replicas (default: one for ``model``)."""
    if module is None:
        module = OpenMMNetwork(model, bead_types, replicas)
    device = next(module.parameters()).device
    nm = openmm.unit.nanometer

    def compute(state):
        pos = torch.from_numpy(state.getPositions(asNumpy=True).value_in_unit(nm)).to(device)
        energy, forces = module(pos)
        return float(energy), forces.detach().cpu().double().numpy()

    force = openmm.PythonForce(compute)
    force.setForceGroup(force_group)
    force.setName(name)
    return force


def check_network_force(kind, name: str = "kind") -> None:
    """One-line :class:`InputError` unless ``kind`` is a way OpenMM calls the network (:data:`NETWORK_FORCES`: an
    openmm-torch TorchForce or an openmm.PythonForce); ``name``: how the caller spells the option."""
    if kind not in NETWORK_FORCES:
        raise InputError(f"{name} must be {' or '.join(NETWORK_FORCES)}, got {kind!r}")


def make_network_force(kind: str, model, bead_types, replicas: int = 1, force_group: int = 0, module=None,
                       properties: Optional[Dict[str, str]] = None, name: str = FORCE_NAME):
    """The network over ``replicas`` packed copies as the OpenMM force ``kind`` (:data:`NETWORK_FORCES`): an
    openmm-torch TorchForce (``"torch"``, TorchScript; ``module`` a ready :func:`network_module`, ``properties``
    its openmm-torch properties) or an ``openmm.PythonForce`` calling the model from Python (``"python"``;
    ``module`` a ready eager :class:`OpenMMNetwork`), named ``name`` in the System. The one maker of a network
    force (also the multiple-time-step outer and inner ones, :mod:`flashschnet.openmm.dynamics`); a System gets
    the model's forces from :func:`flashschnet.openmm.system.add_model_forces`."""
    check_network_force(kind)
    if properties and kind != "torch":
        raise InputError(f"torch_properties apply to the TorchForce only, not network_force={kind!r}")
    if kind == "python":
        return create_python_force(model, bead_types, replicas, force_group, module=module, name=name)
    if module is None:
        module = network_module(model, bead_types, replicas)
    return create_torch_force(module, force_group, properties=properties, name=name)
