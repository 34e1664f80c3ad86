"""The settings every run shares (:class:`DynamicsSettings`) and the command-line spelling of every run setting
(:data:`FLAGS`, :func:`flag`).

:class:`~flashschnet.openmm.simulate.RunSettings` (CG runs and their ensembles),
:class:`~flashschnet.openmm.martini.run.MartiniSettings` and the ensemble driver's
:class:`~flashschnet.openmm.ensemble.driver.EnsemblePlan` build on :class:`DynamicsSettings`; its fields are keys of
``run.json`` as they are (a field here is recorded and resumed like the force field's own).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from ...errors import InputError
from ...limits import check_finite, check_seed, check_threads
from ..platforms import checked_platform
from .directory import MAX_DCD_STEP, default_checkpoint_interval, default_report_interval
from .resume import option_name

#: the settings whose command-line spelling is not ``--`` + the field name with dashes (``compress_knots`` ->
#: ``--compress-knots``): the one map between a run's fields and the options of flashschnet-simulate and
#: flashschnet-martini (their messages name the options with :func:`flag`; the command lines find a field's
#: option with it)
FLAGS = {"pdb": "PDB", "dt_fs": "--dt", "temperature_K": "--temperature", "friction_per_ps": "--friction",
         "padding_nm": "--padding", "salt_molar": "--salt", "elastic": "--no-elastic", "outer_dt_fs": "--outer-dt"}


def flag(field: str) -> str:
    """The command-line spelling of the run setting ``field`` (:data:`FLAGS`, else ``--field-with-dashes``)."""
    return option_name(field, FLAGS)


@dataclass(kw_only=True)
class DynamicsSettings:
    """The dynamics every run shares (units in the names: fs, K, 1/ps, kJ/mol/nm); keyword arguments only.

    Attributes
    ----------
    out : str
        The run directory.
    steps : int or None
        Total integration steps (None on resume: the run's own).
    platform : str or None
        OpenMM platform name; None: the run's default, ``DEFAULT_PLATFORM`` (filled in on construction, so
        run.json records the platform that ran).
    seed : int or None
        Velocity and integrator seed, 1 .. 2**31 - 1; None: a random one (recorded in run.json).
    dt_fs : float
        Time step, fs, in ``(0, MAX_DT_FS]``.
    temperature_K : float or None
        Langevin temperature, K (positive).
    friction_per_ps : float
        Langevin friction, 1/ps (non-negative).
    report_interval : int or None
        Steps between frames and log rows; None: ``steps // 100`` (:func:`~.directory.default_report_interval`).
    checkpoint_interval : int or None
        Steps between checkpoints, a multiple of ``report_interval``; None: 10 report intervals, at most 10000
        steps where possible (:func:`~.directory.default_checkpoint_interval`).
    threads : int or None
        CPU threads (1 .. 1024); None: the default.
    max_force : float
        A force component above this (kJ/mol/nm) is a blow-up; inf: no limit.
    """

    out: str
    steps: Optional[int]
    platform: Optional[str] = None
    seed: Optional[int] = None
    dt_fs: float = 4.0
    temperature_K: Optional[float] = 300.0
    friction_per_ps: float = 1.0
    report_interval: Optional[int] = None
    checkpoint_interval: Optional[int] = None
    threads: Optional[int] = None
    max_force: float = 1.0e5

    #: the largest time step (fs) and what the message about a bad one adds
    MAX_DT_FS: ClassVar[float] = 50.0
    DT_HINT: ClassVar[str] = ""
    #: the platform of a run given none (a CG run's is Reference: :class:`~flashschnet.openmm.simulate.RunSettings`)
    DEFAULT_PLATFORM: ClassVar[str] = "CPU"

    def __post_init__(self) -> None:
        if self.platform is None:
            self.platform = self.DEFAULT_PLATFORM

    def validate(self) -> None:
        """Check the dynamics (see :mod:`flashschnet.limits`) and fill in the default intervals; raises a one-line
        :class:`InputError` naming the command-line option (:func:`flag`)."""
        if self.steps < 0:
            raise InputError(f"{flag('steps')} must be >= 0, got {self.steps}")
        if not (0.0 < self.dt_fs <= self.MAX_DT_FS):
            raise InputError(f"{flag('dt_fs')} {self.dt_fs} fs is outside (0, {self.MAX_DT_FS:g}]{self.DT_HINT}")
        self._check_temperature()
        check_finite(self.friction_per_ps, flag("friction_per_ps"), "1/ps", nonnegative=True)
        if self.report_interval is None:       # "auto": about 100 frames
            self.report_interval = default_report_interval(self.steps, self.checkpoint_interval)
        if not 1 <= self.report_interval <= MAX_DCD_STEP:
            raise InputError(f"{flag('report_interval')} must be between 1 and {MAX_DCD_STEP} (DCD files hold step "
                             f"numbers as C ints), got {self.report_interval}")
        check_seed(self.seed, flag("seed"))
        check_threads(self.threads, flag("threads"))
        if not self.max_force > 0.0:
            raise InputError(f"{flag('max_force')} must be positive (kJ/mol/nm; inf: no limit), got {self.max_force}")
        if self.checkpoint_interval is None:
            self.checkpoint_interval = default_checkpoint_interval(self.report_interval)
        if self.checkpoint_interval < 1 or self.checkpoint_interval % self.report_interval:
            raise InputError(f"{flag('checkpoint_interval')} {self.checkpoint_interval} must be a positive multiple of "
                             f"{flag('report_interval')} {self.report_interval}")
        self.platform = checked_platform(self.platform)       # "cuda" is CUDA, as OpenMM spells it

    def _check_temperature(self) -> None:
        check_finite(self.temperature_K, flag("temperature_K"), "K", positive=True)

    @property
    def step_fs(self) -> float:
        """The integrator's step, fs: what one of ``steps`` advances (``dt_fs``; the outer step of a run with
        multiple time stepping, :class:`~flashschnet.openmm.simulate.RunSettings`)."""
        return float(self.dt_fs)


def check_mts(mts: Optional[str], outer_dt_fs: Optional[float], step_fs: float, dt_fs: float,
              max_dt_fs: float) -> None:
    """Check a run's multiple-time-step settings: ``--outer-dt`` only with, and always with, ``--mts``; an outer
    step ``step_fs`` (fs) in (0, ``max_dt_fs``] and a whole multiple of the inner step ``dt_fs``; one-line
    :class:`InputError`."""
    o, m, dt = flag("outer_dt_fs"), flag("mts"), flag("dt_fs")
    if outer_dt_fs is not None and not mts:
        raise InputError(f"{o} sets the outer step of multiple time stepping: it needs {m} INNER_MODEL "
                         "(flashschnet-distill writes one)")
    if not mts:
        return
    if not str(mts).strip():
        raise InputError(f"{m} is empty; give an inner model file (flashschnet-distill MODEL PDB --out inner.pt)")
    if outer_dt_fs is None:     # no default: the stable outer step is the model's and the inner model's, measured
        raise InputError(f"{m} needs {o} FS, the outer step: measure the longest stable one for your model and "
                         "inner model (tools/benchmarks/dmts_validate.py; docs/sampling.md has trp-cage's)")
    if not (0.0 < step_fs <= max_dt_fs):
        raise InputError(f"{o} {step_fs:g} fs is outside (0, {max_dt_fs:g}]")
    k = step_fs / dt_fs
    if round(k) < 1 or abs(k - round(k)) > 1e-9 * k:
        raise InputError(f"{o} {step_fs:g} fs must be a whole multiple of {dt} {dt_fs:g} fs (the inner step), "
                         f"e.g. {o} {2 * dt_fs:g}")
