"""mlcg prior terms as native OpenMM forces (exact mlcg functional forms).

One force per kind present in the :class:`flashschnet.priors.PriorSet`:

=====================  ==========================  =================================================
kind                   OpenMM force                energy expression (OpenMM units)
=====================  ==========================  =================================================
``harmonic_bond``      ``CustomBondForce``         ``k*(r-x0)^2`` (mlcg has no factor 1/2)
``harmonic_angle_cos`` ``CustomAngleForce``        ``k*(cos(theta)-x0)^2``
``dihedral_fourier``   ``CustomTorsionForce``      ``v0 + sum_n s_n*sin(n*theta) + c_n*cos(n*theta)``
``repulsion``          ``CustomBondForce``         ``eps*(sigma/r)^6``, eps = energy_to_kj
=====================  ==========================  =================================================

OpenMM's torsion angle ``theta`` has the same sign as mlcg's ``compute_torsions`` (mdtraj/IUPAC convention;
verified numerically against mlcg's oracle energies, whose odd ``sin`` terms would expose a flip), so the
Fourier coefficients are used as they are.
"""
from __future__ import annotations

from typing import List, Optional

import openmm

from flashschnet.errors import InputError
from flashschnet.priors import PriorSet

__all__ = ["add_prior_forces"]

#: Sign relating OpenMM's torsion ``theta`` to mlcg's ``phi``: phi = _TORSION_SIGN * theta (verified: +1).
_TORSION_SIGN = 1.0


def add_prior_forces(
    system: "openmm.System",
    prior_set: PriorSet,
    replicas: int = 1,
    n_beads: Optional[int] = None,
    length_to_nm: Optional[float] = None,
    energy_to_kj: Optional[float] = None,
    force_group: int = 1,
) -> List["openmm.Force"]:
    """Add the prior as native OpenMM forces to ``system``.

    Parameters
    ----------
    system : openmm.System
        Must hold at least ``replicas * n_beads`` particles; replica ``r`` of the molecule is particles
        ``r*n_beads .. r*n_beads + n_beads - 1`` (each tuple is added once per replica with that offset).
    prior_set : flashschnet.priors.PriorSet
        Parameters in the model's units (mlcg: Angstrom, kcal/mol).
    replicas : int
        Number of copies R of the molecule packed in ``system``.
    n_beads : int, optional
        Beads per copy (default ``prior_set.n_beads``).
    length_to_nm : float
        nm per model length unit (0.1 for Angstrom). Required; the caller computes it in one place.
    energy_to_kj : float
        kJ/mol per model energy unit (4.184 for kcal/mol). Required.
    force_group : int
        Force group of every added force (0..31).

    Returns
    -------
    list of openmm.Force
        The forces added (one per kind present, in the order bonds, angles, dihedrals, repulsion).

    Notes
    -----
    Conversions: bond ``x0`` and ``sigma`` x ``length_to_nm``; bond ``k`` x ``energy_to_kj / length_to_nm**2``;
    angle ``k`` x ``energy_to_kj`` (``x0`` = cos(theta0) is dimensionless); the repulsion's
    per-pair ``eps`` = ``energy_to_kj``; dihedral ``v0``, ``k1s_sin``,
    ``k2s_cos`` x ``energy_to_kj``. Dihedral terms with fewer harmonics than the maximum are zero-padded.
    No periodic boundary conditions.
    """
    if length_to_nm is None or energy_to_kj is None:
        raise ValueError("add_prior_forces needs length_to_nm and energy_to_kj (model units -> nm, kJ/mol)")
    L = float(length_to_nm)
    E = float(energy_to_kj)
    replicas = int(replicas)
    n = int(prior_set.n_beads if n_beads is None else n_beads)
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if prior_set.max_index >= n:
        raise InputError(f"the priors refer to bead {prior_set.max_index} but a molecule copy has only {n} beads")
    if system.getNumParticles() < replicas * n:
        raise ValueError(f"system has {system.getNumParticles()} particles, need {replicas} x {n} = {replicas * n}")
    offsets = [r * n for r in range(replicas)]
    forces: List[openmm.Force] = []

    def finish(force, name):
        force.setName(name)
        force.setForceGroup(int(force_group))
        force.setUsesPeriodicBoundaryConditions(False)
        system.addForce(force)
        forces.append(force)

    bonds = prior_set.terms_of_kind("harmonic_bond")
    if bonds:
        f = openmm.CustomBondForce("k*(r-x0)^2")
        f.addPerBondParameter("k")
        f.addPerBondParameter("x0")
        for t in bonds:
            ks = (t.params["k"] * (E / L ** 2)).tolist()
            x0s = (t.params["x0"] * L).tolist()
            idx = t.indices.tolist()
            for off in offsets:
                for (i, j), k, x0 in zip(idx, ks, x0s):
                    f.addBond(i + off, j + off, [k, x0])
        finish(f, "mlcg prior harmonic_bond")

    angles = prior_set.terms_of_kind("harmonic_angle_cos")
    if angles:
        f = openmm.CustomAngleForce("k*(cos(theta)-x0)^2")
        f.addPerAngleParameter("k")
        f.addPerAngleParameter("x0")
        for t in angles:
            ks = (t.params["k"] * E).tolist()
            x0s = t.params["x0"].tolist()
            idx = t.indices.tolist()
            for off in offsets:
                for (i, j, k_), k, x0 in zip(idx, ks, x0s):
                    f.addAngle(i + off, j + off, k_ + off, [k, x0])
        finish(f, "mlcg prior harmonic_angle_cos")

    dihedrals = prior_set.terms_of_kind("dihedral_fourier")
    if dihedrals:
        D = max(t.n_degs for t in dihedrals)
        expr = "v0"
        for m in range(1, D + 1):
            ang = "theta" if m == 1 else f"{m}*theta"
            expr += f" + s{m}*sin({ang}) + c{m}*cos({ang})"
        f = openmm.CustomTorsionForce(expr)
        f.addPerTorsionParameter("v0")
        for m in range(1, D + 1):
            f.addPerTorsionParameter(f"s{m}")
            f.addPerTorsionParameter(f"c{m}")
        for t in dihedrals:
            # sin(n*phi) = sin(n*sign*theta) = sign * sin(n*theta): odd terms pick up the sign.
            s = (t.params["k1s_sin"] * (E * _TORSION_SIGN)).tolist()
            c = (t.params["k2s_cos"] * E).tolist()
            v0 = (t.params["v0"] * E).tolist()
            idx = t.indices.tolist()
            for off in offsets:
                for q, (a, b, cc, d) in enumerate(idx):
                    p = [v0[q]]
                    for m in range(D):
                        p += [s[q][m], c[q][m]] if m < len(s[q]) else [0.0, 0.0]
                    f.addTorsion(a + off, b + off, cc + off, d + off, p)
        finish(f, "mlcg prior dihedral_fourier")

    rep = prior_set.terms_of_kind("repulsion")
    if rep:
        # mlcg's (sigma/d)^6 is in model energy units: eps = energy_to_kj converts it to kJ/mol.
        f = openmm.CustomBondForce("eps*(sigma/r)^6")
        f.addPerBondParameter("eps")
        f.addPerBondParameter("sigma")
        for t in rep:
            sig = (t.params["sigma"] * L).tolist()
            idx = t.indices.tolist()
            for off in offsets:
                for (i, j), sg in zip(idx, sig):
                    f.addBond(i + off, j + off, [E, sg])
        finish(f, "mlcg prior repulsion")

    return forces
