"""flashschnet.openmm.simulate: a CG run's settings (RunSettings) without running anything: the defaults validate()
fills in, the outer step and inner steps of multiple time stepping, the ladder and ensemble plan of a
parallel-tempering or multi-worker run, and settings refused in one line naming the option. (Runs of
flashschnet-simulate: tests/scripts; the settings every run shares: tests/openmm/runner/test_settings.py.)"""
from __future__ import annotations

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.ladder import parse_temperatures
from flashschnet.openmm.simulate import DEFAULT_TEMPERATURE_K, RunSettings


def _settings(**kw) -> RunSettings:
    return RunSettings(**{"pdb": "a.pdb", "model": "m.pt", "out": "o", "steps": 1000, **kw})


def test_validate_fills_in_the_defaults_of_a_plain_run():
    s = _settings(replicas=3)
    assert s.temperature_K is None and s.report_interval is None
    s.validate()
    assert (s.temperature_K, s.report_interval, s.checkpoint_interval) == (DEFAULT_TEMPERATURE_K, 10, 100)
    assert not s.ensemble and s.ladder() == [300.0, 300.0, 300.0] and (s.step_fs, s.inner_steps) == (4.0, 1)
    d = s.dynamics()
    assert not d.mts and d.step_ps == pytest.approx(0.004)


def test_multiple_time_stepping_steps_by_the_outer_step():
    s = _settings(dt_fs=2.0, mts="inner.pt", outer_dt_fs=6.0)
    s.validate()
    assert (s.step_fs, s.inner_steps) == (6.0, 3)
    assert _settings(dt_fs=2.0, mts="inner.pt").step_fs == 4.0                 # (validate() asks for --outer-dt)
    with pytest.raises(ValueError, match="the inner model must be loaded"):
        s.dynamics()


def test_a_tempering_run_is_an_ensemble_of_one_walker_per_temperature():
    s = _settings(temperatures="300:400:3", exchange_interval=10, report_interval=10, seed=4)
    s.validate()
    assert s.ensemble and s.temperature_K is None and s.ladder() == parse_temperatures("300:400:3")
    p = s.plan("run", seed=4)
    assert (p.out, p.steps, p.exchange_interval, p.report_interval, p.blocks, p.threads) == ("run", 1000, 10, 10, 1,
                                                                                             None)
    assert p.temperatures_K == s.ladder() and p.dt_fs == 4.0 and p.platform == "Reference"
    two = _settings(temperatures="300:400:3", workers=2, threads=None)
    two.validate()
    assert (two.plan("run", seed=1).blocks, two.plan("run", seed=1).threads) == (2, 1)   # a process per worker
    replicas = _settings(replicas=4, blocks=2)
    replicas.validate()
    p = replicas.plan("run", seed=1)
    assert replicas.ensemble and p.temperatures_K == [300.0] * 4 and p.exchange_interval is None and p.blocks == 2


@pytest.mark.parametrize("kw, message", [
    ({"replicas": 0}, "--replicas must be >= 1, got 0"),
    ({"priors": "  "}, "--priors is empty; give a prior file"),
    ({"on_blowup": "explode"}, "--on-blowup must be stop or drop, got 'explode'"),
    ({"outer_dt_fs": 8.0}, "--outer-dt sets the outer step of multiple time stepping: it needs --mts"),
    ({"mts": "inner.pt", "outer_dt_fs": 6.0}, "--outer-dt 6 fs must be a whole multiple of --dt 4 fs"),
    ({"temperatures": "300:400:3", "replicas": 2}, "--replicas 2 with --temperatures: parallel tempering runs one"),
    ({"temperatures": "300,300.04"}, "--temperatures: two temperatures share the name T300.0"),
    ({"temperatures": "300:400:3", "workers": 5}, "--workers 5: must be between 1 and the number of walkers (3: one "
                                                   "per temperature)"),
    ({"replicas": 2, "workers": 1, "scheduler": "tcp://h:8786"}, "--workers and --scheduler exclude each other"),
    ({"replicas": 2, "scheduler": " "}, "--scheduler is empty"),
    ({"replicas": 2, "blocks": 3}, "--blocks 3: must be between 1 and the number of walkers (2)"),
])
def test_bad_settings_are_one_line_naming_the_option(kw, message):
    with pytest.raises(InputError) as exc:
        _settings(**kw).validate()
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value), str(exc.value)
