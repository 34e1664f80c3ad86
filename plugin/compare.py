"""MARTINI 3 vs FlashSchNet on the same PDB, in the same MD engine (OpenMM), on the same machine: the job behind
``flashschnet-compare``.

It runs ``flashschnet-martini`` (20 fs, one solvated protein; OpenMM's CPU platform) into ``OUT/martini`` and
``flashschnet-simulate`` (4 fs, R packed replicas, by default one process per core: :func:`flashschnet_workers`;
the Reference platform) into ``OUT/flashschnet``, on the same cores, then compares

* speed: ns/day per replica and in aggregate, from each run's log (the integration loop only, reporters
  included; set-up, minimisation and the first network call are not counted);
* structure, one bead per residue (MARTINI's BB, the 5-bead mapping's CA), each against its own mapping of the
  PDB (martinize2's ``cg.pdb``; the CG topology's native positions): backbone RMSD, radius of gyration, per-residue
  RMSF, native contacts Q and secondary-structure retention (:mod:`flashschnet.openmm.observables`); the summary
  statistics use the second half of each run's frames, pooled over replicas (the earlier half is discarded as
  equilibration, for both force fields alike);
* sampling efficiency over the same frames (:mod:`flashschnet.openmm.sampling`): the statistical inefficiency g
  of Rg and Q (frames and ps), effective samples, and effective samples per wall-clock hour of the step loop that
  wrote those frames (each report interval's wall time from the log's ns_per_day), per replica and aggregate,
  with error bars; too few frames are said (a lower bound, or no estimate), and a log without the speed of every
  analysed interval gives ESS/hour "not recorded" (one note).

Outputs: ``OUT/comparison.md`` (Markdown tables), ``OUT/comparison.json``, ``OUT/comparison.png``,
``OUT/sampling.png`` (:mod:`flashschnet.openmm.sampling_report`).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, replace
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .observables import native_dssp, structure_metrics
from .cleaning import CLEANED_NAME, clean_pdb
from .run_options import reference_residues
from .run_reader import (RunDir, backbone_beads, interval_walls, pdb_positions, read_log, read_pdb, step_fs,
                         whole_pdb)
from . import sampling_report
from .compare_report import markdown, plot
from .sampling import sampling_efficiency

MARTINI_DT_FS = 20.0
FLASHSCHNET_DT_FS = 4.0


@dataclass
class CompareSettings:
    """What ``flashschnet-compare`` runs (times in ns of simulated time per replica)."""

    pdb: str
    model: str
    forcefield_dir: str
    out: str
    martini_ns: float = 1.0
    flashschnet_ns: float = 0.01
    replicas: int = 8
    frames: int = 50                     # trajectory frames per run after the starting one (step 0)
    platform: Optional[str] = None       # both runs' OpenMM platform; None: each force field's own default
    seed: int = 1
    threads: Optional[int] = None
    workers: Optional[int] = None        # FlashSchNet's worker processes; None: :func:`flashschnet_workers` chooses
    priors: Optional[str] = None
    backend: Optional[str] = None
    compress: str = "auto"               # the network's filter tables (flashschnet-simulate's --compress)
    analyse_only: bool = False           # re-analyse the runs already in OUT
    go: bool = False                     # MARTINI with martinize2's Go model instead of the elastic network
    dt_fs: float = FLASHSCHNET_DT_FS     # FlashSchNet's step, fs (with mts: the inner step)
    mts: Optional[str] = None            # FlashSchNet with distilled multiple time stepping: the inner model file
    outer_dt_fs: Optional[float] = None  # ... and its outer step, fs (required with mts)
    mts_any_teacher: bool = False        # ... accepted though distilled from another model file

    def steps(self, ns: float, dt_fs: float) -> tuple:
        """(steps, report interval) for ``ns`` at ``dt_fs``: ``frames`` frames, steps a multiple of the interval."""
        steps = ns * 1e6 / dt_fs
        if not (math.isfinite(steps) and ns > 0.0):      # NaN fails too
            raise InputError(f"the simulated times (--martini-ns, --flashschnet-ns) must be positive finite numbers "
                             f"of ns, got {ns}")
        total = max(int(round(steps)), 1)
        interval = max(total // max(self.frames, 1), 1)
        return interval * max(total // interval, 1), interval


def log_speed(log_csv, dt_fs: float,
              echo: Callable[[str], None] = print) -> Tuple[Dict[str, float], Dict[int, float]]:
    """Speed of a run from its ``log.csv`` (a path, or its rows as :func:`read_log` returns them with
    ``extra=("ns_per_day",)``): simulated ns over wall-clock days summed over the report intervals (each row's
    ns_per_day covers the interval before it), and the wall seconds of each interval by the step that ends it
    (:func:`~flashschnet.openmm.run_reader.interval_walls`)."""
    log = read_log(log_csv, echo, extra=("ns_per_day",)) if isinstance(log_csv, str) else log_csv
    walls = interval_walls(log, dt_fs)
    steps = sorted({int(s) for cols in log.values() for s in cols["step"]})
    previous = dict(zip(steps, [0] + steps[:-1]))
    ns = sum((s - previous[s]) * dt_fs * 1e-6 for s in walls)
    days = sum(walls.values()) / 86400.0
    return {"ns_per_day": ns / days if days > 0 else float("nan"), "steps": steps[-1] if steps else 0}, walls


def _read_run(run_dir: str, what: str, keys=("dt_fs", "report_interval")):
    """The run in ``run_dir`` (:class:`RunDir`: damaged files are one line, or a note and the part that is whole),
    its run.json (required, with ``keys``: the step, the frame spacing, ...) and log rows (required: the speed)."""
    rd = RunDir(run_dir)
    cfg = rd.settings(required=True)
    for key in keys:
        if not isinstance(cfg.get(key), (int, float)) or isinstance(cfg.get(key), bool):
            raise InputError(f"{rd.file('run.json')}: no {key}; restore the run.json {what} wrote")
    rd.checkpoint()
    log = rd.read_log(extra=("ns_per_day",))
    if not log:
        raise InputError(f"{rd.log_path}: {'missing' if log is None else 'no rows'}; the speed comes from it: restore "
                         f"the log.csv {what} wrote")
    return rd, cfg, log


def _stacked(rd: RunDir, atoms) -> np.ndarray:
    """Every replica's frames [R, T, N, 3], cut to the shortest trajectory (noted) so that they stack."""
    frames = [rd.frames(r, atoms) for r in rd.trajectories]
    shortest = min(len(f) for f in frames)
    if shortest == 0:
        empty = next(r for r, f in zip(rd.trajectories, frames) if not len(f))
        raise InputError(f"{rd.trajectories[empty]}: no complete frame; restore the trajectory the run wrote")
    if any(len(f) > shortest for f in frames):
        rd.note(f"{os.path.basename(rd.path)}: the trajectories hold different numbers of frames; the first {shortest} "
                "of each are compared")
    return np.stack([f[:shortest] for f in frames])


def analyse_martini(run_dir: str) -> Dict[str, object]:
    """The MARTINI run: BB frames against martinize2's mapping of the PDB (``system/cg.pdb``)."""
    rd, cfg, log = _read_run(run_dir, "flashschnet-martini", ("dt_fs", "report_interval", "salt_molar"))
    whole_pdb(rd.file(os.path.join("system", "cg.pdb")), "restore the cg.pdb martinize2 wrote")
    cg_path = rd.file(os.path.join("system", "cg.pdb"))
    cg = read_pdb(cg_path)
    bb, topo = backbone_beads(cg.topology, "BB"), rd.topology()
    reference_residues(rd.topology_path, [topo.topology.atom(int(i)).residue.name for i in rd.backbone()], cg_path,
                       [cg.topology.atom(int(i)).residue.name for i in bb], "restore the cg.pdb martinize2 wrote")
    native = pdb_positions(cg, bb)
    frames = _stacked(rd, rd.backbone())
    speed, walls = log_speed(log, cfg["dt_fs"])
    return {"frames": frames, "native": native, "dt_fs": cfg["dt_fs"],
            "interval": cfg["report_interval"], "first_step": rd.header(0).first_step, "replicas": 1,
            "particles": rd.topology().n_atoms,
            "protein_beads": cg.n_atoms, "salt_molar": cfg["salt_molar"],
            "go": bool(cfg.get("go", False)), "elastic": bool(cfg.get("elastic", True)), "speed": speed,
            "walls": walls, "input_warnings": rd.notes}


def analyse_flashschnet(run_dir: str) -> Dict[str, object]:
    """The FlashSchNet run: CA frames of every replica against the CG topology's native positions."""
    rd, cfg, log = _read_run(run_dir, "flashschnet-simulate")
    ca = rd.backbone()
    frames = _stacked(rd, ca)                                               # [R, T, N, 3]
    n = rd.topology().n_atoms
    speed, walls = log_speed(log, step_fs(cfg))
    return {"frames": frames, "native": pdb_positions(rd.topology(), ca), "dt_fs": step_fs(cfg),
            "inner_dt_fs": cfg["dt_fs"] if cfg.get("mts") else None,
            "interval": cfg["report_interval"], "first_step": rd.header(next(iter(rd.trajectories))).first_step,
            "replicas": len(rd.trajectories), "contexts": int(cfg.get("blocks") or 1), "particles": n,
            "protein_beads": n, "network": network_path(cfg), "speed": speed, "walls": walls,
            "input_warnings": rd.notes}


def network_path(cfg: Dict[str, object]) -> str:
    """What a CG run's network computed with, from its run.json: the engine and the filter tables (or the exact
    filter network), and whether the tables were the default's."""
    comp = cfg.get("compress") or "none"
    if comp == "none":
        filters = "exact filter network"
    else:
        knots = cfg.get("compress_knots")
        filters = f"{comp} filter tables" + (f", {knots} knots" if knots else "")
    engine = cfg.get("engine")
    default = " (the default)" if cfg.get("compress_default") else ""
    return (f"{engine} engine, " if engine else "") + filters + default


def summarise(run: Dict[str, object], ss: Optional[str] = None) -> Dict[str, object]:
    """Structure metrics of a run (pooled over replicas; means over the second half of the frames) and its
    sampling efficiency (``"sampling"``: :func:`~flashschnet.openmm.sampling.sampling_efficiency` of Rg and Q over
    the same frames, with the wall time of the report intervals that produced them, None where the log has no
    speed for one of them); ``ss``: the native DSSP per residue (None: no secondary-structure retention)."""
    frames, native = run["frames"], run["native"]
    R, T = frames.shape[:2]
    if frames.shape[2] != len(native):
        raise InputError(f"{frames.shape[2]} backbone beads in the trajectory but {len(native)} in the native structure")
    if ss is not None and len(ss) != len(native):
        ss = None                      # the PDB has residues this mapping dropped: no per-residue match
    m = structure_metrics(frames.reshape(R * T, -1, 3), native, ss)
    per = {k: m[k].reshape(R, T) for k in ("rmsd", "rg", "q", "ss_retention")}
    half = slice(T // 2, T)
    # frame k is step first + k * interval: first 0 (the starting state), or one interval in older run directories
    steps = run.get("first_step", run["interval"]) + np.arange(T) * run["interval"]
    times_ns = steps * run["dt_fs"] * 1e-6
    out = {"times_ns": times_ns.tolist(), "rmsf_nm": m["rmsf"].tolist(), "rg_native_nm": float(m["rg_native"]),
           "n_native_contacts": int(m["n_contacts"]), "ss_native": ss,
           "series": {k: v.mean(axis=0).tolist() for k, v in per.items()}}
    for k, v in per.items():
        x = v[:, half].ravel()
        out[k] = {"mean": float(np.nanmean(x)) if np.isfinite(x).any() else float("nan"),
                  "sd": float(np.nanstd(x)) if np.isfinite(x).any() else float("nan")}
    out["rmsf_mean_nm"] = float(m["rmsf"].mean())
    walls = run.get("walls") or {}
    analysed = [int(k) for k in steps[half]]
    wall = float(sum(walls[k] for k in analysed)) if analysed and all(k in walls for k in analysed) else None
    out["sampling"] = sampling_efficiency({k: per[k][:, half] for k in ("rg", "q")}, run["interval"] * run["dt_fs"]
                                          * 1e-3, wall, labels={"rg": "Rg", "q": "Q"})
    out["sampling"]["first_frame"] = T // 2
    return out


def same_structure(paths: Dict[str, str], echo: Callable[[str], None] = print) -> Dict[str, object]:
    """Whether the runs read the same cleaned structure: ``{"same": bool or None, "sha256": {run: hex or None}}``
    (None where a run directory predates the cleaning step and has no ``cleaned.pdb``); a difference is echoed."""
    import hashlib

    digests = {name: (hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else None)
               for name, p in paths.items()}
    known = [d for d in digests.values() if d is not None]
    same = None if len(known) < len(digests) else len(set(known)) == 1
    if same is False:
        echo("note: the two runs read different cleaned structures (" + ", ".join(paths.values()) + "); were they "
             "made by different versions of flashschnet or pdbfixer?")
    return {"same": same, "sha256": digests}


def cleaned_structures(paths: Dict[str, str], out: str) -> list:
    """The runs' ``cleaned.pdb`` files, read whole (damaged: one line); one line each (for input_warnings) naming
    those missing (run directories from before the cleaning step)."""
    missing = []
    for p in paths.values():
        if not os.path.isfile(p):
            missing.append(f"{os.path.relpath(p, out)}: missing (a run directory from before the cleaning step?); "
                           "the structures the two runs read are not compared")
            continue
        whole_pdb(p, "restore the cleaned.pdb the run wrote")
        read_pdb(p)
    return missing


def flashschnet_workers(s: CompareSettings) -> int:
    """How many processes run FlashSchNet's replicas (``flashschnet-simulate --workers``, one thread each; 1: one
    process on ``threads`` threads): ``workers`` when given, else one per core -- ``threads`` when given, else the
    cores this process may run on -- and at most one per replica, where Dask's ``distributed`` is installed (else 1).

    Why: a 97-bead replica's network call hardly uses a second thread, while processes on separate cores run side by
    side; 8 trp-cage replicas on 2 cores ran 515 ns/day aggregate as 2 processes of 4 against 332 as one process on
    2 threads (docs/sampling.md)."""
    if s.workers is not None:
        return int(s.workers)
    import importlib.util

    from ..threads import available_cpus

    if importlib.util.find_spec("distributed") is None:
        return 1
    cores = int(s.threads) if s.threads else len(available_cpus())
    return max(1, min(cores, int(s.replicas)))


def _platforms(dirs: Dict[str, str]) -> str:
    """The OpenMM platform the runs in ``dirs`` ran on, from their run.json: one name, or each force field's
    (MARTINI 3 on CPU, FlashSchNet on Reference by default)."""
    names = {name: RunDir(d).settings(required=True).get("platform") for name, d in dirs.items()}
    if len(set(names.values())) == 1:
        return str(names["martini"])
    return f"{names['martini']} for MARTINI 3, {names['flashschnet']} for FlashSchNet"


def earlier_runs(dirs: Dict[str, str], steps: Dict[str, int]) -> Dict[str, Optional[Tuple[int, int]]]:
    """What an earlier compare into the same ``--out`` left, per run: None (nothing to continue: no run, or one
    stopped before its first checkpoint, which :func:`pick_up` moves aside), or ``(step reached, steps)`` of a run
    to continue (its resume checks the settings against its ``run.json``). Both runs complete is one line: the
    comparison is done (``--analyse-only`` re-analyses it)."""
    from .runner.directory import resumed_step

    found: Dict[str, Optional[Tuple[int, int]]] = {}
    for name, d in dirs.items():
        ckpt = os.path.join(d, "checkpoint.chk")
        found[name] = (resumed_step(d), steps[name]) if os.path.exists(ckpt) else None
    if all(v is not None and v[0] >= v[1] for v in found.values()):
        raise InputError(f"{dirs['martini']} and {dirs['flashschnet']}: both runs are done; re-analyse them with "
                         "--analyse-only or choose another --out")
    return found


def pick_up(dirs: Dict[str, str], earlier: Dict[str, Optional[Tuple[int, int]]]) -> list:
    """Prepare the run directories an earlier, failed compare left: a run stopped before its first checkpoint is
    moved aside (``<dir>.incomplete``, ``.incomplete-2``, ...: nothing of it is reused, nothing deleted); returns
    the notes saying what is picked up and what was moved."""
    notes = []
    for name, d in dirs.items():
        what = "MARTINI 3" if name == "martini" else "FlashSchNet"
        if earlier[name] is not None:
            at, steps = earlier[name]
            state = "done; reused" if at >= steps else f"at step {at} of {steps}; continued"
            notes.append(f"{d}: the {what} run of an earlier compare is {state} (its settings checked against its "
                         "run.json)")
        elif os.path.isdir(d) and os.listdir(d):
            aside, k = f"{d}.incomplete", 1
            while os.path.exists(aside):
                k += 1
                aside = f"{d}.incomplete-{k}"
            os.replace(d, aside)
            notes.append(f"{d}: an earlier {what} run stopped before its first checkpoint; moved to {aside}, run again")
    return notes


def compare(settings: CompareSettings, machine: str = "", progress: bool = True,
            echo: Callable[[str], None] = print, given: Sequence[str] = ()) -> Dict[str, object]:
    """Run (unless ``analyse_only``) both simulations and write the report; returns the result dict. ``given``:
    the options on the command line (``--analyse-only`` checks those that set a run up against the runs:
    :mod:`~flashschnet.openmm.compare_options`)."""
    s = settings
    from .runner import run_dir

    out = run_dir(s.out)
    dirs = {"martini": os.path.join(out, "martini"), "flashschnet": os.path.join(out, "flashschnet")}
    if s.analyse_only:
        for d in dirs.values():
            if not os.path.isdir(d) or not os.listdir(d):
                raise InputError(f"{d}: no run to analyse; run without --analyse-only first")
        from .compare_options import check_analyse_only
        from .runner import make_run_dir

        check_analyse_only(s, given, dirs, echo, MARTINI_DT_FS)

        make_run_dir(out)                  # the report goes there: a read-only --out is one line (exit 2) now
    else:
        if s.replicas < 1 or s.frames < 1 or s.martini_ns <= 0 or s.flashschnet_ns <= 0:
            raise InputError("--replicas and --frames must be >= 1 and the simulated times positive")
        if s.workers is not None and not 1 <= s.workers <= s.replicas:
            raise InputError(f"--workers {s.workers}: must be between 1 and --replicas ({s.replicas})")
        from ..limits import check_replicas
        from .cg_setup import load_inputs
        from .martini.run import MartiniSettings, check_resume as check_martini_resume, run_martini
        from .runner import make_run_dir
        from .simulate import RunSettings, check_resume, run

        # every setting of both runs is checked before the first starts (MARTINI takes long)
        steps, interval = s.steps(s.martini_ns, MARTINI_DT_FS)
        martini = MartiniSettings(pdb=s.pdb, forcefield_dir=s.forcefield_dir, out=dirs["martini"], steps=steps,
                                  platform=s.platform, seed=s.seed, dt_fs=MARTINI_DT_FS, report_interval=interval,
                                  threads=s.threads, go=s.go, elastic=not s.go)
        workers = flashschnet_workers(s)
        flash = RunSettings(pdb=s.pdb, model=s.model, out=dirs["flashschnet"], steps=0, replicas=s.replicas,
                            platform=s.platform, seed=s.seed, dt_fs=s.dt_fs, priors=s.priors,
                            backend=s.backend, compress=s.compress, threads=s.threads if workers == 1 else None,
                            workers=workers if workers > 1 else None, mts=s.mts, outer_dt_fs=s.outer_dt_fs,
                            mts_any_teacher=s.mts_any_teacher)
        flash.steps, flash.report_interval = s.steps(s.flashschnet_ns, flash.step_fs)
        martini.validate()
        flash.validate()
        earlier = earlier_runs(dirs, {"martini": martini.steps, "flashschnet": flash.steps})
        if earlier["martini"] is not None:       # a run to continue: its settings and inputs checked now, not
            check_martini_resume(martini)         # after the other run's minutes
        if earlier["flashschnet"] is not None:
            check_resume(flash)
        cleaned = clean_pdb(s.pdb)             # what both runs will map (each cleans the PDB the same way)
        # FlashSchNet's inputs as its run will load them -- the model and its filter tables, the mapping, the
        # priors against the structure, the inner model against the structure and its teacher -- before MARTINI
        # (on a copy: the run resolves its own settings)
        inputs = load_inputs(replace(flash), structure=cleaned)
        check_replicas(s.replicas, inputs.mol.n_beads)
        make_run_dir(out)
        for note in pick_up(dirs, earlier):
            echo(f"note: {note}")
        echo(f"MARTINI 3: {martini.steps} steps of {MARTINI_DT_FS:g} fs")
        run_martini(martini, resume=earlier["martini"] is not None, progress=progress, echo=echo)
        echo(f"FlashSchNet: {flash.steps} steps of {flash.step_fs:g} fs x {s.replicas} replicas"
             + (f" in {workers} processes of one thread (--workers 1: one process)" if workers > 1 else ""))
        run(flash, resume=earlier["flashschnet"] is not None, progress=progress, echo=echo)

    from ..checkpoint import load_model

    model = load_model(s.model)
    desc = (model.metadata or {}).get("description", os.path.basename(s.model))
    result: Dict[str, object] = {"pdb": os.path.abspath(s.pdb), "model": os.path.abspath(s.model),
                                 "model_description": desc.split(".")[0], "machine": machine or "unknown",
                                 "platform": _platforms(dirs), "settings": asdict(s)}
    structures = {"martini": os.path.join(dirs["martini"], "system", CLEANED_NAME),
                  "flashschnet": os.path.join(dirs["flashschnet"], CLEANED_NAME)}
    result["input_warnings"] = cleaned_structures(structures, out)
    result["structures"] = same_structure(structures, lambda line: result["input_warnings"].append(
        line.removeprefix("note: ")))
    for line in result["input_warnings"]:
        echo(f"note: {line}")
    native = structures["flashschnet"] if os.path.isfile(structures["flashschnet"]) else s.pdb
    try:
        ss = native_dssp(native)
    except Exception as exc:            # mdtraj cannot read every PDB our mapping reads: report without SS
        echo(f"note: no DSSP of {native} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
             "secondary-structure retention is not reported")
        ss = None
    result["ss_native"] = ss
    unclocked = []
    for name, analyse in (("martini", analyse_martini), ("flashschnet", analyse_flashschnet)):
        run_data = analyse(dirs[name])
        for line in run_data["input_warnings"]:
            echo(f"note: {name}/{line}")
        run_data["summary"] = summarise(run_data, ss)
        if ss is not None and run_data["summary"]["ss_native"] is None:
            echo(f"note: {name}: {len(run_data['native'])} residues but DSSP has {len(ss)}; no secondary-structure retention")
        run_data.pop("frames")
        run_data.pop("walls")
        run_data["sampling"] = run_data["summary"].pop("sampling")
        if run_data["sampling"]["wall_s"] is None:
            unclocked.append(os.path.join(dirs[name], "log.csv"))
        run_data["native"] = np.asarray(run_data["native"]).tolist()
        result[name] = run_data
    if unclocked:
        echo(f"note: no wall time for the analysed frames in {' or '.join(unclocked)} (no ns_per_day for every "
             "report interval); ESS/hour is not reported")
    from ..atomic import staged_files

    with staged_files(out, what="writing the comparison") as stage:    # all four files or none (OutputError)
        with open(os.path.join(stage, "comparison.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(stage, "comparison.md"), "w") as f:
            f.write(markdown(result))
        plot(result, os.path.join(stage, "comparison.png"))
        sampling_report.plot(result, os.path.join(stage, sampling_report.FIGURE))
    return result
