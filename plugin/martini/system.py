"""An OpenMM ``System`` from a MARTINI topology (:mod:`.topology`), with MARTINI's non-bonded scheme.

Checked against ``gmx_d mdrun -rerun`` term by term to double precision (tests/openmm/martini/test_system.py:
villin, BPTI, ubiquitin and MartiniGo villin in water with ions, Reference platform).

Non-bonded (GROMACS ``cutoff-scheme = Verlet``, ``vdw-modifier = Potential-shift``, ``coulombtype =
reaction-field``, ``epsilon_rf = 0`` i.e. infinity), for pairs closer than ``rc`` (1.1 nm):

* LJ: ``4 eps ((sig/r)^12 - (sig/r)^6) - 4 eps ((sig/rc)^12 - (sig/rc)^6)`` on non-excluded pairs;
* reaction field: ``f q_i q_j / eps_r (1/r + k_rf r^2 - c_rf)``, ``k_rf = 1/(2 rc^3)``, ``c_rf = 3/(2 rc)``,
  on non-excluded pairs; excluded pairs closer than ``rc`` get ``f q_i q_j / eps_r (k_rf r^2 - c_rf)`` (beyond
  ``rc`` nothing, as GROMACS's cluster kernels mask them) and every particle the constant self term
  ``-f q_i^2 c_rf / (2 eps_r)`` (GROMACS's Verlet scheme).

Bonded: bonds (1, 6: ``k/2 (r - b0)^2``), constraints, angles (1 harmonic, 2 G96 ``k/2 (cos - cos0)^2``, 10
restricted bending ``k/2 (cos - cos0)^2 / sin^2``), dihedrals (1/9 periodic, 2 harmonic improper), virtual
sites (``virtual_sitesn`` 1 COG, 2 COM, 3 COW as weighted averages; massless).

MartiniGo (``martinize2 -go``, vermouth 0.15): one virtual site per residue on its backbone bead
(``virtual_sitesn`` of that single bead), each with its own atom type (``go_atomtypes.itp``: no charge, sigma =
epsilon = 0) and LJ 6-12 contacts between those types (``go_nbparams.itp``, ``[ nonbond_params ]``). They are
ordinary LJ pairs here, cut off and shifted like the rest, so the Go energy is part of ``LJ (SR)`` exactly as
GROMACS reports it. A site and its bead coincide; GROMACS leaves that pair in the pair list (zero parameters:
zero energy), here it is excluded instead, which is the same energy and avoids 0/0 at r = 0.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Dict, List, Sequence, Set, Tuple

import openmm

from .topology import Topology, TopologyError

#: kJ mol^-1 nm e^-2: GROMACS 2022's ``c_one4PiEps0`` (units.h), computed as it does from the CODATA 2018
#: constants (e, N_A exact; eps0 = 8.8541878128e-12 F/m), 138.93545764438... Rounded values are not enough to
#: match ``gmx_d``: 138.9354576 is 3.2e-10 low, GROMACS <= 2019's 138.935458 (CODATA 2010) 2.6e-9 high.
ONE_4PI_EPS0 = 1.0 / (4.0 * math.pi * ((8.8541878128e-12 * 1e-9 * 1e3) / (1.602176634e-19 ** 2 * 6.02214076e23)))


def read_gro(path):
    """Positions ``[N, 3]`` (nm, numpy float64) and the rectangular box lengths ``(3,)`` (nm) of a .gro file."""
    import numpy as np

    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
        n = int(lines[1])
        pos = np.array([[float(l[20:28]), float(l[28:36]), float(l[36:44])] for l in lines[2:2 + n]])
        box = [float(x) for x in lines[2 + n].split()]
    except (OSError, ValueError, IndexError) as exc:
        raise TopologyError(f"{path}: not a readable .gro coordinate file ({exc})") from None
    if len(box) > 3 and any(box[3:]):
        raise TopologyError(f"{path}: triclinic boxes are not supported (box line {lines[2 + n].strip()!r})")
    return pos, np.array(box[:3])


#: force groups of :func:`build_system`, in order (GROMACS's energy terms they correspond to)
GROUPS = ("LJ (SR)", "Coulomb (SR)", "Coulomb exclusions", "Coulomb self", "Bond", "Angle", "G96Angle",
          "Restr. Angles", "Proper Dih.", "Improper Dih.")


def _exclusion_pairs(mol) -> Set[Tuple[int, int]]:
    """GROMACS's excluded pairs ``(i < j)`` of a molecule type: pairs within ``nrexcl`` chemical bonds (bonds of
    every type but 6, which makes no exclusions, and type-1 constraints), plus [ exclusions ]."""
    graph: Dict[int, Set[int]] = defaultdict(set)
    for b in mol.of("bonds"):
        if b.func != 6:
            graph[b.atoms[0]].add(b.atoms[1])
            graph[b.atoms[1]].add(b.atoms[0])
    for c in mol.of("constraints"):
        if c.func == 1:
            graph[c.atoms[0]].add(c.atoms[1])
            graph[c.atoms[1]].add(c.atoms[0])
    pairs: Set[Tuple[int, int]] = set()
    for a in range(len(mol.atoms)):
        frontier, seen = {a}, {a}
        for _ in range(mol.nrexcl):
            frontier = {n for f in frontier for n in graph[f]} - seen
            seen |= frontier
        for b in seen - {a}:
            pairs.add((min(a, b), max(a, b)))
    for ex in mol.exclusions:
        for b in ex[1:]:
            if b != ex[0]:
                pairs.add((min(ex[0], b), max(ex[0], b)))
    return pairs


def build_system(top: Topology, box_nm: Sequence[float], cutoff: float = 1.1, epsilon_r: float = 15.0) -> openmm.System:
    """A periodic OpenMM System of ``top`` in a rectangular box ``box_nm`` (3 lengths, nm). Each term is in
    its own force group, in the order of :data:`GROUPS`."""
    system = openmm.System()
    a, b, c = (float(x) for x in box_nm)
    system.setDefaultPeriodicBoxVectors(openmm.Vec3(a, 0, 0), openmm.Vec3(0, b, 0), openmm.Vec3(0, 0, c))
    used = sorted({atom.type for name, _ in top.molecules for atom in top.moleculetypes[name].atoms})
    tindex = {t: i for i, t in enumerate(used)}
    n = len(used)
    sig, eps = [0.0] * (n * n), [0.0] * (n * n)
    for i, ti in enumerate(used):
        for j, tj in enumerate(used):
            s, e = top.pair_parameters(ti, tj)
            sig[i + n * j], eps[i + n * j] = s, e
    lj = openmm.CustomNonbondedForce(
        "4*e*((s/r)^12-(s/r)^6) - 4*e*((s/rc)^12-(s/rc)^6); s=sigtab(t1,t2); e=epstab(t1,t2)")
    lj.addGlobalParameter("rc", cutoff)
    lj.addTabulatedFunction("sigtab", openmm.Discrete2DFunction(n, n, sig))
    lj.addTabulatedFunction("epstab", openmm.Discrete2DFunction(n, n, eps))
    lj.addPerParticleParameter("t")
    krf, crf = 1.0 / (2.0 * cutoff ** 3), 3.0 / (2.0 * cutoff)
    pref = ONE_4PI_EPS0 / epsilon_r
    rf = openmm.CustomNonbondedForce(f"{pref}*q1*q2*(1/r + {krf}*r^2 - {crf})")
    rf.addPerParticleParameter("q")
    for f in (lj, rf):
        f.setNonbondedMethod(openmm.CustomNonbondedForce.CutoffPeriodic)
        f.setCutoffDistance(cutoff)
        f.setUseLongRangeCorrection(False)
    rf_excl = openmm.CustomBondForce(f"step({cutoff}-r)*{pref}*qq*({krf}*r^2 - {crf})")
    rf_excl.addPerBondParameter("qq")
    rf_excl.setUsesPeriodicBoundaryConditions(True)
    bonds = openmm.HarmonicBondForce()
    angles1 = openmm.HarmonicAngleForce()
    g96 = openmm.CustomAngleForce("0.5*k*(cos(theta)-cos(t0))^2")
    reb = openmm.CustomAngleForce("0.5*k*(cos(theta)-cos(t0))^2/sin(theta)^2")
    for f in (g96, reb):
        f.addPerAngleParameter("t0")
        f.addPerAngleParameter("k")
    torsions = openmm.PeriodicTorsionForce()
    improper = openmm.CustomTorsionForce("0.5*k*min(dt, 2*pi-dt)^2; dt=abs(theta-t0); pi=3.141592653589793")
    improper.addPerTorsionParameter("t0")
    improper.addPerTorsionParameter("k")
    charges: List[float] = []
    exclusions: Set[Tuple[int, int]] = set()
    offset = 0
    for name, count in top.molecules:
        mol = top.moleculetypes[name]
        vsites = {v.site for v in mol.virtual_sites}
        excl = _exclusion_pairs(mol)           # once per molecule type, shifted per copy
        excl |= _coincident_pairs(top, mol, excl)
        partners = _partners(mol)              # the weight-0 second particle of each one-atom site
        for _ in range(count):
            for k, atom in enumerate(mol.atoms):
                system.addParticle(0.0 if k in vsites else atom.mass)
                lj.addParticle([float(tindex[atom.type])])
                rf.addParticle([atom.charge])
                charges.append(atom.charge)
            for v in mol.virtual_sites:
                system.setVirtualSite(offset + v.site, _virtual_site(v, mol, offset, partners))
            for i in mol.of("bonds"):
                if i.func not in (1, 6):
                    raise TopologyError(f"{i.where}: bond type {i.func} is not supported (1, 6)")
                bonds.addBond(offset + i.atoms[0], offset + i.atoms[1], i.params[0], i.params[1])
            for i in mol.of("constraints"):
                system.addConstraint(offset + i.atoms[0], offset + i.atoms[1], i.params[0])
            for i in mol.of("angles"):
                p = [offset + x for x in i.atoms]
                t0 = math.radians(i.params[0])
                if i.func == 1:
                    angles1.addAngle(*p, t0, i.params[1])
                elif i.func == 2:
                    g96.addAngle(*p, [t0, i.params[1]])
                elif i.func == 10:
                    reb.addAngle(*p, [t0, i.params[1]])
                else:
                    raise TopologyError(f"{i.where}: angle type {i.func} is not supported (1, 2, 10)")
            for i in mol.of("dihedrals"):
                p = [offset + x for x in i.atoms]
                if i.func in (1, 9):
                    torsions.addTorsion(*p, int(i.params[2]), math.radians(i.params[0]), i.params[1])
                elif i.func == 2:
                    improper.addTorsion(*p, [math.radians(i.params[0]), i.params[1]])
                else:
                    raise TopologyError(f"{i.where}: dihedral type {i.func} is not supported (1, 2, 9)")
            exclusions.update((i + offset, j + offset) for i, j in excl)
            offset += len(mol.atoms)
    self_term = openmm.CustomExternalForce("e0")       # constant: no force, GROMACS's energy
    self_term.addPerParticleParameter("e0")
    for i, q in enumerate(charges):
        if q:
            self_term.addParticle(i, [-0.5 * pref * crf * q * q])
    for i, j in sorted(exclusions):
        lj.addExclusion(i, j)
        rf.addExclusion(i, j)
        if charges[i] and charges[j]:
            rf_excl.addBond(i, j, [charges[i] * charges[j]])
    for g, f in enumerate((lj, rf, rf_excl, self_term, bonds, angles1, g96, reb, torsions, improper)):
        f.setForceGroup(g)
        system.addForce(f)
    return system


def _coincident_pairs(top: Topology, mol, excluded: Set[Tuple[int, int]]) -> Set[Tuple[int, int]]:
    """Pairs ``(i < j)`` of a virtual site of one atom and that atom (MartiniGo's sites on the backbone beads):
    always at distance 0. Not excluded in GROMACS, but they must not interact there either (its kernels clamp
    r, and zero parameters give zero); here they are excluded, which is the same energy without 0/0. A pair
    that would interact (charges or LJ) is a broken topology: a :class:`TopologyError`."""
    out: Set[Tuple[int, int]] = set()
    for v in mol.virtual_sites:
        if len(set(v.atoms)) != 1:
            continue
        a = v.atoms[0]
        pair = (min(v.site, a), max(v.site, a))
        if pair in excluded:
            continue
        sa, sb = mol.atoms[v.site], mol.atoms[a]
        if sa.charge * sb.charge != 0.0 or top.pair_parameters(sa.type, sb.type)[1] != 0.0:
            raise TopologyError(f"{v.where}: virtual site {v.site + 1} sits on atom {a + 1} and would interact with "
                                "it (charges or LJ), but they are not excluded")
        out.add(pair)
    return out


def _virtual_site(v, mol, offset: int, partners: Dict[int, int]):
    atoms = [offset + a for a in v.atoms]
    if v.kind != "n":
        raise TopologyError(f"{v.where}: virtual_sites{v.kind} is not supported yet")
    if v.func == 1:
        w = [1.0] * len(atoms)
    elif v.func == 2:
        w = [mol.atoms[a].mass for a in v.atoms]
    else:
        w = list(v.params)
    total = sum(w)
    if not total:
        raise TopologyError(f"{v.where}: virtual site {v.site + 1}: its weights (masses) add up to 0")
    w = [x / total for x in w]
    if len(set(atoms)) == 1:
        # one atom (MartiniGo): the site is that atom's position. OpenMM's sites need two distinct particles,
        # so a second one joins with weight 0 (exactly: x = 1 * x_a + 0 * x_b, all force on a).
        if v.atoms[0] not in partners:
            raise TopologyError(f"{v.where}: virtual site {v.site + 1} on atom {v.atoms[0] + 1}: the molecule has no "
                                "second real atom, which OpenMM needs to build the site")
        return openmm.TwoParticleAverageSite(atoms[0], offset + partners[v.atoms[0]], 1.0, 0.0)
    if len(atoms) == 2:
        return openmm.TwoParticleAverageSite(atoms[0], atoms[1], w[0], w[1])
    if len(atoms) == 3:
        return openmm.ThreeParticleAverageSite(atoms[0], atoms[1], atoms[2], w[0], w[1], w[2])
    zero = [0.0] * len(atoms)
    xw, yw = list(zero), list(zero)
    xw[0], xw[-1] = -1.0, 1.0          # any direction: the local position is the origin
    yw[0], yw[1 % len(atoms)] = -1.0, 1.0
    return openmm.LocalCoordinatesSite(atoms, w, xw, yw, openmm.Vec3(0, 0, 0))


def _partners(mol) -> Dict[int, int]:
    """For each constructing atom of a one-atom virtual site: another real (not virtual) atom of ``mol``, bonded
    to it if possible (the first bond or constraint that names it), else the first real atom but itself."""
    sites = {v.site for v in mol.virtual_sites}
    wanted = {v.atoms[0] for v in mol.virtual_sites if len(set(v.atoms)) == 1}
    out: Dict[int, int] = {}
    if not wanted:
        return out
    for section in ("bonds", "constraints"):
        for i in mol.of(section):
            a, b = i.atoms
            if a in wanted and a not in out and b not in sites and b != a:
                out[a] = b
            if b in wanted and b not in out and a not in sites and a != b:
                out[b] = a
    real = [k for k in range(len(mol.atoms)) if k not in sites][:2]
    for a in wanted - set(out):
        other = [k for k in real if k != a]
        if other:
            out[a] = other[0]
    return out
