"""The report and checkpoint intervals a run gets when it is given none, and the warning for a run that would
write only its step-0 frame (flashschnet.openmm.runner.directory)."""
from __future__ import annotations

import pytest

from flashschnet.openmm.runner import (MAX_DCD_STEP, DynamicsSettings, default_checkpoint_interval,
                                       default_report_interval, few_frames_warning)


@pytest.mark.parametrize("steps, checkpoint, interval", [
    (200, None, 2), (500, None, 5), (1_000_000, None, 10_000), (150, None, 1), (99, None, 1), (0, None, 1),
    (10**30, None, MAX_DCD_STEP),                # the DCD header's limit
    (30_000, 1000, 250),                         # 300 does not divide 1000: the largest divisor below it
    (30_000, 3000, 300), (1000, 7, 7), (1000, 13, 1),
])
def test_default_report_interval_is_steps_over_100_and_divides_a_given_checkpoint_interval(steps, checkpoint,
                                                                                          interval):
    assert default_report_interval(steps, checkpoint) == interval
    if checkpoint:
        assert checkpoint % interval == 0


@pytest.mark.parametrize("report, checkpoint", [(1, 10), (100, 1000), (1000, 10_000), (3000, 9000), (20_000, 20_000)])
def test_default_checkpoint_interval_is_10_reports_at_most_10000_steps_apart_where_possible(report, checkpoint):
    assert default_checkpoint_interval(report) == checkpoint


def _settings(**kw):
    return DynamicsSettings(**dict(dict(out="o", steps=200, platform="Reference"), **kw))


def test_validate_resolves_none_to_the_defaults():
    s = _settings()
    s.validate()
    assert (s.report_interval, s.checkpoint_interval) == (2, 20)          # steps 0, 2, ..., 200: 101 frames
    s = _settings(steps=30_000, checkpoint_interval=1000)
    s.validate()
    assert (s.report_interval, s.checkpoint_interval) == (250, 1000)
    s = _settings(report_interval=7)                                      # a given interval is kept
    s.validate()
    assert (s.report_interval, s.checkpoint_interval) == (7, 70)


def test_few_frames_warning_names_both_options_and_what_to_pass():
    msg = few_frames_warning(5, 10)
    assert msg == ("--steps 5 with --report-interval 10 writes only the starting frame (step 0) and its log row; "
                   "leave --report-interval out (here 1: 6 frames) or pass --steps of at least 10")
    assert few_frames_warning(10, 10) is None                             # steps 0 and 10: two frames
    assert few_frames_warning(0, 10) is None                              # 0 steps: the start alone, on purpose
