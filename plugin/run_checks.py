"""The checks of a run directory's files against each other, for :class:`~flashschnet.openmm.run_reader.RunDir`:
what tells a file cut short, or another run's, from the run's own.

Every file of a run says something about the others: ``run.json`` the replicas (or the ladder), the steps between
frames and the step count; each trajectory's header its atoms, first step and frame spacing; ``checkpoint.chk`` the
step the run reached and how many frames (and bytes) of each trajectory, or bytes of each CSV file, it had written
then; ``log.csv`` a row per replica and report; ``walkers.csv`` which walker's frame each ``T<K>.dcd`` frame is.

* A file that disagrees with the others in what it is (another run's: other replicas, another frame spacing, steps
  past the run's end, frames that are not the walkers') is an :class:`~flashschnet.errors.InputError`: one line
  naming it and what to do.
* A file that holds less than the others say it had (cut short: fewer frames or rows than the checkpoint records, a
  log that ends before the run) is :meth:`RunDir.problem`: a note and the part it has, or, for ``--resume``
  (:attr:`RunDir.strict`), an error.

:func:`check_resumable` is what ``--resume`` checks before it touches anything.
"""
from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import numpy as np

from ..errors import InputError
from .dcd import read_dcd

if TYPE_CHECKING:
    from .run_reader import RunDir

#: two frame spacings (ps) agree within this relative difference (the DCD header keeps the step as a float32)
SPACING_RTOL = 1e-4


def step_fs(cfg: Dict) -> Optional[float]:
    """The time one step of a run advances, fs, from its ``run.json`` ``cfg``: ``dt_fs``, or with multiple time
    stepping (``mts`` set) the outer step ``outer_dt_fs`` (default twice ``dt_fs``); None if not recorded."""
    dt = cfg.get("dt_fs")
    if not isinstance(dt, (int, float)) or isinstance(dt, bool):
        return None
    if cfg.get("mts"):
        outer = cfg.get("outer_dt_fs")
        return float(outer) if isinstance(outer, (int, float)) and not isinstance(outer, bool) else 2.0 * float(dt)
    return float(dt)


def _int(cfg: dict, key: str) -> Optional[int]:
    v = cfg.get(key)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _walkers(cfg: dict) -> Optional[int]:
    """The replicas (walkers) run.json records: its ladder's length, else ``replicas``; None if it says neither."""
    from .ladder import parse_temperatures

    temps = cfg.get("temperatures")
    if temps:
        try:
            return len(temps) if isinstance(temps, list) else len(parse_temperatures(str(temps)))
        except (InputError, TypeError, ValueError):
            return None                              # RunDir.ladder says what is wrong with it
    n = _int(cfg, "replicas")
    return n if n else None


def ensemble_run(cfg: dict) -> bool:
    """run.json of a parallel-tempering or multi-block run (whose checkpoint is the ensemble's)."""
    return bool(cfg.get("temperatures")) or cfg.get("blocks") is not None


def check_settings(rd: "RunDir", cfg: dict) -> None:
    """run.json ``cfg`` against the directory: the kind of run, its replicas and the trajectories' frame spacing
    and last step. Another run's run.json (or trajectory) is an InputError; a replica file run.json records but the
    directory lacks is :meth:`RunDir.problem`."""
    path = rd.file("run.json")

    def foreign(why: str):
        raise InputError(f"{path}: {why}: they are not of the same run; restore the files the run wrote")

    if rd.kind == "martini" and any(k in cfg for k in ("model", "temperatures", "replicas")):
        foreign("the settings of a flashschnet-simulate run, in a flashschnet-martini run directory")
    if rd.kind == "flashschnet" and "forcefield_dir" in cfg:
        foreign("the settings of a flashschnet-martini run, in a flashschnet-simulate run directory")
    marks = [n for n in ("walkers.csv", "exchanges.csv") if os.path.isfile(rd.file(n))] + [
        os.path.basename(p) for p in glob.glob(rd.file("T*.dcd"))]
    if cfg.get("temperatures") and not marks:
        foreign("it records a parallel-tempering run, but the directory holds none of its files (walkers.csv, "
                "exchanges.csv, T<K>.dcd)")
    n = _walkers(cfg) if rd.kind == "flashschnet" else None
    if n:
        extra = [r for r in rd.trajectories if r >= n]
        if extra:
            foreign(f"it records {n} replica(s), but the directory holds {os.path.basename(rd.trajectories[extra[0]])}")
        for r in range(n):
            if r not in rd.trajectories:
                rd.problem(rd.file(f"replica_{r:03d}.dcd"), f"missing (run.json records {n} replicas)",
                           "the run's other trajectories are read", "restore it")
    every, dt, steps = _int(cfg, "report_interval"), step_fs(cfg), _int(cfg, "steps")
    for p in rd.trajectories.values():
        head = rd.header(p)
        if head.complete_frames == 0:
            continue
        if every and dt and abs(head.interval * head.dt_ps - every * dt * 1e-3) > SPACING_RTOL * every * dt * 1e-3:
            foreign(f"a frame every {every} steps of {dt:g} fs, but {os.path.basename(p)} holds one every "
                    f"{head.interval} steps of {head.dt_ps * 1e3:.4g} fs")
        last = head.step(head.complete_frames - 1)
        if steps is not None and last > steps:
            foreign(f"the run ends at step {steps}, but {os.path.basename(p)} holds frames up to step {last}")


def check_checkpoint(rd: "RunDir", meta: dict) -> Optional[dict]:
    """The checkpoint header ``meta`` against run.json and the files it records (module docstring). Returns
    ``meta``, or None when it is not this run's (a note; :attr:`RunDir.strict`: an error)."""
    path = rd.file("checkpoint.chk")
    cfg = rd.settings()
    step = meta.get("step")

    def foreign(why: str) -> None:
        rd.problem(path, f"{why}: not this run's checkpoint", "the other files are not checked against it",
                   "restore the run's own checkpoint.chk, or start a new run")

    steps = _int(cfg, "steps")
    if not isinstance(step, int) or step < 0:
        return foreign("it records no step")
    if steps is not None and step > steps:
        return foreign(f"it is at step {step}, past the {steps} steps of the run (run.json)")
    if cfg and ("ensemble" in meta) != ensemble_run(cfg):
        kinds = ("an ensemble" if "ensemble" in meta else "a one-Context",
                 "an ensemble" if ensemble_run(cfg) else "a one-Context")
        return foreign(f"the checkpoint of {kinds[0]} run, in the directory of {kinds[1]} run")
    if "ensemble" in meta:
        e = meta["ensemble"] if isinstance(meta["ensemble"], dict) else {}
        if e.get("walkers") != len(rd.trajectories) and e.get("walkers") != _walkers(cfg):
            return foreign(f"it records {e.get('walkers')} walkers, the directory holds {len(rd.trajectories)}")
        return meta
    frames, sizes = meta.get("dcd_frames"), meta.get("dcd_bytes")
    known = _walkers(cfg) if rd.kind == "flashschnet" else 1
    if not isinstance(sizes, list) or (len(sizes) != known if known else len(sizes) <= max(rd.trajectories)):
        return foreign(f"it records {len(sizes) if isinstance(sizes, list) else 'no'} trajectories, the run has "
                       f"{known or len(rd.trajectories)}")
    frames = frames if isinstance(frames, list) else [frames] * len(sizes)
    dt = step_fs(cfg)
    if dt and isinstance(meta.get("time_ps"), (int, float)) and abs(meta["time_ps"] - step * dt * 1e-3) > 1e-6 * (
            1 + abs(meta["time_ps"])):
        return foreign(f"step {step} at {meta['time_ps']:g} ps, not at the run's {dt:g} fs a step")
    for r, p in rd.trajectories.items():
        if r >= len(sizes):
            continue
        head = rd.header(p)
        if head.data_offset + int(frames[r]) * head.frame_bytes != int(sizes[r]):
            return foreign(f"it records {frames[r]} frames in {sizes[r]} bytes of {os.path.basename(p)}, which "
                           f"holds {head.atoms} atoms a frame")
        if head.complete_frames < int(frames[r]) and (rd.strict or head.complete_frames == head.frames):
            rd.problem(p, f"{head.complete_frames} complete frames, but checkpoint.chk (step {step}) records "
                          f"{frames[r]} (cut short)", "the frames it has are used",
                       "the trajectory lost frames the checkpoint relies on: restore it, or start a new run")
    return meta


def check_size(rd: "RunDir", name: str) -> None:
    """An ensemble's CSV file ``name`` (log.csv, exchanges.csv, walkers.csv) holding fewer bytes than its
    checkpoint records (cut short): :meth:`RunDir.problem`."""
    meta = rd.checkpoint()
    size = ((meta or {}).get("ensemble") or {}).get("files", {}).get(name) if isinstance(
        (meta or {}).get("ensemble"), dict) else None
    path = rd.file(name)
    if isinstance(size, int) and os.path.isfile(path) and os.path.getsize(path) < size:
        rd.problem(path, f"{os.path.getsize(path)} bytes, but checkpoint.chk (step {meta['step']}) records {size} (cut "
                         "short)", "the rows it has are used", "the file lost rows the checkpoint relies on: restore "
                   "it, or start a new run")


def check_log(rd: "RunDir", log: Optional[Dict[int, Dict[str, np.ndarray]]]) -> None:
    """``log.csv``'s rows (:func:`~.run_reader.read_log`) against the run: its replicas, its steps on the
    report grid within the run's step count, and whether it reaches the step the run did."""
    path = rd.log_path
    if log is None:
        return
    check_size(rd, "log.csv")
    cfg = rd.settings()
    if not log:                           # empty, or cut short after (or in) its header
        if rd.strict or not any(n.startswith("log.csv:") for n in rd.notes):
            rd.problem(path, "no rows (cut short?)", "no energy or temperature is read",
                       "restore the log.csv the run wrote, or start a new run")
        return

    def foreign(why: str):
        raise InputError(f"{path}: {why}: it is not this run's log; restore the log.csv the run wrote, or move it "
                         "away to go on without it")

    have = sorted(rd.trajectories)
    units = set(range(_walkers(cfg) or 0)) | set(have) if rd.kind == "flashschnet" else {0}
    extra = [r for r in log if r not in units]
    if extra:
        foreign(f"rows of replica {extra[0]}, which the run does not have (it has "
                f"{', '.join(map(str, sorted(units)))})")
    every, steps = _int(cfg, "report_interval"), _int(cfg, "steps")
    last = {r: int(cols["step"].max()) for r, cols in log.items()}
    for r, cols in log.items():
        s = cols["step"]
        if every and (s % every).any():
            foreign(f"replica {r} has a row at step {int(s[(s % every) != 0][0])}, off the run's report interval "
                    f"of {every} steps")
        if steps is not None and s.max() > steps:
            foreign(f"rows up to step {int(s.max())}, past the {steps} steps of the run (run.json)")
    top = max(last.values())
    for r in have:
        head = rd.header(r)
        if r not in log and head.complete_frames and top > head.first_step:
            foreign(f"no row of replica {r}, whose trajectory has frames")
    meta = rd.checkpoint()
    dropped = {int(d.get("replica", -1)) for d in (meta or {}).get("dropped", []) if isinstance(d, dict)}
    ends = min((last.get(r, -1) for r in have if r not in dropped), default=top)
    if meta is not None and "dcd_bytes" in meta:
        reached, by = int(meta["step"]), "checkpoint.chk"
    else:
        reached, by = max((rd.header(r).step(rd.header(r).complete_frames - 1) for r in have
                           if rd.header(r).complete_frames), default=-1), "its trajectories"
        reached -= every or 0                 # a run killed between a frame and its row: one report less
    if "ensemble" not in (meta or {}) and ends < reached:
        rd.problem(path, f"its rows end at step {ends}, but the run reached step {reached} ({by}) (cut short)",
                   "the rows it has are used", "the log lost rows the checkpoint relies on: restore it, or start "
                   "a new run")


def walker_rows(rd: "RunDir", temps: List[float]) -> Optional[Dict[int, List[int]]]:
    """``{step: [walker at each rung]}`` of ``walkers.csv``; None (with a note) when it is missing or damaged."""
    from .ladder import rung_name
    from .exchange_diagnostics import _table

    path = rd.file("walkers.csv")
    if not os.path.isfile(path):
        rd.note("walkers.csv: missing; the T<K>.dcd files are not checked against the walkers' trajectories")
        return None
    check_size(rd, "walkers.csv")
    try:
        rows = _table(path, ["step"] + [rung_name(t) for t in temps])
    except InputError as exc:
        rd.note(f"walkers.csv: {str(exc).split(': ', 1)[-1].split('; ')[0]}; the T<K>.dcd files are not checked "
                "against the walkers' trajectories")
        return None
    return {int(r[0]): [int(w) for w in r[1:1 + len(temps)]] for r in rows}


def check_rungs(rd: "RunDir", ladder: Dict[float, str], fix: str) -> None:
    """Each ``T<K>.dcd`` of a tempering run against the walkers' trajectories: its last complete frame must be
    the frame of the walker ``walkers.csv`` puts at that temperature at that step (a file that is not is another
    run's: an InputError, ``fix`` saying what to do)."""
    temps = list(ladder)
    at = walker_rows(rd, temps)
    if at is None:
        return
    counts = {w: rd.header(p).complete_frames for w, p in rd.trajectories.items()}
    most = max(counts.values(), default=0)
    for k, (t, path) in enumerate(ladder.items()):
        head = rd.header(path)
        if head.complete_frames == 0:
            continue
        last = head.complete_frames - 1
        step = head.step(last)
        name = os.path.basename(path)
        if head.complete_frames > most:
            raise InputError(f"{path}: {head.complete_frames} frames, more than any walker's trajectory has "
                             f"({most}): not this run's file; {fix}")
        row = at.get(step)
        if row is None:
            rd.note(f"walkers.csv: no row at step {step}, where {name} has a frame (cut short?); the T<K>.dcd files "
                    "are not checked against the walkers' trajectories")
            return
        if row[k] not in rd.trajectories:
            rd.note(f"{name}: walkers.csv puts walker {row[k]}, whose trajectory is missing, at {t:.1f} K at step "
                    f"{step}; {name} is not checked against the walkers' trajectories")
            continue
        walker = rd.trajectories[row[k]]
        whead = rd.header(walker)
        index = (step - whead.first_step) // whead.interval
        if abs(head.interval * head.dt_ps - whead.interval * whead.dt_ps) > SPACING_RTOL * whead.interval * whead.dt_ps:
            raise InputError(f"{path}: a frame every {head.interval} steps of {head.dt_ps * 1e3:.4g} fs, "
                             f"{os.path.basename(walker)} one every {whead.interval} steps of {whead.dt_ps * 1e3:.4g} "
                             f"fs: they are not of the same run; restore the run's own files ({fix})")
        if not 0 <= index < whead.complete_frames:
            rd.note(f"{os.path.basename(walker)}: {whead.complete_frames} complete frames, fewer than the other "
                    f"walkers' ({most}) and than walkers.csv says it had (cut short, or another run's?); {name} is not checked "
                    "against it")
            continue
        mine = read_dcd(path, frames=[last], notes=[], strict=True)
        theirs = read_dcd(walker, frames=[index], notes=[], strict=True)
        if len(mine) and len(theirs) and not np.array_equal(mine, theirs):
            raise InputError(f"{path}: its frame at step {step} is not the frame of {os.path.basename(walker)}, the "
                             f"walker walkers.csv puts at {t:.1f} K then: one of them is not this run's file; restore "
                             f"the run's own (a T<K>.dcd file: {fix})")


def check_resumable(rd: "RunDir") -> dict:
    """What ``--resume`` reads, checked before it touches anything (``rd`` strict): run.json, the checkpoint and
    every file it records (trajectories, log, an ensemble's CSV files and block checkpoints) holding at least what
    the checkpoint counts. Returns the checkpoint header."""
    from .reporters.files import read_checkpoint

    cfg = rd.settings(required=True)
    if cfg.get("temperatures"):                          # the CSV files of a tempering run, read whole
        from .ladder import parse_temperatures, rung_name
        from .ladder import EXCHANGE_COLUMNS
        from .exchange_diagnostics import _table

        try:
            temps = parse_temperatures(str(cfg["temperatures"])) if not isinstance(cfg["temperatures"], list) \
                else [float(t) for t in cfg["temperatures"]]
        except (InputError, TypeError, ValueError):
            temps = []                                   # (the run's own checks say what is wrong with it)
        _table(rd.file("exchanges.csv"), EXCHANGE_COLUMNS)
        _table(rd.file("walkers.csv"), ["step"] + [rung_name(t) for t in temps])
    meta = rd.checkpoint()
    if meta is None:
        raise InputError(f"{rd.file('checkpoint.chk')}: missing; the run cannot be resumed without it: start a "
                         "new run")
    rd.read_log()
    for name in ("exchanges.csv", "walkers.csv"):
        check_size(rd, name)
    if "ensemble" in meta:
        step = int(meta["step"])
        blocks = (meta["ensemble"] or {}).get("blocks") or cfg.get("blocks") or 1
        for b in range(int(blocks)):
            path = os.path.join(rd.path, "blocks", f"block_{b:03d}.s{step}.chk")
            if not os.path.isfile(path):
                raise InputError(f"{path}: missing, but the run's checkpoint (step {step}) needs it; restore it, or "
                                 "start a new run")
            block, _ = read_checkpoint(path)
            if block.get("block") != b or block.get("step") != step or not isinstance(block.get("walkers"), list):
                raise InputError(f"{path}: not the checkpoint of block {b} at step {step} (its header: block "
                                 f"{block.get('block')}, step {block.get('step')}): not this run's; restore it, or "
                                 "start a new run")
            for w, size in zip(block["walkers"], block.get("dcd_bytes", [])):
                p = rd.trajectories.get(int(w))
                have = os.path.getsize(p) if p else -1
                if have < int(size):
                    raise InputError(f"{p or rd.file(f'replica_{int(w):03d}.dcd')}: "
                                     f"{'missing' if have < 0 else f'{have} bytes'}, but the checkpoint (step {step}) "
                                     f"counts {size}; the trajectory lost data the checkpoint relies on: restore it, "
                                     "or start a new run")
    return meta


def damaged_rungs(rd: "RunDir", temperatures_K: Sequence[float]) -> List[str]:
    """What is wrong with the ``T<K>.dcd`` files of a finished tempering run in ``rd``, one line each naming the
    file: each read whole (a damaged header or frame, a file cut short), then checked against the walkers'
    trajectories (:func:`check_rungs`)."""
    from .ladder import rung_name

    ladder = {float(t): rd.file(rung_name(t) + ".dcd") for t in temperatures_K}
    found = []
    for path in ladder.values():
        try:
            rd.frames(path)
        except InputError as exc:
            found.append(str(exc).split(";")[0])
    if not found:
        try:
            check_rungs(rd, ladder, "")
        except InputError as exc:
            found.append(str(exc).split(";")[0])
    names = [os.path.basename(p) for p in ladder.values()]
    found += [n.split(";")[0] for n in rd.notes if n.split(":")[0] in names]
    return found
