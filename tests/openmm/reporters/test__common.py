"""flashschnet.openmm.reporters._common: steps_to_next, the reporting schedule every reporter here shares -- the steps
from a Simulation's current step to the next multiple of the interval (a whole interval when it stands on one)."""
from __future__ import annotations

import openmm
import openmm.app as app

from flashschnet.openmm.reporters._common import steps_to_next


def test_steps_to_the_next_multiple_of_the_interval():
    top = app.Topology()
    top.addAtom("X", app.element.carbon, top.addResidue("X", top.addChain()))
    system = openmm.System()
    system.addParticle(12.0)
    sim = app.Simulation(top, system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    sim.context.setPositions([openmm.Vec3(0.0, 0.0, 0.0)])
    for step, interval, expected in [(0, 10, 10), (7, 10, 3), (10, 10, 10), (11, 10, 9), (123, 1, 1), (5, 50, 45)]:
        sim.currentStep = step
        assert steps_to_next(sim, interval) == expected, (step, interval)
    sim.currentStep = 0
    sim.step(4)                                  # the Simulation's own count
    assert sim.currentStep == 4 and steps_to_next(sim, 10) == 6
