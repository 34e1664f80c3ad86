"""flashschnet.openmm.runner.settings: one DynamicsSettings under the CG, MARTINI and ensemble settings (run.json keys
as before, so old run directories resume), its checks written once (each force field's time-step bound), and FLAGS, the
one map between run settings and command-line flags (messages one way, the command lines' options the other)."""
from __future__ import annotations

from dataclasses import asdict

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.ensemble.driver import EnsemblePlan
from flashschnet.openmm.martini.run import MartiniSettings
from flashschnet.openmm.runner import DynamicsSettings, flag
from flashschnet.openmm.simulate import RunSettings
from flashschnet.scripts import martini, simulate
from flashschnet.scripts._cli import given_settings

#: run.json's keys before the settings shared DynamicsSettings (what a resume of an older run reads)
CG_KEYS = {"pdb", "model", "out", "steps", "replicas", "platform", "seed", "dt_fs", "temperature_K", "friction_per_ps",
           "report_interval", "checkpoint_interval", "mapping", "priors", "precision", "backend", "quantize",
           "network_force", "threads", "max_force", "on_blowup", "matmul", "cuda_graph", "compress", "compress_knots",
           "temperatures", "exchange_interval", "blocks", "workers", "scheduler",
           "mts", "outer_dt_fs",   # multiple time stepping: a run without them reads as single stepping
           "mts_any_teacher"}      # an inner model of another teacher accepted: a run without it did not
MARTINI_KEYS = {"pdb", "forcefield_dir", "out", "steps", "platform", "seed", "dt_fs", "temperature_K",
                "friction_per_ps", "report_interval", "checkpoint_interval", "padding_nm", "salt_molar", "elastic",
                "go", "ignore", "minimize_iterations", "threads", "max_force"}


def test_the_settings_keep_their_fields_and_defaults():
    cg = RunSettings(pdb="a.pdb", model="m.pt", out="o", steps=10)
    mt = MartiniSettings(pdb="a.pdb", forcefield_dir="ff", out="o", steps=10)
    assert set(asdict(cg)) == CG_KEYS and set(asdict(mt)) == MARTINI_KEYS
    assert (cg.dt_fs, cg.temperature_K, mt.dt_fs, mt.temperature_K) == (4.0, None, 20.0, 300.0)
    assert all(issubclass(c, DynamicsSettings) for c in (RunSettings, MartiniSettings, EnsemblePlan))


def test_each_force_field_has_its_own_default_platform():
    """A CG run's is Reference (faster than CPU for a CG System: docs/sampling.md), MARTINI's CPU; filled in on
    construction (run.json records it); a given platform, and None passed explicitly, behave as the CLI needs."""
    cg = RunSettings(pdb="a.pdb", model="m.pt", out="o", steps=10)
    assert cg.platform == "Reference" and asdict(cg)["platform"] == "Reference"
    assert RunSettings(pdb="a", model="m", out="o", steps=10, platform=None).platform == "Reference"
    assert RunSettings(pdb="a", model="m", out="o", steps=10, platform="CPU").platform == "CPU"
    assert MartiniSettings(pdb="a", forcefield_dir="f", out="o", steps=10, platform=None).platform == "CPU"
    args = simulate.build_parser().parse_args(["a.pdb", "--model", "m.pt", "--out", "o", "--steps", "10"])
    assert "platform" not in given_settings(args, RunSettings)       # not given: a resume keeps the run's own


@pytest.mark.parametrize("make, message", [
    (lambda: RunSettings(pdb="a", model="m", out="o", steps=10, dt_fs=60.0), "--dt 60.0 fs is outside (0, 50]"),
    (lambda: MartiniSettings(pdb="a", forcefield_dir="f", out="o", steps=10, dt_fs=45.0),
     "--dt 45.0 fs is outside (0, 40] (MARTINI runs at 20-30 fs)"),
    (lambda: DynamicsSettings(out="o", steps=100, report_interval=10, checkpoint_interval=15),
     "--checkpoint-interval 15 must be a positive multiple of --report-interval 10"),
    (lambda: DynamicsSettings(out="o", steps=10, friction_per_ps=-1.0), "--friction must be a non-negative finite"),
    (lambda: RunSettings(pdb="a", model="m", out="o", steps=10, platform="Reference", network_force="c"),
     "--network-force must be torch or python, got 'c'"),
    (lambda: RunSettings(pdb="a", model="m", out="o", steps=10, platform="Reference", compress="none",
                         compress_knots=64),
     "--compress-knots needs a compression: pass --compress float32, float16 or bfloat16"),
])
def test_the_dynamics_and_model_checks_name_the_flags(make, message):
    with pytest.raises(InputError) as exc:
        make().validate()
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_the_command_lines_find_each_fields_option_through_flag():
    assert (flag("dt_fs"), flag("temperature_K"), flag("compress_knots"), flag("pdb")) == \
        ("--dt", "--temperature", "--compress-knots", "PDB")
    args = simulate.build_parser().parse_args(["x.pdb", "--out", "o", "--dt", "2", "--temperature", "310",
                                               "--compress", "float16", "--compress-knots", "64", "--cuda-graph"])
    assert given_settings(args, RunSettings) == {"pdb": "x.pdb", "dt_fs": 2.0, "temperature_K": 310.0,
                                                 "compress": "float16", "compress_knots": 64, "cuda_graph": True}
    args = martini.build_parser().parse_args(["x.pdb", "--out", "o", "--padding", "2", "--salt", "0.1",
                                              "--no-elastic"])
    assert given_settings(args, MartiniSettings, exclude=("out", "elastic")) == {"pdb": "x.pdb", "padding_nm": 2.0,
                                                                                 "salt_molar": 0.1}
