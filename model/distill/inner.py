"""The distilled inner model of multiple time stepping: per-tuple bonded terms fitted to a network's forces.

Distilled multiple time stepping (DMTS; Cattin et al., J. Phys. Chem. Lett. 2026) evaluates a cheap model every
inner step and the costly network's difference from it once per outer step. Here the cheap model is classical,
so that OpenMM evaluates it as native forces (:mod:`flashschnet.openmm.inner_forces`): on a CPU a second,
small CGSchNet costs at least the fixed overhead of one network call (~0.9 ms for trp-cage, a third of the full
model's step), which a classical model avoids. Its terms, on the bonds, angles and dihedrals of the model's own
priors (the molecule's covalent graph):

=============  =========================================================  ==========================================
term           energy (model units: Angstrom, kcal/mol)                    parameters, per tuple
=============  =========================================================  ==========================================
bonds [nb, 2]  ``sum_k c_k (r - x0)^k``, k = 1 .. degree                   ``bond_x0`` [nb] (A), ``bond_c`` [nb, deg]
angles [na,3]  ``sum_k c_k (cos(theta) - x0)^k``                           ``angle_x0`` [na], ``angle_c`` [na, deg]
dihedrals      ``sum_n a_n cos(n phi) + b_n sin(n phi)``, n = 1 .. K        ``dihedral_cos`` / ``dihedral_sin`` [nd, K]
=============  =========================================================  ==========================================

``x0`` is each tuple's mean over the distillation frames, so the terms are expansions about where the network
was sampled. The energy is linear in the coefficients, so distillation is a linear least-squares problem
(:mod:`flashschnet.distill.fit`). Why this form and not another (cross terms, pair terms, a small network):
measured in docs/sampling.md.

This module never imports openmm.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..errors import InputError
from ..priors.geometry import compute_angle_cos, compute_distances, compute_torsions

FORMAT = "flashschnet-inner-v1"

#: the prior kinds whose tuples the inner model's terms use
TUPLE_KINDS = {"bonds": "harmonic_bond", "angles": "harmonic_angle_cos", "dihedrals": "dihedral_fourier"}


@dataclass
class InnerModel:
    """A distilled inner model (see the module docstring); float64 parameters in ``units``.

    Attributes
    ----------
    bonds, angles, dihedrals : torch.LongTensor, [nb, 2], [na, 3], [nd, 4]
        0-based bead indices of one replica.
    bond_x0 : Tensor [nb]; bond_c : Tensor [nb, degree]
    angle_x0 : Tensor [na]; angle_c : Tensor [na, degree]
    dihedral_cos, dihedral_sin : Tensor [nd, K]
    n_beads : int
    units : dict
        The teacher network's units (``{"length": "angstrom", "energy": "kcal/mol"}`` for mlcg models).
    fingerprint : (str, tuple of int) or None
        ``(mapping, bead types)`` of the molecule it was distilled on; it applies to that molecule only.
    meta : dict
        Provenance and measurements (the teacher's path and sha256, frames, held-out force error, ...).
    """

    bonds: torch.Tensor
    bond_x0: torch.Tensor
    bond_c: torch.Tensor
    angles: torch.Tensor
    angle_x0: torch.Tensor
    angle_c: torch.Tensor
    dihedrals: torch.Tensor
    dihedral_cos: torch.Tensor
    dihedral_sin: torch.Tensor
    n_beads: int
    units: Dict[str, str] = field(default_factory=lambda: {"length": "angstrom", "energy": "kcal/mol"})
    fingerprint: Optional[Tuple[str, Tuple[int, ...]]] = None
    meta: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.n_beads = int(self.n_beads)
        for name, order in (("bonds", 2), ("angles", 3), ("dihedrals", 4)):
            idx = torch.as_tensor(getattr(self, name), dtype=torch.long).reshape(-1, order)
            if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.n_beads):
                raise InputError(f"inner model: {name} refer to beads outside 0..{self.n_beads - 1}")
            setattr(self, name, idx)
        for name in ("bond_x0", "bond_c", "angle_x0", "angle_c", "dihedral_cos", "dihedral_sin"):
            setattr(self, name, torch.as_tensor(getattr(self, name), dtype=torch.float64))
        shapes = {"bond_x0": (len(self.bonds),), "angle_x0": (len(self.angles),),
                  "bond_c": (len(self.bonds), -1), "angle_c": (len(self.angles), -1),
                  "dihedral_cos": (len(self.dihedrals), -1), "dihedral_sin": (len(self.dihedrals), -1)}
        for name, shape in shapes.items():
            t = getattr(self, name)
            if t.dim() != len(shape) or t.shape[0] != shape[0]:
                raise InputError(f"inner model: {name} has shape {tuple(t.shape)}, expected [{shape[0]}"
                                 + (", ...]" if len(shape) == 2 else "]"))
        if self.dihedral_cos.shape != self.dihedral_sin.shape:
            raise InputError("inner model: dihedral_cos and dihedral_sin differ in shape")
        if self.fingerprint is not None:
            self.fingerprint = (str(self.fingerprint[0]), tuple(int(t) for t in self.fingerprint[1]))

    # -------------------------------------------------------------------------------------------- sizes
    @property
    def bond_degree(self) -> int:
        return int(self.bond_c.shape[1])

    @property
    def angle_degree(self) -> int:
        return int(self.angle_c.shape[1])

    @property
    def harmonics(self) -> int:
        return int(self.dihedral_cos.shape[1])

    @property
    def n_parameters(self) -> int:
        return self.bond_c.numel() + self.angle_c.numel() + 2 * self.dihedral_cos.numel()

    def describe(self) -> str:
        return (f"{len(self.bonds)} bonds (degree {self.bond_degree}), {len(self.angles)} angles (degree "
                f"{self.angle_degree}), {len(self.dihedrals)} dihedrals ({self.harmonics} harmonics): "
                f"{self.n_parameters} parameters")

    # -------------------------------------------------------------------------------------------- energy
    def coordinates(self, pos: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(r - x0, cos(theta) - x0, phi)`` of every tuple, each [R, n], for positions [R, N, 3] (Angstrom)."""
        dr = compute_distances(pos, self.bonds) - self.bond_x0.to(pos.dtype)
        dc = compute_angle_cos(pos, self.angles) - self.angle_x0.to(pos.dtype)
        return dr, dc, compute_torsions(pos, self.dihedrals)

    def energy(self, pos: torch.Tensor) -> torch.Tensor:
        """Energies [R] (model units) of positions [R, N, 3] (differentiable; the reference the OpenMM forces are
        tested against)."""
        dr, dc, phi = self.coordinates(pos)
        e = _poly(dr, self.bond_c.to(pos.dtype)).sum(1) + _poly(dc, self.angle_c.to(pos.dtype)).sum(1)
        n = torch.arange(1, self.harmonics + 1, dtype=pos.dtype)
        e = e + (torch.cos(phi[..., None] * n) * self.dihedral_cos.to(pos.dtype)
                 + torch.sin(phi[..., None] * n) * self.dihedral_sin.to(pos.dtype)).sum((1, 2))
        return e

    def energy_forces(self, pos: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(energies [R], forces [R, N, 3])`` in model units, by autograd."""
        pos = pos.detach().requires_grad_(True)
        e = self.energy(pos)
        (g,) = torch.autograd.grad(e.sum(), pos)
        return e.detach(), -g

    # -------------------------------------------------------------------------------------------- checks
    def check_applies_to(self, mol, source: str = "the inner model") -> None:
        """One-line :class:`InputError` unless this model was distilled on ``mol``'s beads."""
        if mol.n_beads != self.n_beads:
            raise InputError(f"{source} was distilled on {self.n_beads} beads; this structure maps to {mol.n_beads}: "
                             "distil it on this protein (flashschnet-distill MODEL PDB)")
        if self.fingerprint is not None:
            here = (str(mol.mapping), tuple(int(t) for t in mol.bead_types))
            if here != self.fingerprint:
                raise InputError(f"{source} was distilled on another molecule ({self.fingerprint[0]} mapping, other "
                                 "bead types): distil it on this protein (flashschnet-distill MODEL PDB)")

    # -------------------------------------------------------------------------------------------- files
    def to_dict(self) -> Dict[str, Any]:
        d = {name: getattr(self, name) for name in ("bonds", "bond_x0", "bond_c", "angles", "angle_x0", "angle_c",
                                                     "dihedrals", "dihedral_cos", "dihedral_sin")}
        d.update(format=FORMAT, n_beads=self.n_beads, units=dict(self.units), meta=dict(self.meta),
                 fingerprint=None if self.fingerprint is None else [self.fingerprint[0], list(self.fingerprint[1])])
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "InnerModel":
        if d.get("format") != FORMAT:
            raise InputError(f"not an inner model of this version (format {d.get('format')!r}, expected {FORMAT!r})")
        fp = d.get("fingerprint")
        kw = {name: d[name] for name in ("bonds", "bond_x0", "bond_c", "angles", "angle_x0", "angle_c", "dihedrals",
                                         "dihedral_cos", "dihedral_sin")}
        return cls(**kw, n_beads=int(d["n_beads"]), units=dict(d.get("units") or {}), meta=dict(d.get("meta") or {}),
                   fingerprint=None if fp is None else (fp[0], tuple(fp[1])))


def _poly(d: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``sum_k c[:, k-1] d^k`` [R, n] for ``d`` [R, n], ``c`` [n, degree]."""
    out = torch.zeros_like(d)
    for k in range(c.shape[1], 0, -1):          # Horner: (((c_deg d + c_deg-1) d + ...) + c_1) d
        out = (out + c[:, k - 1]) * d
    return out


def tuples_of(priors) -> Dict[str, torch.Tensor]:
    """The bonds, angles and dihedrals of a prior set (its bonded terms' tuples, concatenated by kind):
    ``{"bonds": [nb, 2], "angles": [na, 3], "dihedrals": [nd, 4]}``."""
    out: Dict[str, torch.Tensor] = {}
    for name, kind in TUPLE_KINDS.items():
        order = {"bonds": 2, "angles": 3, "dihedrals": 4}[name]
        parts: List[torch.Tensor] = [t.indices for t in priors.terms if t.kind == kind and t.n_tuples]
        out[name] = torch.cat(parts) if parts else torch.zeros(0, order, dtype=torch.long)
    return out


def zero_model(tuples: Dict[str, torch.Tensor], x0: Sequence[torch.Tensor], n_beads: int, bond_degree: int,
               angle_degree: int, harmonics: int, **kw) -> InnerModel:
    """An inner model on ``tuples`` with all coefficients zero (the fit's template)."""
    nb, na, nd = len(tuples["bonds"]), len(tuples["angles"]), len(tuples["dihedrals"])
    z = lambda *s: torch.zeros(*s, dtype=torch.float64)  # noqa: E731
    return InnerModel(bonds=tuples["bonds"], bond_x0=x0[0], bond_c=z(nb, bond_degree), angles=tuples["angles"],
                      angle_x0=x0[1], angle_c=z(na, angle_degree), dihedrals=tuples["dihedrals"],
                      dihedral_cos=z(nd, harmonics), dihedral_sin=z(nd, harmonics), n_beads=n_beads, **kw)
