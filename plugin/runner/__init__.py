"""What every run in this package shares, whichever force field supplies the forces (the CG network or MARTINI).

* :mod:`.settings` -- the settings every run shares (:class:`DynamicsSettings`, its checks) and the command-line
  spelling of every run setting (:data:`FLAGS`, :func:`flag`); the multiple-time-step settings' check
  (:func:`check_mts`);
* :mod:`.directory` -- ``--out`` checks, ``run.json`` and its resume rules, the default report and checkpoint
  intervals;
* :mod:`.resume` -- input files recorded by content, and the settings a resumed run takes from ``run.json``;
* :mod:`.loop` -- the step loop (health checks, checkpoints, progress bar, OpenMM's refusals), freezing replicas;
* :mod:`.job` -- the run scaffold: a force field's System (:class:`MDJob`) in, integrator, Simulation, new start or
  resume, reporters and the step loop, a :class:`RunResult` out (:func:`run_job`).

Both :func:`flashschnet.openmm.simulate.run` and :func:`flashschnet.openmm.martini.run.run_martini` read top to
bottom as: settings -> :func:`open_run_dir` -> build the System -> :class:`MDJob` -> :func:`run_job`.
"""
from .directory import (MAX_DCD_STEP, default_checkpoint_interval, default_report_interval,
                        few_frames_warning, make_run_dir, nothing_to_do, open_run_dir, read_run_json,
                        require_new_run_inputs, resumed_step, run_dir, write_dropped, write_run_json)
from .job import MDJob, RunResult, resume_already_done, run_job
from .loop import checkpoint_hint, freeze_replicas, integrate
from .settings import FLAGS, DynamicsSettings, check_mts, flag

__all__ = ["FLAGS", "MAX_DCD_STEP", "DynamicsSettings", "MDJob", "RunResult", "check_mts", "checkpoint_hint",
           "default_checkpoint_interval", "default_report_interval", "few_frames_warning", "flag", "freeze_replicas",
           "integrate", "make_run_dir", "nothing_to_do", "open_run_dir", "read_run_json",
           "require_new_run_inputs", "resume_already_done", "resumed_step", "run_dir", "run_job", "write_dropped",
           "write_run_json"]
