"""``flashschnet-distill``: an inner model for distilled multiple time stepping, from the full model's own dynamics.

1. The structure is cleaned and mapped as ``flashschnet-simulate`` does, and the model prepared the same way
   (:func:`flashschnet.options.prepare_model`: the network the run will use is the teacher).
2. ``replicas`` packed copies run the full model (priors + network, single stepping at ``dt_fs``) on OpenMM; after
   ``equilibration`` steps a frame is kept every ``interval`` steps until each replica has ``frames`` frames.
3. The network's forces at every frame, and at each frame displaced by Gaussian noise of ``perturbation``
   (Angstrom, per coordinate): the stiffness along the fast bonded coordinates (:mod:`flashschnet.distill.fit`).
4. The last ``holdout`` fraction of each replica's frames is held out; the inner model is fitted to the rest, and
   its force error measured on the held-out frames (and on the training frames) is stored in its ``meta`` and
   printed. An inner model with no terms (the priors alone inside) has error 1 on this scale.

The inner model is written whole or not at all (:func:`flashschnet.distill.save_inner`).
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, Optional

import numpy as np
import torch

from ..atomic import check_not_an_input
from ..distill import InnerModel, fit, force_error, save_inner, template_for
from ..errors import InputError, SimulationInstabilityError
from ..limits import check_finite, check_seed, check_threads
from ..options import ModelOptions, prepare_model
from ..tablecache import file_sha256


@dataclass(kw_only=True)
class DistillSettings:
    """What ``flashschnet-distill`` does (units in the names; lengths of the model, Angstrom for mlcg models)."""

    model: str
    pdb: str
    out: str
    frames: int = 400                    # per replica, training and held-out together
    interval: int = 25                   # steps between frames
    equilibration: int = 1000            # steps before the first frame
    replicas: int = 4
    dt_fs: float = 4.0
    temperature_K: float = 300.0
    friction_per_ps: float = 1.0
    perturbation: float = 0.02           # Angstrom, per coordinate
    weight: float = 10.0                 # of the perturbed frames' force changes
    holdout: float = 0.2                 # fraction of each replica's frames (the last ones) held out
    bond_degree: int = 2
    angle_degree: int = 2
    harmonics: int = 3
    seed: int = 1
    platform: str = "CPU"
    threads: Optional[int] = None
    mapping: Optional[str] = None
    options: ModelOptions = field(default_factory=ModelOptions)

    def validate(self) -> None:
        for name in ("frames", "interval", "replicas"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if int(self.equilibration) < 0:
            raise InputError(f"--equilibration must be >= 0, got {self.equilibration}")
        check_finite(self.dt_fs, "--dt", "fs", positive=True)
        check_finite(self.temperature_K, "--temperature", "K", positive=True)
        check_finite(self.friction_per_ps, "--friction", "1/ps", nonnegative=True)
        check_finite(self.perturbation, "--perturbation", "A", nonnegative=True)
        check_finite(self.weight, "--weight", "", nonnegative=True)
        if not 0.0 < self.holdout < 1.0:
            raise InputError(f"--holdout must be between 0 and 1 (a fraction of the frames), got {self.holdout}")
        if int(self.frames * (1.0 - self.holdout)) < 2 or int(round(self.frames * self.holdout)) < 1:
            raise InputError(f"--frames {self.frames} with --holdout {self.holdout:g} leaves too few frames to fit "
                             "or to test; give more frames")
        for name in ("bond_degree", "angle_degree", "harmonics"):
            if not 0 <= int(getattr(self, name)) <= 6:
                raise InputError(f"--{name.replace('_', '-')} must be between 0 and 6, got {getattr(self, name)}")
        check_seed(self.seed, "--seed")
        check_threads(self.threads, "--threads")
        self.options.validate()
        check_not_an_input(self.out, "--out", [("--model (the teacher)", self.model), ("PDB", self.pdb)])


def sample_frames(system, mol, s: DistillSettings, echo: Callable[[str], None]) -> np.ndarray:
    """Frames [replicas, frames, N, 3] (nm) of the full model's single-step Langevin dynamics."""
    import openmm
    import openmm.unit as u

    from .dynamics import Dynamics
    from .system import replica_positions_nm

    R, N = s.replicas, mol.n_beads
    integrator = Dynamics(s.dt_fs, s.friction_per_ps).integrator(s.temperature_K, s.seed)
    props = {"Threads": str(int(s.threads))} if s.platform == "CPU" and s.threads else {}
    context = openmm.Context(system, integrator, openmm.Platform.getPlatformByName(s.platform), props)
    context.setPositions(replica_positions_nm(mol, R))
    openmm.LocalEnergyMinimizer.minimize(context, 10.0, 200)
    context.setVelocitiesToTemperature(s.temperature_K * u.kelvin, int(s.seed))
    t0 = time.perf_counter()
    integrator.step(int(s.equilibration))
    frames = np.empty((s.frames, R * N, 3))
    for k in range(s.frames):
        integrator.step(int(s.interval))
        frames[k] = context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
        if not np.isfinite(frames[k]).all():
            raise SimulationInstabilityError(f"the full model blew up while sampling frames (frame {k}); check the "
                                             "model and the structure with flashschnet-simulate first, or lower --dt")
    steps = s.equilibration + s.frames * s.interval
    echo(f"sampled {s.frames} frames x {R} replicas ({steps} steps of {s.dt_fs:g} fs, "
         f"{steps * s.dt_fs * 1e-3:.4g} ps each) in {time.perf_counter() - t0:.0f} s")
    return frames.reshape(s.frames, R, N, 3).transpose(1, 0, 2, 3)


def network_forces(model, mol, positions: np.ndarray, chunk: int = 16) -> np.ndarray:
    """The network's forces (model units) at positions [F, N, 3] in the model's length unit."""
    types = torch.as_tensor(mol.bead_types, dtype=torch.long)
    dtype = next(model.network.parameters()).dtype
    out = []
    with torch.no_grad():
        for i in range(0, len(positions), chunk):
            _, f = model.network.energy_forces(torch.as_tensor(positions[i:i + chunk], dtype=dtype), types)
            out.append(f.detach().double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0,) + positions.shape[1:])


def distill(s: DistillSettings, echo: Callable[[str], None] = print) -> InnerModel:
    """Sample, fit, measure and write an inner model (see the module docstring); returns it."""
    from .cleaning import clean_pdb
    from .system import build_system
    from .units import conversion_factors

    s.validate()
    if s.threads:
        torch.set_num_threads(int(s.threads))
    structure = clean_pdb(s.pdb)
    for note in structure.notes:
        echo(f"note: {note}")
    model = prepare_model(s.model, s.options, "cpu")
    mapping = s.mapping or model.config.get("cg_mapping") or "5bead"
    mol = structure.molecule(mapping)
    priors = model.priors_for(mol)
    if priors is None:
        raise InputError(f"{s.model}: the model brings no priors for this structure; the inner model's terms sit on "
                         "the priors' bonds, angles and dihedrals")
    system = build_system(mol, model, replicas=s.replicas, priors=priors)
    frames_nm = sample_frames(system, mol, s, echo)
    length_to_nm, _ = conversion_factors(model.network.units)
    frames = frames_nm / float(length_to_nm)                              # [R, F, N, 3] model length unit
    n_test = max(1, int(round(s.frames * s.holdout)))
    train = frames[:, :-n_test].reshape(-1, mol.n_beads, 3)
    test = frames[:, -n_test:].reshape(-1, mol.n_beads, 3)
    rng = np.random.default_rng([int(s.seed), 0xD157])
    perturbed = train + rng.normal(scale=s.perturbation, size=train.shape) if s.perturbation > 0 else None
    t0 = time.perf_counter()
    f_train, f_test = network_forces(model, mol, train), network_forces(model, mol, test)
    f_pert = network_forces(model, mol, perturbed) if perturbed is not None else None
    teacher = {"path": os.path.abspath(s.model), "sha256": file_sha256(s.model), "options": asdict(s.options)}
    template = template_for(priors, train, mol.n_beads, s.bond_degree, s.angle_degree, s.harmonics,
                            units=dict(model.network.units), fingerprint=mol.fingerprint())
    inner = fit(template, train, f_train, perturbed, f_pert, weight=s.weight if perturbed is not None else 0.0)
    held_out, trained = force_error(inner, test, f_test), force_error(inner, train, f_train)
    settings = {k: v for k, v in asdict(s).items() if k not in ("options", "out", "threads")}
    inner.meta.update(teacher=teacher, pdb=os.path.abspath(s.pdb), settings=settings,
                      frames={"train": int(len(train)), "held_out": int(len(test))},
                      held_out=held_out, train=trained, fit_s=time.perf_counter() - t0)
    save_inner(inner, s.out)
    echo(f"inner model: {inner.describe()}; held-out force error {held_out['relative_rms_error']:.3f} of the "
         f"network's RMS force {held_out['rms_force']:.3g} (1 = the priors alone; training frames "
         f"{trained['relative_rms_error']:.3f})")
    return inner


def summary(inner: InnerModel, out: str) -> str:
    e = inner.meta.get("held_out", {}).get("relative_rms_error", float("nan"))
    return (f"done: {out} ({inner.n_parameters} parameters; held-out force error {e:.3f}); run it with "
            f"flashschnet-simulate ... --mts {out} --outer-dt FS")


def settings_dict(s: DistillSettings) -> Dict[str, object]:
    return asdict(s)
