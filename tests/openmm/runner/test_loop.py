"""The chunk of the step loop plain runs and an ensemble's walker blocks share (``runner.loop.step_with_rescue``):
OpenMM's refusal is rescued by the health check's drop policy (the skipped reports made) or becomes one
SimulationInstabilityError naming the step, and the checkpoint when the caller knows it."""
from __future__ import annotations

import openmm
import pytest

from flashschnet.errors import SimulationInstabilityError
from flashschnet.openmm.runner.loop import step_with_rescue


class _Reporter:
    def __init__(self, every):
        self.every, self.reports = every, []

    def describeNextReport(self, simulation):
        return {"steps": self.every - simulation.currentStep % self.every}

    def report(self, simulation, state):
        self.reports.append((simulation.currentStep, state))


class _Context:
    def getState(self, **kw):
        return "state"


class _Simulation:
    """Steps all the way, then OpenMM refuses (the CPU platform's check after the last force evaluation)."""

    def __init__(self, reporters):
        self.currentStep, self.reporters, self.context = 0, reporters, _Context()

    def step(self, n):
        self.currentStep += n
        raise openmm.OpenMMException("Particle coordinate is NaN\nmore detail")


class _Health:
    def __init__(self, rescues):
        self.rescues, self.errors = rescues, []

    def rescue(self, simulation, error):
        self.errors.append(error)
        return self.rescues


def test_a_rescued_refusal_goes_on_with_the_reports_it_skipped():
    due, later = _Reporter(10), _Reporter(20)
    sim, health = _Simulation([due, later]), _Health(rescues=True)
    step_with_rescue(sim, 10, health)
    assert health.errors == ["Particle coordinate is NaN"]
    assert due.reports == [(10, "state")] and later.reports == []


@pytest.mark.parametrize("hint, tail", [(None, ""), (lambda: "last good checkpoint: step 0 in c.chk",
                                                      "; last good checkpoint: step 0 in c.chk")])
def test_an_unrescued_refusal_is_one_error_naming_the_step(hint, tail):
    with pytest.raises(SimulationInstabilityError) as err:
        step_with_rescue(_Simulation([]), 10, _Health(rescues=False), hint)
    assert str(err.value) == "step 10: OpenMM stopped: Particle coordinate is NaN" + tail
