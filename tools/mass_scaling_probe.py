"""Probe (not a product path): heavier CG beads, longer Langevin steps -- is single stepping still stable?

    python tools/mass_scaling_probe.py --scale 6 --dt 10 --ps 40

The Boltzmann distribution of positions does not depend on the masses, so scaling every bead's mass by S leaves
what a run samples unchanged while the fastest vibrations slow by sqrt(S); MARTINI's beads weigh 72 amu, ours
(mlcg's heavy-atom masses) 12-16. Builds the System of ``flashschnet-simulate`` (trp-cage, the trained model, the
default network, ``--replicas`` packed replicas), scales the masses, runs OpenMM's LangevinMiddleIntegrator at
``--dt`` fs (friction 1/ps, 300 K, 1 thread) and prints each replica's kinetic temperature over the second half of
``--ps`` (from 40 velocity samples), or where it blew up. What this does to sampling per wall-clock hour (the
dynamics are slower, the steps longer) is the open question of docs/sampling.md: measure ESS/hour before using it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=6.0, help="bead mass multiplier")
    p.add_argument("--dt", type=float, default=10.0, help="time step, fs")
    p.add_argument("--ps", type=float, default=40.0, help="simulated ps")
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    import flashschnet
    import openmm
    import openmm.unit as u
    from flashschnet.openmm import build_system, replica_positions_nm

    R = args.replicas
    model = flashschnet.load_model(os.path.join(ROOT, "examples", "trpcage_trained.pt"))
    mol = flashschnet.map_pdb(os.path.join(ROOT, "examples", "1L2Y_trpcage.pdb"))
    system = build_system(mol, model, replicas=R)
    n = system.getNumParticles()
    for i in range(n):
        system.setParticleMass(i, system.getParticleMass(i) * args.scale)
    masses = np.array([system.getParticleMass(i).value_in_unit(u.dalton) for i in range(n)])
    integrator = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, args.dt * u.femtosecond)
    integrator.setRandomNumberSeed(args.seed)
    context = openmm.Context(system, integrator, openmm.Platform.getPlatformByName("CPU"), {"Threads": "1"})
    context.setPositions(replica_positions_nm(mol, R))
    context.setVelocitiesToTemperature(300 * u.kelvin, args.seed)
    per, chunk, temps, t0 = n // R, max(int(args.ps * 1000 / args.dt) // 40, 1), [], time.perf_counter()
    kb = u.MOLAR_GAS_CONSTANT_R.value_in_unit(u.kilojoule_per_mole / u.kelvin)
    for c in range(40):
        integrator.step(chunk)
        v = context.getState(getVelocities=True).getVelocities(asNumpy=True).value_in_unit(u.nanometer / u.picosecond)
        ke = 0.5 * (masses[:, None] * v ** 2).sum(1)
        t = [2 * ke[r * per:(r + 1) * per].sum() / (3 * per * kb) for r in range(R)]
        if not np.all(np.isfinite(t)) or max(t) > 2000:
            print(f"mass x{args.scale:g}, {args.dt:g} fs: blew up after {(c + 1) * chunk * args.dt / 1000:g} ps")
            return 3
        temps.append(t)
    t = np.array(temps)[20:]
    print(f"mass x{args.scale:g}, {args.dt:g} fs, {args.ps:g} ps: kinetic T per replica "
          f"{', '.join(f'{x:.1f}' for x in t.mean(0))} K, mean {t.mean():.1f} K ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
