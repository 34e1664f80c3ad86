"""PDB -> MARTINI 3 system -> OpenMM Simulation -> trajectory: the job behind ``flashschnet-martini``.

Output directory layout (like ``flashschnet-simulate``'s)::

    DIR/run.json           the run's settings (a resumed run must match them)
    DIR/system/            cleaned.pdb (the PDB as cleaned for both force fields: what martinize2 read), martinize2
                           and insane output and our system.top (cg.pdb is the mapped PDB)
    DIR/topology.pdb       the whole system after energy minimisation (topology for the DCD)
    DIR/trajectory.dcd     every particle, with the box; positions are not wrapped, so molecules stay whole
    DIR/log.csv            step, time_ps, replica (0), potential_energy_kJ_mol, temperature_K, ns_per_day
    DIR/checkpoint.chk     the last good state (atomic); --resume continues from it
"""
from __future__ import annotations

import os
import random
from dataclasses import asdict, dataclass, replace
from typing import Callable, ClassVar, Optional, Sequence

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u

from ...errors import InputError
from ...cg.notes import format_list
from ..cleaning import CLEANED_NAME, clean_pdb
from ..runner import (FLAGS, DynamicsSettings, MDJob, RunResult, flag, make_run_dir, open_run_dir,
                      require_new_run_inputs, resume_already_done, run_dir, run_job)
from ..runner.resume import record_files
from .prepare import FORCEFIELD_FILES, check_forcefield_dir, prepare_system
from .system import build_system, read_gro
from .topology import Topology, read_topology

#: limits of the box set-up (see :meth:`MartiniSettings.validate`)
MAX_PADDING_NM = 10.0
MAX_SALT_MOLAR = 6.0

_FIXED_ON_RESUME = ("pdb", "forcefield_dir", "dt_fs", "temperature_K", "friction_per_ps", "report_interval",
                    "checkpoint_interval", "platform", "seed", "padding_nm", "salt_molar", "elastic", "ignore", "go")

#: input files recorded in run.json by content: the PDB (compared when given; a resume reads system/) and the
#: force-field files (a resume reads them again)
_FILES = {"pdb": (), "forcefield_dir": FORCEFIELD_FILES}


@dataclass(kw_only=True)
class MartiniSettings(DynamicsSettings):
    """Everything that defines a MARTINI run: the dynamics (:class:`~flashschnet.openmm.runner.DynamicsSettings`;
    a 20 fs step by default, at most 40 fs) and the system below (units in the names: nm, mol/L); keyword
    arguments only."""

    MAX_DT_FS: ClassVar[float] = 40.0
    DT_HINT: ClassVar[str] = " (MARTINI runs at 20-30 fs)"

    pdb: Optional[str]                             # None on resume: the run's
    forcefield_dir: Optional[str]                  # None on resume: the run's (checked by content)
    dt_fs: float = 20.0
    padding_nm: float = 1.5
    salt_molar: float = 0.15
    elastic: bool = True                           # martinize2's elastic network (off with go)
    go: bool = False                               # martinize2's Go model (MartiniGo) instead of the elastic network
    ignore: str = "HOH"                            # comma-separated residue names martinize2 drops
    minimize_iterations: int = 5000

    def validate(self) -> None:
        """Check the settings (one-line :class:`InputError` naming the option); fill in the default intervals."""
        super().validate()
        if not 1.1 <= self.padding_nm <= MAX_PADDING_NM:    # NaN fails too
            raise InputError(f"{flag('padding_nm')} {self.padding_nm} nm is outside 1.1-{MAX_PADDING_NM:g} nm: below "
                             "the 1.1 nm cut-off a protein sees its periodic image, above it the water box alone holds "
                             "millions of particles (default 1.5)")
        if not 0.0 <= self.salt_molar <= MAX_SALT_MOLAR:
            raise InputError(f"{flag('salt_molar')} must be between 0 and {MAX_SALT_MOLAR:g} mol/L (NaCl saturates "
                             f"near 6 M), got {self.salt_molar}")
        if not 0 <= self.minimize_iterations <= 2**31 - 1:
            raise InputError(f"{flag('minimize_iterations')} must be between 0 and {2**31 - 1}, got "
                             f"{self.minimize_iterations}")
        check_forcefield_dir(self.forcefield_dir)
        if self.go and self.elastic:
            raise InputError(f"{flag('go')} replaces the elastic network (martinize2 -go, no -elastic); give "
                             f"{flag('go')} alone or {flag('elastic')} alone")

def openmm_topology(top: Topology, box_nm) -> app.Topology:
    """OpenMM topology of a MARTINI system: one chain per molecule, residues and bead names from the
    topology's [ atoms ], no elements; the rectangular box ``box_nm`` (3 lengths, nm)."""
    omm = app.Topology()
    for name, count in top.molecules:
        mol = top.moleculetypes[name]
        for _ in range(count):
            chain = omm.addChain(id=name)
            residue, key = None, None
            for atom in mol.atoms:
                # a new residue whenever the residue changes: MartiniGo's virtual sites come after every bead, with
                # the residue numbers of the beads they sit on (OpenMM wants a residue's atoms contiguous)
                if (atom.resnr, atom.resname) != key:
                    key = (atom.resnr, atom.resname)
                    residue = omm.addResidue(atom.resname, chain, id=str(atom.resnr))
                omm.addAtom(atom.name, None, residue)
    omm.setPeriodicBoxVectors([openmm.Vec3(float(box_nm[0]), 0, 0), openmm.Vec3(0, float(box_nm[1]), 0),
                               openmm.Vec3(0, 0, float(box_nm[2]))] * u.nanometer)
    return omm


def degrees_of_freedom(system: openmm.System) -> int:
    """3 per particle with mass (virtual sites have none) minus one per constraint."""
    massive = sum(1 for i in range(system.getNumParticles())
                  if system.getParticleMass(i).value_in_unit(u.dalton) > 0 and not system.isVirtualSite(i))
    return 3 * massive - system.getNumConstraints()


def _open(s: MartiniSettings, out: str, resume: bool, given: Optional[Sequence[str]], write: bool = True) -> None:
    """``out`` opened for a new run of ``s``, or for continuing the run there (``resume``: the settings not
    ``given`` taken from its run.json, the given ones that fix the run and the input files checked against it)."""
    given = set(given) if given is not None else {k for k, v in asdict(s).items() if v is not None}
    for key, value in open_run_dir(out, resume, asdict(s), _FIXED_ON_RESUME, given=given, files=_FILES,
                                   needed=("forcefield_dir",), defaults={"go": False}, options=FLAGS,
                                   write=write).items():
        setattr(s, key, value)


def check_resume(settings: MartiniSettings) -> None:
    """What :func:`run_martini` with ``resume=True`` checks of the run it would continue, on a copy of
    ``settings``, nothing run or written (``flashschnet-compare`` calls it before either run starts)."""
    s = replace(settings)
    _open(s, run_dir(s.out), True, None, write=False)


def run_martini(settings: MartiniSettings, resume: bool = False, progress: bool = True,
                echo: Callable[[str], None] = print, given: Optional[Sequence[str]] = None) -> RunResult:
    """Build (or, with ``resume``, reload) the MARTINI 3 system of ``settings.pdb`` and run Langevin dynamics;
    see the module docstring for the outputs. Raises :class:`InputError` for bad input (missing force-field
    files, a PDB martinize2 cannot map, ...) and :class:`SimulationInstabilityError` after keeping the last good
    checkpoint.

    ``given``: the settings the caller chose; a resumed run takes the others from its run.json, checks the given
    ones that fix the run, and compares the PDB and the force-field files by content
    (:mod:`~flashschnet.openmm.runner.resume`). Default: every setting that is not None. A resume of a run already
    at ``steps`` changes nothing and returns ``nothing_to_do=True``."""
    s = settings
    out = run_dir(s.out)
    _open(s, out, resume, given)
    s.forcefield_dir = os.path.abspath(s.forcefield_dir) if s.forcefield_dir else s.forcefield_dir
    require_new_run_inputs(resume, [("the PDB file", s.pdb), ("--forcefield-dir", s.forcefield_dir),
                                    ("--steps", s.steps)])
    s.validate()
    done = resume_already_done(out, s.steps, replicas=1) if resume else None
    if done is not None:
        return done
    if s.seed is None:
        s.seed = random.SystemRandom().randrange(1, 2**31 - 1)
    ignore = [r.strip() for r in s.ignore.split(",") if r.strip()]

    # 1. martinize2 + insane (a resumed run reuses the files) ---------------------------------------------------
    folder = os.path.join(out, "system")
    if not resume:
        if not os.path.isfile(s.pdb):
            raise InputError(f"{s.pdb}: {'is a directory, not' if os.path.isdir(s.pdb) else 'no such file; give'} "
                             "a PDB file")
        structure = clean_pdb(s.pdb)           # bad input fails here, before any output
        if structure.n_residues < 2:
            raise InputError(f"{s.pdb}: only {structure.n_residues} amino-acid residue after cleaning; martinize2 "
                             "maps chains of at least 2 residues: give a peptide or protein")
        if structure.incomplete_backbone:
            raise InputError(f"{s.pdb}: {len(structure.incomplete_backbone)} residues lack backbone atoms (N, CA or "
                             f"C): {format_list(structure.incomplete_backbone, 3)}; martinize2 needs every backbone "
                             "atom: complete the structure (e.g. MODELLER, or PULCHRA for a CA trace) or remove those "
                             "residues")
        for note in structure.notes:
            echo(f"note: {note}")
        make_run_dir(out)
        os.makedirs(folder, exist_ok=True)
        cleaned = structure.write(os.path.join(folder, CLEANED_NAME))
        echo(f"building the MARTINI 3 system of {s.pdb} (martinize2, insane) in {folder}")
        prep = prepare_system(cleaned, s.forcefield_dir, folder, name="protein", padding_nm=s.padding_nm,
                              salt_molar=s.salt_molar, seed=s.seed, ignore=ignore, elastic=s.elastic, go=s.go)
        for w in prep.warnings[:5]:
            echo(f"note: martinize2: {w}")
        if len(prep.warnings) > 5:
            echo(f"note: martinize2 gave {len(prep.warnings) - 5} more warnings (see {folder}/martinize2.log)")
        counts = ", ".join(f"{m} x{c}" for m, c in prep.molecules)
        echo(f"note: {prep.n_protein_beads} protein beads; box {prep.box_nm:.2f} nm (cubic); molecules: {counts}")
        n_pieces = sum(c for _, c in prep.protein_molecules)
        if n_pieces > structure.n_chains:
            held = " or Go contacts" if s.go else " or elastic-network bonds" if s.elastic else ""
            echo(f"note: martinize2 made {n_pieces} protein molecules of {structure.n_chains} chain"
                 f"{'s' if structure.n_chains != 1 else ''}: it starts a new molecule at each chain break, with no "
                 f"bonds{held} across it; model the missing residues (e.g. pdbfixer, MODELLER) to keep the "
                 "pieces together")
    top = read_topology(os.path.join(folder, "system.top"), include_dirs=[s.forcefield_dir])
    pos, box = read_gro(os.path.join(folder, "system.gro"))
    if len(pos) != top.n_particles():
        raise InputError(f"{folder}: system.gro has {len(pos)} particles but system.top describes {top.n_particles()}")

    # 2. System; a new run starts minimised ---------------------------------------------------------------------
    system = build_system(top, box)
    topology = openmm_topology(top, box)
    n = system.getNumParticles()
    atoms = list(topology.atoms())

    def start(simulation) -> None:
        simulation.context.setPositions(pos)
        simulation.context.computeVirtualSites()
        e0 = simulation.context.getState(getEnergy=True).getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        if s.minimize_iterations:
            simulation.minimizeEnergy(maxIterations=s.minimize_iterations)
        state = simulation.context.getState(getEnergy=True, getPositions=True)
        e1 = state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        echo(f"note: energy minimisation {e0:.6g} -> {e1:.6g} kJ/mol")
        from ...atomic import atomic_write

        with atomic_write(os.path.join(out, "topology.pdb"), "w", what="writing the topology") as f:
            app.PDBFile.writeFile(topology, state.getPositions(), f)

    def label(i: int) -> str:
        a = atoms[i]
        return f"particle {i} ({a.residue.chain.id} {a.residue.name}{a.residue.id} {a.name})"

    # 3. run (the scaffold shared with flashschnet-simulate): one replica, its energy the state's ---------------
    job = MDJob(out=out, settings=s, topology=topology, system=system, replicas=1, particles=n,
                trajectories=[os.path.join(out, "trajectory.dcd")], trajectory_topology=topology,
                masses_amu=np.array([system.getParticleMass(i).value_in_unit(u.dalton) for i in range(n)]),
                start=start, run_json=record_files({k: v for k, v in asdict(s).items() if k not in ("out", "threads")},
                                                   _FILES),
                label=label, dof=degrees_of_freedom(system),
                properties={"Threads": str(int(s.threads))} if s.threads and s.platform == "CPU" else {},
                desc=f"MARTINI {n} particles")
    return run_job(job, resume=resume, progress=progress, echo=echo)
