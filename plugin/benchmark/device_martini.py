"""MARTINI 3 BPTI in water on the device checks' machine: as one process, and as several processes at once on the
same GPU (their aggregate ns/day), the comparison FlashSchNet's rows are held to.

* :func:`martini_loop` -- the committed BPTI system (``tests/data/martini/systems/bpti``, equal to GROMACS term
  by term) on an OpenMM platform: minimised, 20 fs Langevin at 300 K, timed in chunks of steps until at least
  ``min_seconds`` have passed (so that a fast GPU still times a loop long enough to read);
* :func:`run_processes` -- ``n`` such loops, each in its own process (``python -m
  flashschnet.openmm.benchmark.device_martini '<json>'``), set up side by side and released together by a file
  barrier once all are ready, so that their timed loops overlap; each process's ns/day and the sum;
* :func:`stage_martini` -- the stage (:mod:`.device_main`): 1 process, then ``--martini-processes`` (default 4).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from .device_checks import Stage, one_line

__all__ = ["MARKER", "SYSTEM", "DT_FS", "martini_ff", "martini_loop", "file_barrier", "run_processes", "stage_martini",
           "main"]

MARKER = "MARTINI_RESULT "
#: the committed MARTINI 3 BPTI system, under the checkout
SYSTEM = Path("tests") / "data" / "martini" / "systems" / "bpti"
DT_FS = 20.0


def martini_ff(args) -> Optional[Path]:
    """The folder of the MARTINI 3 ``.itp`` files: ``--martini-ff``, else ``.martini_ff/`` (carried to the device),
    else ``../shared/martini/m3``; None if none holds ``martini_v3.0.0.itp``."""
    root = Path(args.root)
    candidates = [Path(args.martini_ff)] if getattr(args, "martini_ff", None) else \
        [root / ".martini_ff", root.parent / "shared" / "martini" / "m3"]
    return next((d.resolve() for d in candidates if (d / "martini_v3.0.0.itp").exists()), None)


def martini_loop(system_dir, ff_dir, platform: str, min_seconds: float = 3.0, chunk: int = 500,
                 minimize: int = 200, threads: Optional[int] = None,
                 barrier: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """MARTINI 3 BPTI on OpenMM ``platform``: ``minimize`` minimiser iterations, 10 warm-up steps, then
    ``barrier()`` (if given), then steps in chunks of ``chunk`` until ``min_seconds`` have passed; ns/day at 20 fs.
    ``threads``: the CPU platform's threads."""
    import openmm
    import openmm.unit as u

    from flashschnet.openmm.martini.system import build_system, read_gro
    from flashschnet.openmm.martini.topology import read_topology

    t_setup = time.perf_counter()
    system_dir = Path(system_dir)
    top = read_topology(system_dir / "system.top", include_dirs=[str(ff_dir)])
    pos, box = read_gro(system_dir / "system.gro")
    system = build_system(top, box)
    integrator = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1.0 / u.picosecond, DT_FS / 1000 * u.picoseconds)
    props = {"Threads": str(threads)} if platform == "CPU" and threads else {}
    ctx = openmm.Context(system, integrator, openmm.Platform.getPlatformByName(platform), props)
    ctx.setPositions(pos)
    if minimize:
        openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, int(minimize))
    integrator.step(10)
    ctx.getState(getEnergy=True)
    setup = time.perf_counter() - t_setup
    if barrier is not None:
        barrier()
    start, t0, steps = time.time(), time.perf_counter(), 0
    while True:
        integrator.step(int(chunk))
        steps += int(chunk)
        state = ctx.getState(getEnergy=True)          # waits for the chunk (asynchronous platforms)
        wall = time.perf_counter() - t0
        if wall >= min_seconds:
            break
    e = state.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
    ns_day = steps * DT_FS * 1e-6 / wall * 86400.0
    return {"platform": platform, "particles": system.getNumParticles(), "steps": steps, "dt_fs": DT_FS,
            "wall_s_loop": wall, "ms_per_step": wall / steps * 1e3, "ns_per_day_per_replica": ns_day,
            "ns_per_day_aggregate": ns_day, "potential_kJ_mol": e, "setup_s": setup, "start_unix": start,
            "end_unix": time.time(), "minimize_iterations": int(minimize)}


def file_barrier(folder, index: int, timeout: float = 300.0) -> Callable[[], None]:
    """A barrier for process ``index``: it says it is ready (``folder/ready-<index>``), then waits for
    ``folder/go`` (at most ``timeout`` seconds)."""
    def wait():
        Path(folder, f"ready-{index}").touch()
        t0 = time.time()
        while not Path(folder, "go").exists():
            if time.time() - t0 > timeout:
                raise TimeoutError(f"no go in {folder} after {timeout:.0f} s")
            time.sleep(0.002)
    return wait


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def main(argv: Optional[List[str]] = None) -> int:
    """One process of :func:`run_processes`: ``main(['<json>'])`` runs :func:`martini_loop` with the JSON's
    arguments (``barrier``/``index``: the file barrier) and prints ``MARTINI_RESULT <json>``."""
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    folder, index = spec.pop("barrier", None), spec.pop("index", 0)
    try:
        out = dict(martini_loop(barrier=file_barrier(folder, index) if folder else None, **spec), status="ok")
    except Exception as exc:
        out = {"status": "error", "error": one_line(f"{type(exc).__name__}: {exc}")}
        if folder:
            Path(folder, f"ready-{index}").touch()
    print("\n" + MARKER + json.dumps(out), flush=True)
    return 0


def run_processes(n: int, spec: Dict[str, Any], deadline: float, python: str = sys.executable,
                  grace_s: float = 5.0) -> Dict[str, Any]:
    """``n`` :func:`martini_loop` processes of ``spec`` (its keyword arguments, JSON-able), released together once
    all are set up; killed ``grace_s`` after ``deadline`` (a ``time.time()``). Returns each process's
    measurement (``per_process``), their sum (``ns_per_day_aggregate``), their mean (``ns_per_day_per_replica``,
    ``ms_per_step``) and how long all timed loops ran at once (``overlap_s``). Raises RuntimeError (one line) if
    none ran."""
    with tempfile.TemporaryDirectory(prefix="martini-") as folder:
        cmd = [python, "-u", "-m", "flashschnet.openmm.benchmark.device_martini"]
        procs = [subprocess.Popen(cmd + [json.dumps(dict(spec, barrier=folder, index=i))], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for i in range(n)]
        outputs: List[str] = [""] * n

        def drain(i):
            outputs[i] = procs[i].stdout.read()
        readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(n)]
        for t in readers:
            t.start()
        try:
            while not all(Path(folder, f"ready-{i}").exists() or procs[i].poll() is not None for i in range(n)):
                if time.time() > deadline + grace_s:
                    raise RuntimeError(f"not all {n} MARTINI processes were set up by the stage deadline")
                time.sleep(0.01)
            Path(folder, "go").touch()
            for i, p in enumerate(procs):
                p.wait(timeout=max(deadline + grace_s - time.time(), 1.0))
                readers[i].join(timeout=5)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the {n} MARTINI processes ran past the stage deadline") from None
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    per: List[Dict[str, Any]] = []
    for i, text in enumerate(outputs):
        line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(MARKER)), None)
        if line is None:
            tail = " / ".join(ln.strip() for ln in text.strip().splitlines()[-3:])
            why = f"process {i}: exit status {procs[i].returncode}; {tail}"
            per.append({"status": "error", "error": one_line(why)})
        else:
            per.append(json.loads(line[len(MARKER):]))
    ok = [p for p in per if p.get("status") == "ok"]
    if not ok:
        raise RuntimeError(per[0].get("error", "no MARTINI process ran"))
    return {"processes": n, "processes_ok": len(ok), "per_process": per, "particles": ok[0]["particles"],
            "dt_fs": DT_FS, "platform": ok[0]["platform"], "steps": ok[0]["steps"],
            "ns_per_day_aggregate": sum(p["ns_per_day_per_replica"] for p in ok),
            "ns_per_day_per_replica": sum(p["ns_per_day_per_replica"] for p in ok) / len(ok),
            "ms_per_step": sum(p["ms_per_step"] for p in ok) / len(ok),
            "overlap_s": min(p["end_unix"] for p in ok) - max(p["start_unix"] for p in ok),
            "potential_kJ_mol": ok[0]["potential_kJ_mol"], "minimize_iterations": ok[0]["minimize_iterations"]}


def stage_martini(args, st: Stage) -> None:
    """Stage 7: MARTINI 3 BPTI as 1 process, then as each of ``args.martini_processes`` concurrent processes, on
    the CUDA platform (``--device cuda``) or the CPU platform; each a skip with the reason when the force-field
    files or the platform are missing, or the time left is predicted too short."""
    from flashschnet.openmm.platforms import loaded_platforms

    platform = "CUDA" if args.device == "cuda" else "CPU"
    ff = martini_ff(args)
    counts = sorted({1, *args.martini_processes})
    why = None
    if ff is None:
        why = "no MARTINI 3 .itp files (--martini-ff, .martini_ff/ or ../shared/martini/m3)"
    elif platform not in loaded_platforms():
        why = f"OpenMM platform {platform} not loaded"
    spec = dict(system_dir=str(Path(args.root) / SYSTEM), ff_dir=str(ff), platform=platform,
                min_seconds=float(args.martini_seconds), minimize=int(args.martini_minimize),
                chunk=int(args.martini_chunk), threads=int(args.threads) if args.threads else None)
    last = None
    for n in counts:
        tags = dict(kind="martini", platform=platform, processes=n, replicas=1, backend="MARTINI 3 (no network)",
                    system="BPTI (4PTI) in MARTINI 3 water, 0.15 M NaCl", network_force="none (pair potentials)",
                    dt_fs=DT_FS)
        item = f"OpenMM {platform} MARTINI 3 BPTI, {n} process{'es' if n > 1 else ''} at once"
        if why:
            st.skip(item, why, **tags)
            continue
        need = 2.0 if last is None else 1.3 * last + 2.0
        rec = st.run(item, lambda: run_processes(n, spec, st.deadline), need_s=need, **tags)
        last = rec["wall_s"] if rec else last


if __name__ == "__main__":
    sys.exit(main())
