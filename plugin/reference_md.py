"""All-atom reference MD for force matching: amber14 + GBn2 implicit solvent in OpenMM, saving positions and
forces (``flashschnet-train md``).

The output ``.npz`` holds ``positions_nm`` [F, n_atoms, 3], ``forces_kj_mol_nm`` [F, n_atoms, 3] (the force
field's forces, constraint forces excluded: HBonds constraints keep each hydrogen with its heavy atom, and the
aggregated force map sums them in one bead), ``atoms`` (residue index, residue name, atom name, element per
atom), ``bonds`` [B, 2], ``temperature_K``, ``dt_fs``, ``interval`` and ``seed``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u

from ..errors import InputError


def reference_md(pdb: str, out: str, frames: int, interval: int = 500, temperature_K: float = 300.0,
                 dt_fs: float = 2.0, friction_per_ps: float = 1.0, seed: int = 1, platform: str = "CPU",
                 equilibration_steps: int = 1000, progress: bool = True, echo: Callable[[str], None] = print) -> str:
    """Run Langevin MD of the protein in ``pdb`` and write ``frames`` frames, ``interval`` steps apart, to ``out``.

    Water and ions in the PDB are removed (GBn2 implicit solvent); missing hydrogens are added (pH 7). Returns
    the file written: ``out``, with ``.npz`` added when it lacks it (atomic: a full disk leaves no partial file and
    raises :class:`~flashschnet.errors.OutputError`). Raises :class:`InputError` when amber14 cannot parameterise the structure (e.g. a ligand), for
    settings out of range, and when the frames cannot be held in the memory available.
    """
    from ..limits import check_finite, check_fits_in_memory, check_seed

    if frames < 1 or interval < 1 or equilibration_steps < 0:
        raise InputError(f"--frames and --interval must be >= 1 and --equilibration >= 0, got {frames}, {interval}, "
                         f"{equilibration_steps}")
    check_finite(dt_fs, "--dt", "fs", positive=True)
    check_finite(temperature_K, "--temperature", "K", positive=True)
    check_finite(friction_per_ps, "friction", "1/ps", nonnegative=True)
    check_seed(seed)
    from .platforms import checked_platform

    platform = checked_platform(platform)
    try:
        pdbfile = app.PDBFile(pdb)
    except Exception as exc:                          # OpenMM raises several types for bad PDB text
        raise InputError(f"{pdb}: OpenMM cannot read it as a PDB file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    ff = app.ForceField("amber14-all.xml", "implicit/gbn2.xml")
    modeller = app.Modeller(pdbfile.topology, pdbfile.getPositions(frame=0))
    modeller.deleteWater()
    ions = [r for r in modeller.topology.residues() if r.name in ("NA", "CL", "K", "MG", "CA", "ZN", "Na+", "Cl-")]
    if ions:
        modeller.delete(ions)
    try:
        modeller.addHydrogens(ff, pH=7.0)
        system = ff.createSystem(modeller.topology, nonbondedMethod=app.NoCutoff, constraints=app.HBonds)
    except ValueError as exc:
        raise InputError(f"{pdb}: amber14/GBn2 cannot parameterise it ({str(exc).splitlines()[0]}); remove "
                         "ligands and non-standard residues") from None
    n_atoms = modeller.topology.getNumAtoms()
    check_fits_in_memory(2 * frames * n_atoms * 3 * 4, f"--frames {frames} of {n_atoms} atoms (positions and forces)",
                         "save fewer frames")
    integrator = openmm.LangevinMiddleIntegrator(temperature_K * u.kelvin, friction_per_ps / u.picosecond,
                                                 dt_fs * u.femtosecond)
    integrator.setRandomNumberSeed(int(seed))
    sim = app.Simulation(modeller.topology, system, integrator, openmm.Platform.getPlatformByName(platform))
    atoms = [(a.residue.index, a.residue.name, a.name, a.element.symbol if a.element is not None else "")
             for a in modeller.topology.atoms()]
    bonds = np.array([(b[0].index, b[1].index) for b in modeller.topology.bonds()], dtype=np.int64)
    pos = np.empty((frames, len(atoms), 3), dtype=np.float32)
    frc = np.empty((frames, len(atoms), 3), dtype=np.float32)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=frames, unit="frame", desc="all-atom MD", dynamic_ncols=True)
    k = -1                                            # frame in progress (-1: minimisation, equilibration)
    try:
        sim.context.setPositions(modeller.positions)
        sim.minimizeEnergy(maxIterations=1000)
        sim.context.setVelocitiesToTemperature(temperature_K * u.kelvin, int(seed))
        if equilibration_steps:
            sim.step(int(equilibration_steps))
        for k in range(frames):
            sim.step(int(interval))
            st = sim.context.getState(getPositions=True, getForces=True)
            pos[k] = st.getPositions(asNumpy=True).value_in_unit(u.nanometer)
            frc[k] = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)
            if not np.isfinite(frc[k]).all():
                raise InputError(f"{pdb}: the all-atom simulation blew up at frame {k}; try a smaller --dt")
            if bar is not None:
                bar.update(1)
    except openmm.OpenMMException as exc:             # e.g. "Particle coordinate is NaN" (CPU platform)
        where = f"frame {k}" if k >= 0 else "minimisation/equilibration"
        raise InputError(f"{pdb}: the all-atom simulation blew up ({where}: {str(exc).splitlines()[0]}); try a "
                         "smaller --dt or a lower --temperature") from None
    finally:
        if bar is not None:
            bar.close()
    from ..atomic import atomic_write

    out = out if str(out).endswith(".npz") else f"{out}.npz"      # the name np.savez_compressed(path) gives it
    with atomic_write(out, "wb", what="writing the reference data") as f:   # no truncated .npz on a full disk
        np.savez_compressed(f, positions_nm=pos, forces_kj_mol_nm=frc,
                            atoms=np.array(atoms, dtype=object).astype(str), bonds=bonds, temperature_K=temperature_K,
                            dt_fs=dt_fs, interval=interval, seed=seed)
    echo(f"note: {frames} frames of {len(atoms)} atoms ({frames * interval * dt_fs * 1e-6:.4g} ns) in {out}")
    return out
