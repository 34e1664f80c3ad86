"""One CG frame -> one all-atom structure: side chains from pdbfixer's residue templates, then a short restrained
energy minimisation in amber14 + GBn2.

For each frame (:meth:`Rebuilder.frame`):

1. The :class:`~flashschnet.openmm.backmap.skeleton.Skeleton` gets the frame's bead positions: N, CA, C, O and CB
   of every residue sit on their beads.
2. pdbfixer (``findMissingAtoms`` / ``addMissingAtoms``) builds the missing heavy atoms: each residue's template
   (six of them turned to their most common chi1, :mod:`.templates`) is overlaid on its N, CA, C, O and CB (so the
   side chain leaves CA along the CB bead), OXT ends each chain, and
   its soft-sphere minimisation moves the new atoms (only those) off each other. The reference's disulfide bonds
   are added to the topology.
3. OpenMM's ``Modeller.addHydrogens`` (amber14, pH 7; the protonation states of the first frame are kept for all
   frames, so every frame has the same atoms).
4. ``LocalEnergyMinimizer`` in amber14-all + implicit/gbn2 (1 nm cutoff, no constraints) with a harmonic restraint
   ``0.5 k |r - r_bead|^2`` (``CustomExternalForce``, plain distance: no periodic box) on every mapped atom; the
   System and Context are built once per set of atoms and reused.
5. :func:`~flashschnet.openmm.backmap.checks.check_frame`: clashes, CA chirality, new cis peptide bonds, the mapped
   atoms' distance from their beads, the minimiser's convergence.
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from ...errors import InputError
from .checks import DEVIATION_NM, FrameCheck, check_frame, near_in_graph
from .skeleton import Skeleton

#: the force fields of the minimisation (the reference MD's: flashschnet.openmm.reference_md)
FORCE_FIELDS = ("amber14-all.xml", "implicit/gbn2.xml")
#: C-OXT bond length of a carboxylate, nm
OXT_BOND_NM = 0.125
#: pdbfixer's seed for the soft minimisation of new atoms (fixed: the same frame gives the same structure)
FIXER_SEED = 1


@dataclass(frozen=True)
class BackmapSettings:
    """How each frame is rebuilt (OpenMM units).

    Attributes
    ----------
    restraint_k : float
        Force constant of the restraints on the mapped atoms, kJ/mol/nm^2.
    tolerance : float
        The minimiser stops when the RMS force is below this, kJ/mol/nm; a frame that ends above it is noted.
    max_iterations : int
        Iteration limit of the minimiser.
    cutoff_nm : float
        Non-bonded cutoff of the minimisation (``CutoffNonPeriodic``), nm; 0: none (``NoCutoff``).
    deviation_nm : float
        A mapped atom farther than this from its bead after the minimisation is noted.
    common_chi1 : bool
        Build side chains from templates turned to the most common chi1
        (:func:`~flashschnet.openmm.backmap.templates.common_chi1_templates`); False: pdbfixer's templates as they are.
    platform : str
        OpenMM platform of the minimisation.
    threads : int or None
        CPU threads of the minimisations (None: OpenMM's default); sets the CPU platform's default for the whole
        process, so it is meant for worker processes (:mod:`.driver` gives each one thread).
    """

    restraint_k: float = 20000.0
    tolerance: float = 50.0
    max_iterations: int = 500
    cutoff_nm: float = 1.0
    deviation_nm: float = DEVIATION_NM
    common_chi1: bool = True
    platform: str = "CPU"
    threads: Optional[int] = None


@dataclass
class FrameResult:
    """One rebuilt frame: ``positions_nm`` [n_atoms, 3] of every atom (hydrogens included) in the order of the
    rebuilder's :attr:`Rebuilder.topology`; ``check``; ``notes``: one phrase per problem (empty: a good frame)."""

    positions_nm: np.ndarray
    check: FrameCheck
    notes: List[str]


def _peptide_keys(skeleton_topology) -> List[tuple]:
    """``(i, (CA_i, C_i, N_i+1, CA_i+1))`` skeleton atom indices of each pair of consecutive residues of a chain."""
    residues = list(skeleton_topology.residues())
    out = []
    for res, nxt in zip(residues, residues[1:]):
        a, b = ({x.name: x.index for x in r.atoms()} for r in (res, nxt))
        if res.chain is nxt.chain and all(k in a for k in ("CA", "C")) and all(k in b for k in ("N", "CA")):
            out.append((res.index, (a["CA"], a["C"], b["N"], b["CA"])))
    return out


def _cis_in_beads(keys, skel_nm: np.ndarray) -> List[int]:
    """Residues i whose peptide bond to i + 1 is cis in the beads themselves (CA-C-N-CA from the beads)."""
    from .checks import CIS_DEGREES, _dihedral

    return [i for i, idx in keys if abs(_dihedral(*(skel_nm[k] for k in idx))) < CIS_DEGREES]


class Rebuilder:
    """Rebuilds frames of one skeleton (one per process: it holds an OpenMM Context).

    Parameters
    ----------
    skeleton : Skeleton
    settings : BackmapSettings
    variants : list or None
        Protonation variants per residue (``Modeller.addHydrogens``'s); None: chosen on the first frame and kept
        (:attr:`variants` then holds them, to pass to the rebuilders of other processes).
    """

    def __init__(self, skeleton: Skeleton, settings: BackmapSettings = BackmapSettings(), variants=None):
        import openmm
        import openmm.app as app
        from pdbfixer import PDBFixer

        from ..platforms import loaded_platforms, missing_platform

        self.skeleton, self.settings, self.variants = skeleton, settings, variants
        if settings.platform not in loaded_platforms():
            raise InputError(missing_platform(settings.platform))
        self.platform = openmm.Platform.getPlatformByName(settings.platform)
        if settings.threads is not None and settings.platform == "CPU":
            self.platform.setPropertyDefaultValue("Threads", str(int(settings.threads)))
        self.forcefield = app.ForceField(*FORCE_FIELDS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.fixer = PDBFixer(pdbfile=io.StringIO(skeleton.text), platform=self.platform)
        if settings.common_chi1:
            from .templates import common_chi1_templates

            common_chi1_templates(self.fixer)
        self.skeleton_topology = self.fixer.topology
        # pdbfixer overlays a template on every atom the residue has; O's place depends on psi (the next residue's
        # N), so it would tilt the side chain: pdbfixer gets N, CA, C, CB, and O is put on its bead afterwards
        oxygens = [a for a in self.skeleton_topology.atoms() if a.name == "O"]
        modeller = app.Modeller(self.skeleton_topology,
                                [openmm.Vec3(0, 0, 0)] * self.skeleton_topology.getNumAtoms() * openmm.unit.nanometer)
        modeller.delete(oxygens)
        self.fixer_topology = modeller.topology                # each frame starts again from it
        self._kept = np.array([a.index for a in self.skeleton_topology.atoms() if a.name != "O"], dtype=np.int64)
        self._oxygen = {a.residue.index: a.index for a in oxygens}
        self._cis_keys = _peptide_keys(self.skeleton_topology)
        self.topology = None        # the all-atom topology (with hydrogens) of the first frame
        self._sim = None

    def _system(self, topology):
        """(context, restraint force, mapped atom indices, graph exclusions) for this topology, built once."""
        import openmm
        import openmm.app as app

        key = tuple((a.residue.index, a.name) for a in topology.atoms())
        if self._sim is not None and self._sim[0] == key:
            return self._sim[1:]
        cut = float(self.settings.cutoff_nm)
        system = self.forcefield.createSystem(topology, constraints=None, **(
            {"nonbondedMethod": app.CutoffNonPeriodic, "nonbondedCutoff": cut * openmm.unit.nanometer} if cut > 0 else
            {"nonbondedMethod": app.NoCutoff}))
        restraint = openmm.CustomExternalForce("0.5*k_backmap*((x-x0)^2+(y-y0)^2+(z-z0)^2)")
        restraint.addGlobalParameter("k_backmap", float(self.settings.restraint_k))
        for name in ("x0", "y0", "z0"):
            restraint.addPerParticleParameter(name)
        where = {(a.residue.index, a.name): a.index for a in topology.atoms()}
        mapped = []
        for atom in self.skeleton_topology.atoms():
            i = where[(atom.residue.index, atom.name)]
            mapped.append(i)
            restraint.addParticle(i, [0.0, 0.0, 0.0])
        system.addForce(restraint)
        integrator = openmm.VerletIntegrator(0.001)
        context = openmm.Context(system, integrator, self.platform)
        self._sim = (key, context, restraint, mapped, near_in_graph(topology), integrator)
        return self._sim[1:]

    def _fixed(self, skel_nm: np.ndarray):
        """pdbfixer's heavy atoms around the skeleton at ``skel_nm``: (topology, positions Quantity)."""
        import openmm
        import openmm.unit as unit

        fixer = self.fixer
        fixer.topology = self.fixer_topology
        fixer.positions = [openmm.Vec3(*map(float, p)) for p in skel_nm[self._kept]] * unit.nanometer
        fixer.missingResidues = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fixer.findMissingAtoms()
            fixer.addMissingAtoms(seed=FIXER_SEED)
        top = fixer.topology
        xyz = np.array(fixer.positions.value_in_unit(unit.nanometer), dtype=np.float64)
        residues = list(top.residues())
        for res in residues:                     # O on its bead; OXT in the plane of CA, C, O, opposite both
            at = {a.name: a.index for a in res.atoms()}
            if "O" in at and res.index in self._oxygen:
                xyz[at["O"]] = skel_nm[self._oxygen[res.index]]
            if "OXT" in at and all(k in at for k in ("CA", "C", "O")):
                c = xyz[at["C"]]
                u = [(xyz[at[k]] - c) / np.linalg.norm(xyz[at[k]] - c) for k in ("CA", "O")]
                bisector = -(u[0] + u[1])
                xyz[at["OXT"]] = c + OXT_BOND_NM * bisector / np.linalg.norm(bisector)
        pos = [openmm.Vec3(*map(float, p)) for p in xyz] * unit.nanometer
        bonded = {tuple(sorted((a.residue.index, b.residue.index))) for a, b in top.bonds()
                  if a.name == "SG" and b.name == "SG"}
        for i, j in self.skeleton.disulfides:
            if (i, j) not in bonded:
                sg = [next((a for a in residues[k].atoms() if a.name == "SG"), None) for k in (i, j)]
                if None not in sg:
                    top.addBond(sg[0], sg[1])
        return top, pos

    def frame(self, beads_nm: np.ndarray) -> FrameResult:
        """Rebuild one frame from its bead positions [n_beads, 3] (nm)."""
        import openmm
        import openmm.app as app
        import openmm.unit as unit

        beads_nm = np.asarray(beads_nm, dtype=np.float64)
        skel_nm = beads_nm[self.skeleton.bead_index]
        top, pos = self._fixed(skel_nm)
        modeller = app.Modeller(top, pos)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            used = modeller.addHydrogens(self.forcefield, pH=7.0, variants=self.variants)
        if self.variants is None:
            self.variants = used
        if self.topology is None:
            self.topology = modeller.topology
        elif [a.name for a in modeller.topology.atoms()] != [a.name for a in self.topology.atoms()]:
            raise RuntimeError("backmapping: a frame was rebuilt with other atoms than the first one (pdbfixer or "
                               "Modeller.addHydrogens chose differently); please report this")
        context, restraint, mapped, exclude, _ = self._system(modeller.topology)
        for k, (i, p) in enumerate(zip(mapped, skel_nm)):
            restraint.setParticleParameters(k, i, [float(v) for v in p])
        restraint.updateParametersInContext(context)
        context.setPositions(modeller.positions)
        s = self.settings
        try:
            openmm.LocalEnergyMinimizer.minimize(context, s.tolerance, s.max_iterations)
        except openmm.OpenMMException as exc:      # e.g. "Particle coordinate is NaN": the frame keeps its start
            context.setPositions(modeller.positions)
            failed = f"the minimisation failed ({str(exc).splitlines()[0] if str(exc) else 'OpenMMException'})"
        else:
            failed = None
        state = context.getState(getPositions=True, getForces=True)
        xyz = state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
        forces = state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
        rms = float(np.sqrt(np.mean(np.square(forces))))
        if not np.isfinite(xyz).all():
            check = FrameCheck(converged=False, max_deviation_nm=float("inf"))
        else:
            check = check_frame(xyz, modeller.topology, mapped, skel_nm, _cis_in_beads(self._cis_keys, skel_nm),
                                exclude=exclude, converged=rms <= s.tolerance)
        notes = check.problems(modeller.topology, s.deviation_nm)
        if not check.converged:
            notes = [n if n != "the minimisation did not converge" else
                     f"the minimisation did not converge (RMS force {rms:.3g} kJ/mol/nm > {s.tolerance:g})"
                     for n in notes]
        if failed:
            check.converged = False
            notes = [failed] + [n for n in notes if not n.startswith("the minimisation did not converge")]
        return FrameResult(positions_nm=np.asarray(xyz, dtype=np.float64), check=check, notes=notes)
