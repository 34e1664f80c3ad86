"""A distilled inner model (:class:`flashschnet.distill.InnerModel`) as native OpenMM forces.

=============  =========================  =============================================================
term           OpenMM force               energy (OpenMM units; ``s`` = model lengths per nm, ``E`` = kJ/mol
                                          per model energy unit)
=============  =========================  =============================================================
bonds          ``CustomBondForce``        ``E*sign*(c1*d + c2*d^2 + ...)``, ``d = s*r - x0``
angles         ``CustomAngleForce``       ``E*sign*(c1*d + ...)``, ``d = cos(theta) - x0``
dihedrals      ``CustomTorsionForce``     ``E*sign*(a1*cos(theta) + b1*sin(theta) + ...)``
=============  =========================  =============================================================

OpenMM's torsion angle has the sign of mlcg's (as for the priors, :mod:`flashschnet.openmm.priors`). ``sign`` is
+1 for the inner group and -1 for the outer group's ``full - inner`` (:mod:`flashschnet.openmm.dynamics`). The
unit factors come from :func:`flashschnet.openmm.units.conversion_factors`, the one place they are defined.
"""
from __future__ import annotations

from typing import List

import openmm

from .units import conversion_factors


def add_inner_forces(system: openmm.System, inner, replicas: int, n_beads: int, group: int,
                     sign: float = 1.0) -> List[openmm.Force]:
    """Add ``inner``'s terms for ``replicas`` packed copies of ``n_beads`` beads (replica ``r`` owns particles
    ``r*n_beads ..``) to ``system`` in force group ``group``, multiplied by ``sign``; returns the forces added."""
    if inner.n_beads != n_beads:
        raise ValueError(f"the inner model has {inner.n_beads} beads, the molecule {n_beads}")
    length_to_nm, energy_to_kj = conversion_factors(inner.units)
    s, E = 1.0 / float(length_to_nm), float(energy_to_kj) * float(sign)
    forces: List[openmm.Force] = []

    def poly(deg: int) -> str:
        return "+".join(f"c{k}*d^{k}" for k in range(1, deg + 1)) or "0"

    def per_replica(add, tuples, params) -> None:
        for r in range(int(replicas)):
            off = r * n_beads
            for t, p in zip(tuples, params):
                add([off + int(i) for i in t], p)

    if len(inner.bonds):
        f = openmm.CustomBondForce(f"{E!r}*({poly(inner.bond_degree)}); d={s!r}*r-x0")
        f.addPerBondParameter("x0")
        for k in range(1, inner.bond_degree + 1):
            f.addPerBondParameter(f"c{k}")
        params = [[x0] + c for x0, c in zip(inner.bond_x0.tolist(), inner.bond_c.tolist())]
        per_replica(lambda t, p: f.addBond(t[0], t[1], p), inner.bonds.tolist(), params)
        forces.append(f)
    if len(inner.angles):
        f = openmm.CustomAngleForce(f"{E!r}*({poly(inner.angle_degree)}); d=cos(theta)-x0")
        f.addPerAngleParameter("x0")
        for k in range(1, inner.angle_degree + 1):
            f.addPerAngleParameter(f"c{k}")
        params = [[x0] + c for x0, c in zip(inner.angle_x0.tolist(), inner.angle_c.tolist())]
        per_replica(lambda t, p: f.addAngle(t[0], t[1], t[2], p), inner.angles.tolist(), params)
        forces.append(f)
    if len(inner.dihedrals) and inner.harmonics:
        K = inner.harmonics
        terms = "+".join(f"a{n}*cos({n}*theta)+b{n}*sin({n}*theta)" for n in range(1, K + 1))
        f = openmm.CustomTorsionForce(f"{E!r}*({terms})")
        for n in range(1, K + 1):
            f.addPerTorsionParameter(f"a{n}")
            f.addPerTorsionParameter(f"b{n}")
        params = [[v for pair in zip(a, b) for v in pair]
                  for a, b in zip(inner.dihedral_cos.tolist(), inner.dihedral_sin.tolist())]
        per_replica(lambda t, p: f.addTorsion(t[0], t[1], t[2], t[3], p), inner.dihedrals.tolist(), params)
        forces.append(f)
    for f in forces:
        f.setForceGroup(int(group))
        f.setName("CGSchNet inner model" if sign > 0 else "CGSchNet inner model (outer correction)")
        system.addForce(f)
    return forces
