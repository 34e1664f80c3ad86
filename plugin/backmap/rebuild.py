"""One CG frame -> one all-atom structure: side chains packed by FASPR (or from pdbfixer's residue templates),
then a short restrained energy minimisation in amber14 + GBn2.

For each frame (:meth:`Rebuilder.frame`):

1. The :class:`~flashschnet.openmm.backmap.skeleton.Skeleton` gets the frame's positions: with 5 beads, N, CA, C,
   O and CB of every residue sit on their beads; with CA beads, CA does and PULCHRA rebuilds N, C and O, CB placed
   in ideal geometry (:mod:`.pulchra`).
2. Heavy atoms. ``side_chains="faspr"`` (default): FASPR packs every side chain on the skeleton's backbone
   (:mod:`.faspr`), each residue moved rigidly onto N, CA, C and CB; the topology (atom names, OXT, the
   reference's disulfide bonds) is pdbfixer's, built once. ``"templates"``: pdbfixer (``findMissingAtoms`` /
   ``addMissingAtoms``) overlays each residue's template (six of them turned to their most common chi1,
   :mod:`.templates`) on N, CA, C and CB and its soft-sphere minimisation moves the new atoms off each other.
   OXT ends each chain (placed by hand) and O sits on its bead.
3. OpenMM's ``Modeller.addHydrogens`` (amber14, pH 7; the protonation states of the first frame are kept for all
   frames, so every frame has the same atoms).
4. ``LocalEnergyMinimizer`` in amber14-all + implicit/gbn2 (1 nm cutoff, no constraints) with a harmonic restraint
   ``0.5 k |r - r_bead|^2`` (``CustomExternalForce``, plain distance: no periodic box) on every atom that sits on
   a bead (5 beads: N, CA, C, O, CB; CA: CA); the System and Context are built once per set of atoms and reused
   (:mod:`.minimise`; a frame whose minimisation fails or does not converge is minimised again after a soft stage).
5. :func:`~flashschnet.openmm.backmap.checks.check_frame`: clashes, CA chirality, new cis peptide bonds, the mapped
   atoms' distance from their beads, the minimiser's convergence.
"""
from __future__ import annotations

import io
import random
import warnings
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from ...errors import InputError
from .checks import DEVIATION_NM, FrameCheck, check_frame, d_residues
from .minimise import RestrainedMinimiser
from .skeleton import Skeleton

#: the force fields of the minimisation (the reference MD's: flashschnet.openmm.reference_md)
FORCE_FIELDS = ("amber14-all.xml", "implicit/gbn2.xml")
#: C-OXT bond length of a carboxylate, nm
OXT_BOND_NM = 0.125
#: pdbfixer's seed for the soft minimisation of new atoms (fixed: the same frame gives the same structure)
FIXER_SEED = 1
#: how much stiffer the restraints are when a frame is minimised again because a CA turned D
STIFF_SCALE = 10.0
#: Modeller.addHydrogens' tries: (Python's random seed while it places hydrogens, heavy atoms moved by a random
#: displacement of this size first, nm); fixed, so the same frame gives the same structure
HYDROGEN_TRIES = ((1, 0.0), (2, 0.0), (3, 0.01), (4, 0.01))
#: where side chains can come from (BackmapSettings.side_chains)
SIDE_CHAIN_SOURCES = ("faspr", "templates")


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
    side_chains : str
        Where the side chains come from: ``"faspr"`` (default; packed on each frame's backbone by FASPR, the best
        rotamer of a backbone-dependent library for each residue, :mod:`.faspr`) or ``"templates"`` (pdbfixer's
        residue templates, one rotamer per residue type: no extra dependency, about 0.4 A worse, docs/backmapping.md).
    common_chi1 : bool
        ``side_chains="templates"``: build side chains from templates turned to the most common chi1
        (:func:`~flashschnet.openmm.backmap.templates.common_chi1_templates`); False: pdbfixer's templates as they are.
    platform : str
        OpenMM platform of the minimisation.
    threads : int or None
        CPU threads of each minimisation's Context (the CPU platform's "Threads"; None: OpenMM's default, all
        cores). 1 by default: with one thread a frame comes out the same every time (with two, the largest
        distance of a mapped atom from its bead in 1ICO ranged from 0.47 to 0.91 A over four repeats of the same
        frame), and frames run in parallel with ``--workers`` instead.
    """

    restraint_k: float = 20000.0
    tolerance: float = 50.0
    max_iterations: int = 500
    cutoff_nm: float = 1.0
    deviation_nm: float = DEVIATION_NM
    side_chains: str = "faspr"
    common_chi1: bool = True
    platform: str = "CPU"
    threads: Optional[int] = 1

    def __post_init__(self):
        if self.side_chains not in SIDE_CHAIN_SOURCES:
            raise InputError(f"--side-chains {self.side_chains}: choose one of {', '.join(SIDE_CHAIN_SOURCES)}")


@dataclass
class FrameResult:
    """One rebuilt frame: ``positions_nm`` [n_atoms, 3] of every atom (hydrogens included) in the order of the
    rebuilder's :attr:`Rebuilder.topology`; ``check``; ``notes``: one phrase per problem (empty: a good frame);
    ``soft``: its minimisation needed the soft first stage (:mod:`.minimise`)."""

    positions_nm: np.ndarray
    check: FrameCheck
    notes: List[str]
    soft: bool = False


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
    from ...cg.geometry import dihedral
    from .checks import CIS_DEGREES

    return [i for i, idx in keys if abs(np.degrees(dihedral(*(skel_nm[k] for k in idx)))) < CIS_DEGREES]


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

        from ..platforms import checked_platform

        self.skeleton, self.settings, self.variants = skeleton, settings, variants
        self.platform = openmm.Platform.getPlatformByName(checked_platform(settings.platform))
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
        self._mapped = skeleton.mapped          # skeleton atoms on a bead: restrained there
        self._residue_names = [r.name for r in self.skeleton_topology.residues()]
        if skeleton.mapping == "ca":
            from .pulchra import chains_of, check_pulchra

            check_pulchra()
            self._chains = chains_of(self.skeleton_topology)
        self.topology = None        # the all-atom topology (with hydrogens) of the first frame
        properties = {"Threads": str(int(settings.threads))} if settings.threads and settings.platform == "CPU" else {}
        self._minimiser = RestrainedMinimiser(self.forcefield, self.platform, settings.restraint_k,
                                              settings.tolerance, settings.max_iterations, settings.cutoff_nm,
                                              properties)
        self._faspr = None
        if settings.side_chains == "faspr":
            from .faspr import faspr_executable

            self._faspr = faspr_executable()
            self._heavy = None      # pdbfixer's heavy-atom topology (built once, on the first frame)
            at = [{a.name: a.index for a in r.atoms()} for r in self.skeleton_topology.residues()]
            self._backbone_index = np.array([[a[k] for k in ("N", "CA", "C", "O")] for a in at], dtype=np.int64)
            self._cb_index = {i: a["CB"] for i, a in enumerate(at) if "CB" in a}

    def _add_hydrogens(self, top, pos):
        """A Modeller of ``top``/``pos`` with hydrogens (amber14, pH 7, this rebuilder's variants) and the
        variants used, the same for the same frame every time.

        ``Modeller.addHydrogens`` starts some hydrogens at random positions (Python's ``random``: seeded here, the
        caller's state restored) and minimises them on a platform it gives no properties (on CPU: every core, and
        two threads do not sum forces in the same order every time; so the CPU platform's default thread count is
        this rebuilder's for the call, then restored; Reference where there is no CPU platform). Where heavy atoms
        start on top of each other (a CA frame's rebuilt carbonyl on a proline ring) that minimisation can fail
        with a NaN: then again with other seeds, and with the heavy atoms moved by a fixed random 0.01 nm.

        Raises
        ------
        InputError
            Every try failed (the frame's beads overlap so that no hydrogens fit).
        """
        import openmm
        import openmm.app as app
        import openmm.unit as unit

        from ..platforms import loaded_platforms

        cpu = openmm.Platform.getPlatformByName("CPU") if "CPU" in loaded_platforms() else None
        heavy = np.asarray(pos.value_in_unit(unit.nanometer), dtype=np.float64)
        state = random.getstate()
        before = cpu.getPropertyDefaultValue("Threads") if cpu is not None else None
        last = None
        try:
            if cpu is not None and self.settings.threads:
                cpu.setPropertyDefaultValue("Threads", str(int(self.settings.threads)))
            for seed, jitter in HYDROGEN_TRIES:
                xyz = heavy if not jitter else \
                    heavy + np.random.default_rng(seed).normal(scale=jitter, size=heavy.shape)
                modeller = app.Modeller(top, [openmm.Vec3(*map(float, p)) for p in xyz] * unit.nanometer)
                random.seed(seed)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        used = modeller.addHydrogens(self.forcefield, pH=7.0, variants=self.variants,
                                                     platform=cpu or openmm.Platform.getPlatformByName("Reference"))
                    return modeller, used
                except (openmm.OpenMMException, ArithmeticError) as exc:   # a NaN; a zero distance in Modeller
                    last = f"{type(exc).__name__}: {str(exc).splitlines()[0]}" if str(exc) else type(exc).__name__
        finally:
            random.setstate(state)
            if cpu is not None:
                cpu.setPropertyDefaultValue("Threads", before)
        raise InputError(f"a frame's hydrogens could not be placed ({last}, {len(HYDROGEN_TRIES)} tries): its heavy "
                         "atoms start on top of each other; check the CG frame (overlapping beads) or leave it out "
                         "with --frames")

    def _skeleton_from_ca(self, beads_nm: np.ndarray) -> np.ndarray:
        """The skeleton's positions [n_atoms, 3] from a CA frame: CA on its bead, N, C, O and CB rebuilt
        (:func:`~.pulchra.rebuild_backbone`)."""
        from .pulchra import rebuild_backbone

        ca = np.empty((len(self._residue_names), 3))
        atoms = list(self.skeleton_topology.atoms())
        for j in self._mapped:
            ca[atoms[j].residue.index] = beads_nm[self.skeleton.bead_index[j]]
        backbone = rebuild_backbone(self._residue_names, self._chains, ca)
        column = {name: k for k, name in enumerate(("N", "CA", "C", "O", "CB"))}
        return np.stack([backbone[a.residue.index, column[a.name]] for a in atoms])

    def _place_oxygens(self, top, xyz: np.ndarray, skel_nm: np.ndarray) -> None:
        """In ``xyz`` (``top``'s atoms): O on its bead; OXT in the plane of CA, C, O, opposite both."""
        for res in top.residues():
            at = {a.name: a.index for a in res.atoms()}
            if "O" in at and res.index in self._oxygen:
                xyz[at["O"]] = skel_nm[self._oxygen[res.index]]
            if "OXT" in at and all(k in at for k in ("CA", "C", "O")):
                c = xyz[at["C"]]
                u = [(xyz[at[k]] - c) / np.linalg.norm(xyz[at[k]] - c) for k in ("CA", "O")]
                bisector = -(u[0] + u[1])
                xyz[at["OXT"]] = c + OXT_BOND_NM * bisector / np.linalg.norm(bisector)

    def _packed(self, skel_nm: np.ndarray):
        """The heavy atoms around the skeleton at ``skel_nm`` with FASPR's side chains: (topology, positions).

        pdbfixer builds the topology once (its atom names, OXT, the disulfide bonds); every frame then takes N, CA,
        C, O and CB from the beads, the rest of each side chain from FASPR's packing on the frame's backbone
        (moved rigidly onto N, CA, C and the CB bead: :func:`~.faspr.fit_side_chain`), and OXT by hand."""
        import openmm
        import openmm.unit as unit

        from .faspr import fit_side_chain, pack_side_chains

        if self._heavy is None:
            top, _ = self._fixed(skel_nm)
            self._heavy = (top, {(a.residue.index, a.name): a.index for a in top.atoms()})
        top, where = self._heavy
        packed = pack_side_chains(self._residue_names, skel_nm[self._backbone_index], self._faspr)
        xyz = np.full((top.getNumAtoms(), 3), np.nan)
        for atom in self.skeleton_topology.atoms():
            xyz[where[(atom.residue.index, atom.name)]] = skel_nm[atom.index]
        for i, res in enumerate(packed):
            anchors = {k: skel_nm[j] for k, j in zip(("N", "CA", "C"), self._backbone_index[i, :3])}
            if i in self._cb_index:
                anchors["CB"] = skel_nm[self._cb_index[i]]
            for name, p in fit_side_chain(res, anchors).items():
                if name not in ("N", "CA", "C", "CB") and (i, name) in where:
                    xyz[where[(i, name)]] = p
        self._place_oxygens(top, xyz, skel_nm)
        unset = [a for a in top.atoms() if not np.isfinite(xyz[a.index]).all()]
        if unset:
            a = unset[0]
            raise RuntimeError(f"backmapping: FASPR gave no position for {a.name} of {a.residue.name} "
                               f"{a.residue.id}; please report this (--side-chains templates avoids FASPR)")
        return top, [openmm.Vec3(*map(float, p)) for p in xyz] * unit.nanometer

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
        self._place_oxygens(top, xyz, skel_nm)
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
        beads_nm = np.asarray(beads_nm, dtype=np.float64)
        skel_nm = self._skeleton_from_ca(beads_nm) if self.skeleton.mapping == "ca" else \
            beads_nm[self.skeleton.bead_index]
        top, pos = self._packed(skel_nm) if self._faspr else self._fixed(skel_nm)
        modeller, used = self._add_hydrogens(top, pos)
        if self.variants is None:
            self.variants = used
        if self.topology is None:
            self.topology = modeller.topology
        elif [a.name for a in modeller.topology.atoms()] != [a.name for a in self.topology.atoms()]:
            raise RuntimeError("backmapping: a frame was rebuilt with other atoms than the first one (pdbfixer or "
                               "Modeller.addHydrogens chose differently); please report this")
        where = {(a.residue.index, a.name): a.index for a in modeller.topology.atoms()}
        atoms = list(self.skeleton_topology.atoms())
        mapped = [where[(atoms[j].residue.index, atoms[j].name)] for j in self._mapped]
        targets = skel_nm[self._mapped]
        s = self.settings
        done = self._minimiser.minimise(modeller.topology, modeller.positions, mapped, targets)
        bead_d = set(d_residues(skel_nm, self.skeleton_topology))      # D in the skeleton itself: kept, not a flaw
        new_d = set(d_residues(done.positions_nm, modeller.topology)) - bead_d
        if new_d and not done.failed:
            # a strained side chain pulled a restrained atom far enough to turn its CA: once more with restraints
            # STIFF_SCALE times stiffer (CA mapping: on every skeleton atom, N, C, O and CB at PULCHRA's and the
            # ideal places), kept where it turns fewer CAs
            if self.skeleton.mapping == "ca":
                every = [where[(a.residue.index, a.name)] for a in atoms]
                stiff = self._minimiser.minimise(modeller.topology, modeller.positions, every, skel_nm)
            else:
                stiff = self._minimiser.minimise(modeller.topology, modeller.positions, mapped, targets, STIFF_SCALE)
            if not stiff.failed and len(set(d_residues(stiff.positions_nm, modeller.topology)) - bead_d) < len(new_d):
                done = stiff
        xyz = done.positions_nm
        check = check_frame(xyz, modeller.topology, mapped, targets, _cis_in_beads(self._cis_keys, skel_nm),
                            exclude=self._minimiser.exclude, d_in_input=bead_d,
                            converged=not done.failed and done.rms_force <= s.tolerance)
        problems, generic = check.problems(modeller.topology, s.deviation_nm), "the minimisation did not converge"
        if done.failed:         # the minimiser's own failure first, in place of the generic phrase
            notes = [f"the minimisation failed ({done.failed})"] + [n for n in problems if n != generic]
        else:                   # the generic phrase with the RMS force it ended at
            notes = [f"{generic} (RMS force {done.rms_force:.3g} kJ/mol/nm > {s.tolerance:g})" if n == generic else n
                     for n in problems]
        return FrameResult(positions_nm=np.asarray(xyz, dtype=np.float64), check=check, notes=notes,
                           soft=done.soft)
