"""What every reporter here shares: OpenMM's reporting schedule (the units of the numbers they record:
:mod:`flashschnet.openmm.units`)."""
from __future__ import annotations


def steps_to_next(simulation, interval: int) -> int:
    """Steps from the simulation's current step to the next multiple of ``interval``."""
    return interval - simulation.currentStep % interval
