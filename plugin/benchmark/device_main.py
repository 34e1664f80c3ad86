"""Every number a lent GPU machine should give, in one command that ends well inside the device tool's limit
(``python tools/device/device_checks.py``, the entry point, calls :func:`main`).

    python tools/device/device_checks.py --device cuda --out "$OUT"          # on the device (device_benchmark.sh)
    python tools/device/device_checks.py --device cpu --smoke --out /tmp/x   # the same stages at tiny sizes, on a CPU

Seven stages, in this order, each in a fresh process (a hang, a crash or a broken CUDA context cannot take the
next stages down) with its own deadline; the timing rows run in row workers of their source tree
(:mod:`.device_rows`: a crashed row is one error, the next row gets a fresh worker):

1. ``environment`` (:mod:`.device_stages`) -- nvidia-smi, versions, OpenMM's platforms and plugin load failures,
   the CUDA libraries, the baseline tree;
2. ``compile`` -- first (Triton JIT) and second call of every kernel variant, the CUDA-graph captures last;
3. ``correctness`` -- float32 on the mlcg oracle, every backend and variant, the model's CUDA graph (capture and
   replay), then the precision (tf32) check against ``docs/tf32-accuracy.json``;
4. ``timings`` (:mod:`.device_timings`) -- ``energy_forces`` of BPTI at every ``--replicas`` R (float32 tables with
   and without the model's CUDA graph, tf32 and bf16 products, the reference at ``--reference-replicas``),
   lysozyme, peak GPU memory per row;
5. ``baseline`` -- the same rows of the baseline tree (``--baseline``, default ``.baseline/``, commit
   :data:`~.device_checks.BASELINE_COMMIT`: ``tools/device/fetch_device_baseline.sh``) for the side-by-side ratios;
6. ``openmm`` -- the OpenMM loop (LangevinMiddle 4 fs) through the TorchForce with and without openmm-torch's CUDA
   graph, the PythonForce, the do-nothing force (:mod:`.overhead`: OpenMM's share of a step), the reference,
   lysozyme, the R grid and a parallel-tempering run;
7. ``martini`` (:mod:`.device_martini`) -- MARTINI 3 BPTI in water, 1 process and ``--martini-processes`` at once.

Stage *i* must end by ``start + budget * (1 - the later stages' SHARES)``: time a stage leaves goes to the next.
Before each item a stage checks its deadline (an item it cannot start is a skip; a row predicted from a smaller R
to overrun it too); one that overruns it by :data:`GRACE_S` is killed and keeps the items it saved.
``OUT/device.json``, rewritten after every stage: ``settings``, ``machine``, ``stages`` (each: ``status``,
``wall_s``, ``results``, ``skips``, ``errors``), ``timings`` (the energy_forces rows of both trees), ``ratios``
(the checkout's BPTI rows vs the reference), ``openmm`` (the OpenMM rows of both trees, the do-nothing rows),
``martini``. The exit status is 1 if any stage recorded an error (a failed item, a failed precision check, a
crashed or killed stage), else 0 (skips, each with its reason, are not failures; nor are missed targets:
``tools/device/device_report.py`` renders device.json and says PASS / FAIL per target).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

from .device_checks import BOOKKEEPING, Stage, log, write_json

__all__ = ["STAGES", "SHARES", "GRACE_S", "FULL", "SMOKE", "parse_args", "collect", "run_stage", "summary", "commit",
           "main"]

STAGES = ("environment", "compile", "correctness", "timings", "baseline", "openmm", "martini")
#: the module of each stage's function ``stage_<name>``
STAGE_MODULES = {"environment": "device_stages", "compile": "device_stages", "correctness": "device_stages",
                 "timings": "device_timings", "baseline": "device_timings", "openmm": "device_timings",
                 "martini": "device_martini"}
#: each stage's share of the budget (device estimate for the 410 s budget, from the first GPU run's items:
#: environment ~7 s of its 12; compile ~40 s of Triton JIT (its float64 items only if 40 s are left); correctness
#: ~25 s; timings ~27 rows of 0.2-2 s after a worker's start; baseline ~12 rows plus the old kernels' JIT (~20 s);
#: openmm ~45 rows of 1-3 s, the largest share; martini 2 x (set-up + 3 s); time a stage leaves goes to the next)
SHARES = {"environment": 0.03, "compile": 0.12, "correctness": 0.07, "timings": 0.16, "baseline": 0.15,
          "openmm": 0.40, "martini": 0.07}
#: seconds a stage may overrun its deadline (to end the item it is in) before it is killed
GRACE_S = 15.0
#: the defaults of a device run and of ``--smoke`` (backend, replica and step lists; seconds; GB)
FULL = dict(device="cuda", backends="reference,torch,triton", replicas="1,8,64,128,256", budget=410.0, pdb=None,
            reference_replicas="8,64", openmm_replicas="1,8,64,128,256", openmm_steps=50, openmm_steps_r1=400,
            warmup=3, repeats=20, max_memory_gb=100.0, float64_need_s=40.0, threads=None, martini_processes="1,4",
            martini_seconds=3.0, martini_minimize=200, martini_chunk=500)
SMOKE = dict(device="cpu", backends="reference,torch", replicas="1,2", budget=240.0,
             pdb="tests/data/structures/1L2Y_trpcage.pdb", reference_replicas="1,2", openmm_replicas="1,2",
             openmm_steps=3, openmm_steps_r1=3, warmup=1, repeats=2, max_memory_gb=4.0, float64_need_s=0.0,
             threads=1, martini_processes="1,2", martini_seconds=0.2, martini_minimize=5, martini_chunk=5)


def _ints(text) -> List[int]:
    return sorted({int(x) for x in str(text).split(",") if x})


def parse_args(argv: Optional[List[str]] = None, root=None) -> argparse.Namespace:
    """The options; those not given take :data:`FULL`'s value, or :data:`SMOKE`'s with ``--smoke``. ``root``: the
    checkout (its ``tests/data``, ``.baseline/``, ``.martini_ff/``; default the current folder)."""
    p = argparse.ArgumentParser(prog="tools/device/device_checks.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes, CPU defaults (a test of this script)")
    p.add_argument("--device", choices=["cuda", "cpu"])
    p.add_argument("--out", default=os.environ.get("OUT", "device-checks"), help="folder for device.json")
    p.add_argument("--backends", help="comma-separated (default reference,torch,triton; smoke: reference,torch)")
    p.add_argument("--replicas", help="R of the energy_forces rows (default 1,8,64,128,256; smoke: 1,2)")
    p.add_argument("--pdb", help="structure of the BPTI rows (default: the packaged BPTI; smoke: trp-cage)")
    p.add_argument("--budget", type=float, help="seconds for all stages together (default 410; smoke 240)")
    p.add_argument("--reference-replicas", help="R of the reference backend's rows (default 8,64; smoke: 1,2)")
    p.add_argument("--openmm-replicas", help="R of the OpenMM rows (default 1,8,64,128,256; smoke: 1,2)")
    for name in ("openmm-steps", "openmm-steps-r1", "warmup", "repeats", "threads", "martini-minimize",
                 "martini-chunk"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--martini-processes", help="MARTINI processes at once, besides 1 (default 1,4)")
    p.add_argument("--martini-seconds", type=float, help="timed seconds of each MARTINI loop (default 3)")
    p.add_argument("--prediction", help="JSON with the predicted errors vs the oracle (key 'prediction'; "
                                        "default docs/tf32-accuracy.json)")
    p.add_argument("--baseline", help="the baseline tree (a folder with flashschnet/; default .baseline/: "
                                      "tools/device/fetch_device_baseline.sh)")
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated stages to run (default all)")
    p.add_argument("--martini-ff", help="folder of the MARTINI 3 .itp files (default .martini_ff/, else "
                                        "../shared/martini/m3)")
    p.add_argument("--max-memory-gb", type=float, help="skip a timing predicted to need more (default 100)")
    p.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)        # set by the parent for a child
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.root = Path(root or ".").resolve()
    for key, value in (SMOKE if args.smoke else FULL).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.pdb and not Path(args.pdb).is_absolute():
        args.pdb = str(args.root / args.pdb) if not Path(args.pdb).exists() else str(Path(args.pdb).resolve())
    args.prediction = args.prediction or str(args.root / "docs" / "tf32-accuracy.json")
    args.baseline = str(Path(args.baseline).resolve() if args.baseline else args.root / ".baseline")
    args.backends = [b for b in args.backends.split(",") if b]
    args.replicas, args.reference_replicas = _ints(args.replicas), _ints(args.reference_replicas)
    args.openmm_replicas, args.martini_processes = _ints(args.openmm_replicas), _ints(args.martini_processes)
    args.stages = [s for s in STAGES if s in args.stages.split(",")]
    # the backend compiled, quantized and put into OpenMM: triton if selected, else the last non-reference one
    fused = [b for b in args.backends if b != "reference"]
    args.kernel_backend = "triton" if "triton" in fused else (fused or args.backends)[-1]
    return args


def collect(report: Dict[str, Any]) -> None:
    """The report's row lists from its stages (in stage order, then each stage's order): ``timings`` (the
    energy_forces rows of both trees), ``ratios`` (:func:`.report.compute_ratios` of the checkout's BPTI rows),
    ``openmm`` (the OpenMM, do-nothing and tempering rows of both trees), ``martini``."""
    from .report import compute_ratios

    rows = [dict(r, stage=name) for name in STAGES for st in [report["stages"].get(name)] if st
            for r in sorted(st["results"] + st["skips"] + st["errors"], key=lambda r: r.get("seq", 0))]
    report["timings"] = [r for r in rows if r.get("kind") == "energy_forces" and "replicas" in r]
    report["ratios"] = compute_ratios([r for r in report["timings"] if r.get("tree", "current") == "current"
                                       and r.get("structure", "bpti") == "bpti" and r["status"] == "ok"])
    report["openmm"] = [r for r in rows if r.get("kind") in ("openmm", "overhead", "tempering") and "replicas" in r
                        and "platform" in r]
    report["martini"] = [r for r in rows if r.get("kind") == "martini"]


def run_stage(name: str, argv: List[str], deadline: float, result: Path, script: Path) -> Dict[str, Any]:
    """Run stage ``name`` as ``script`` (the entry point) with ``argv`` and ``--stage`` in a child process that
    saves its record in ``result`` after every item and is killed :data:`GRACE_S` after ``deadline`` (a
    ``time.time()``).

    Returns
    -------
    dict
        The record with ``status`` (ok; partial: skips; error: errors) and ``wall_s``; a child that crashed or
        was killed adds a ``stage`` error and keeps the items it had saved.
    """
    cmd = [sys.executable, "-u", str(script), *argv, "--stage", name, "--deadline", repr(deadline),
           "--result", str(result)]
    log(f"== stage {name} ({deadline - time.time():.0f} s until its deadline)")
    t0, problem = time.time(), None
    try:
        rc = subprocess.run(cmd, timeout=max(deadline - time.time(), 1.0) + GRACE_S).returncode
        if rc != 0:
            problem = f"stage process exit status {rc}" + (" (killed by a signal)" if rc < 0 else "")
    except subprocess.TimeoutExpired:
        problem = f"stage process killed {GRACE_S:.0f} s after its deadline (items after the last recorded lost)"
    data = json.loads(result.read_text()) if result.exists() else {"results": [], "skips": [], "errors": []}
    if problem:
        data["errors"].append({"item": "stage", "status": "error", "error": problem})
        log(f"stage {name}: {problem}")
    data["status"] = "error" if data["errors"] else ("partial" if data["skips"] else "ok")
    data["wall_s"] = round(time.time() - t0, 1)
    return data


def summary(report: Dict[str, Any]) -> str:
    """The report as readable text: stages, skips and errors, compile and correctness lines, then the targets,
    the side-by-side rows, OpenMM's share and MARTINI of :mod:`.device_report`."""
    lines = ["", "== device checks: stages"]
    for name, s in report["stages"].items():
        lines.append(f"{name:>12}: {s['status']:<8} {s['wall_s']:6.1f} s  {len(s['results'])} ok, "
                     f"{len(s['skips'])} skipped, {len(s['errors'])} errors")
        lines += [f"{'':>14}{e['status']}: {e['item']}: {e.get('reason') or e.get('error')}"
                  for e in s["skips"] + s["errors"]]
    for r in report["stages"].get("compile", {}).get("results", []):
        lines.append(f"compile {r['item']}: first {r['first_call_s']:.2f} s, second {r['second_call_s'] * 1e3:.1f} ms,"
                     f" backend {r['network_backend']} ran engine {r.get('engine', '?')}, finite {r['finite']}")
    for r in report["stages"].get("correctness", {}).get("results", []):
        if "check" in r:
            lines.append(f"{r['check']} check ({r['backend']}, matmul {r['matmul']}): measured E "
                         f"{r['energy_measured']:.2e} F {r['forces_measured']:.2e}, predicted E "
                         f"{r['energy_predicted']:.2e} F {r['forces_predicted']:.2e}: "
                         f"{'PASS' if r['passed'] else 'FAIL'} ({r['rule']})")
            continue
        diffs = ", ".join(f"{k.replace('_rel_diff_vs_', ' vs ')} {v:.1e}" for k, v in r.items() if "_diff_" in k)
        lines.append(f"correctness {r['item']}: vs oracle E {r['energy_rel_err_vs_oracle']:.1e} "
                     f"F {r['forces_rel_err_vs_oracle']:.1e}; bitwise repeatable {r['bitwise_repeatable']}"
                     + (f"; {diffs}" if diffs else ""))
    try:  # the targets and the comparisons, as tools/device/device_report.py renders them
        from .device_report import short

        lines += ["", short(report)]
    except Exception as exc:  # a convenience; device.json has the numbers
        lines.append(f"(no summary tables: {type(exc).__name__}: {exc})")
    return "\n".join(lines)


def commit(root: Path) -> Optional[str]:
    """The checkout's commit: ``$FLASHSCHNET_COMMIT`` (set by whoever copies the tree without .git), else
    ``git rev-parse HEAD`` (+ ``-dirty`` with uncommitted changes to tracked files), else None."""
    if os.environ.get("FLASHSCHNET_COMMIT"):
        return os.environ["FLASHSCHNET_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD"], timeout=20).returncode
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


class Terminated(Exception):
    """SIGTERM reached the parent (``timeout`` in tools/device/device_benchmark.sh): write what the stages saved."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv: Optional[List[str]] = None, script=None, root=None) -> int:
    """Run every stage, each in a child process (``script``: the entry point, run again with ``--stage``), and
    write ``OUT/device.json``; as a child, run one stage. ``root``: the checkout."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv, root)
    if args.threads:  # CPU threads of torch in the stages (smoke: 1, so that a busy test machine is not oversubscribed)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.stage:  # a child: one stage
        st = Stage(args.result, args.deadline)
        try:
            fn = getattr(importlib.import_module(f".{STAGE_MODULES[args.stage]}", __package__),
                         f"stage_{args.stage}")
            fn(args, st)
        except Exception as exc:  # e.g. an import: recorded; the next stage still runs
            st.add("errors", {"item": "stage", "status": "error", "error": f"{type(exc).__name__}: {exc}"[:500],
                              "traceback": traceback.format_exc()[-2000:]})
        write_json(st.data, st.path)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    settings = {k: v for k, v in vars(args).items() if k not in ("stage", "deadline", "result")}
    stamp = Path(args.baseline) / "COMMIT"
    settings.update(root=str(args.root), pdb=args.pdb or "flashschnet/examples/4PTI_bpti.pdb (packaged)",
                    oracle="tests/data/oracles/mlcg_schnet_A.pt", shares=SHARES,
                    command="python tools/device/device_checks.py " + " ".join(argv), commit=commit(args.root),
                    baseline_commit=stamp.read_text().strip() if stamp.exists() else None,
                    started_utc=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)))
    report: Dict[str, Any] = {"settings": settings, "machine": {}, "stages": {}, "timings": [], "ratios": [],
                              "openmm": [], "martini": []}
    previous = signal.signal(signal.SIGTERM, _terminate)     # the outer timeout: keep what the stages saved
    name, t_stage = None, start
    with tempfile.TemporaryDirectory(prefix="device-checks-") as tmp:
        try:
            for i, name in enumerate(STAGES):
                if name not in args.stages:
                    continue
                t_stage = time.time()
                deadline = start + args.budget * (1.0 - sum(SHARES[s] for s in STAGES[i + 1:]))
                stage = report["stages"][name] = run_stage(name, argv, deadline, Path(tmp) / f"{name}.json",
                                                           Path(script or sys.argv[0]).resolve())
                if name == "environment":  # machine_info, versions, GPUs, OpenMM platforms and libraries, one dict
                    for r in stage["results"]:
                        report["machine"].update({k: v for k, v in r.items() if k not in BOOKKEEPING})
                collect(report)
                report["total_wall_s"] = round(time.time() - start, 1)
                write_json(report, out / "device.json")
        except Terminated:
            result = Path(tmp) / f"{name or 'none'}.json"
            data = json.loads(result.read_text()) if result.exists() else {"results": [], "skips": [], "errors": []}
            data["errors"].append({"item": "stage", "status": "error",
                                   "error": "device_checks.py terminated (SIGTERM, the outer timeout) in this stage"})
            report["stages"][name or "none"] = dict(data, status="error", wall_s=round(time.time() - t_stage, 1))
            collect(report)
            report["total_wall_s"] = round(time.time() - start, 1)
            log(f"terminated in stage {name}: the items it saved are kept")
        finally:
            signal.signal(signal.SIGTERM, previous)
    failed = [name for name, stage in report["stages"].items() if stage["errors"]]
    report["passed"] = not failed
    write_json(report, out / "device.json")
    print(summary(report), flush=True)
    log(f"wrote {out / 'device.json'} ({report['total_wall_s']:.0f} s): "
        + (f"FAILED: errors in {', '.join(failed)}" if failed else "passed (no errors)"))
    return 1 if failed else 0
