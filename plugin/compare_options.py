"""``flashschnet-compare --analyse-only``: the options that set the two runs up, checked against the runs it
re-analyses.

``--analyse-only`` reads the runs in OUT as they ran (:class:`~flashschnet.openmm.run_reader.RunDir`); an option
that would have set them up (``--replicas``, ``--dt``, ``--martini-ns``, ...) given with it must agree with what the
run's ``run.json`` recorded, or the report would describe a run that is not the one analysed. Every disagreement is
listed in one :class:`~flashschnet.errors.InputError` line (as ``--resume`` lists them); an option with nothing to
check against (``--threads``, ``--backend``, ``--compress``: how a run computes, not what it is) is a note saying it
is not used.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List

from ..errors import InputError

if TYPE_CHECKING:
    from .compare import CompareSettings

#: options that only say how a run computes: not used by --analyse-only (a note)
NOT_USED = ("--threads", "--workers", "--backend", "--compress")


def _run_values(s: "CompareSettings", cfg: Dict[str, Dict[str, object]],
                martini_dt_fs: float) -> Dict[str, List[tuple]]:
    """option -> [(run, the option's value, the run's value)] for the options a run.json answers."""
    from .run_checks import step_fs

    m, f = cfg["martini"], cfg["flashschnet"]

    def frames(c):
        every = c.get("report_interval")
        return c.get("steps") // every if isinstance(c.get("steps"), int) and isinstance(every, int) and every else None

    def path(p):
        return os.path.abspath(p) if p else None

    step_f = step_fs(f) or s.dt_fs
    return {
        "--replicas": [("flashschnet", s.replicas, f.get("replicas"))],
        "--dt": [("flashschnet", s.dt_fs, f.get("dt_fs"))],
        "--outer-dt": [("flashschnet", s.outer_dt_fs, f.get("outer_dt_fs"))],
        "--mts": [("flashschnet", path(s.mts), path(f.get("mts")))],
        "--priors": [("flashschnet", path(s.priors), path(f.get("priors")))],
        "--go": [("martini", s.go, bool(m.get("go", False)))],
        "--seed": [("martini", s.seed, m.get("seed")), ("flashschnet", s.seed, f.get("seed"))],
        "--platform": [("martini", s.platform, m.get("platform")), ("flashschnet", s.platform, f.get("platform"))],
        "--frames": [("martini", s.frames, frames(m)), ("flashschnet", s.frames, frames(f))],
        "--martini-ns": [("martini", s.steps(s.martini_ns, martini_dt_fs)[0], m.get("steps"))],
        "--flashschnet-ns": [("flashschnet", s.steps(s.flashschnet_ns, step_f)[0], f.get("steps"))],
    }


def check_analyse_only(s: "CompareSettings", given: Iterable[str], dirs: Dict[str, str],
                       echo: Callable[[str], None], martini_dt_fs: float) -> None:
    """Refuse (one line listing them all) the ``given`` options that disagree with the runs in ``dirs``
    (``martini_dt_fs``: the MARTINI run's step, which --martini-ns is counted in); note those --analyse-only does
    not use."""
    from .run_reader import RunDir

    given = [g for g in given if g not in ("--analyse-only", "--out", "--model", "--forcefield-dir", "--quiet")]
    if not given:
        return
    cfg = {name: RunDir(d).settings(required=True) for name, d in dirs.items()}
    values = _run_values(s, cfg, martini_dt_fs)
    differ = []
    for option in given:
        for run, mine, theirs in values.get(option, []):
            if mine != theirs and not (isinstance(mine, float) and isinstance(theirs, (int, float))
                                       and abs(mine - theirs) <= 1e-9 * max(abs(mine), 1.0)):
                differ.append(f"{option} {mine} (the {run} run's: {theirs})")
    if differ:
        raise InputError(f"{os.path.dirname(dirs['martini'])}: --analyse-only re-analyses the runs as they ran, and "
                         f"these options differ from them: {'; '.join(differ)}; leave them out")
    unused = [o for o in given if o in NOT_USED]
    if unused:
        echo(f"note: {', '.join(unused)}: not used by --analyse-only (nothing is run; the runs are read as they ran)")
