"""Timing rows of the device checks in a worker process of a chosen source tree, and the loop that runs a plan.

A :class:`RowWorker` is one Python process that imports ``flashschnet`` from a tree -- the checkout's as installed
(``tree="current"``), or the baseline's copy in ``.baseline/`` (``tools/device/fetch_device_baseline.sh``: the last
commit before the kernel rewrite, ``PYTHONPATH=.baseline:$SITE`` in place of the installed checkout) -- and runs the
rows it is sent, one JSON configuration a line on its stdin, each answered by one ``DEVICE_ROW <json>`` line: the
measurement of :data:`flashschnet.openmm.benchmark.measure.KINDS` (or of the function a configuration names in
``call``, ``module:function``). Its code (:data:`WORKER`) uses nothing but what both trees have
(``measure.KINDS``), so the same rows run the same way in both, side by side. A row that crashes the worker (a
segfault, a broken CUDA context) is one error; the next row starts a fresh worker. A row still running at the
deadline is killed. After each row the worker empties the fused op's engine cache (which would keep every row's
model, workspace and CUDA graph alive) and torch's allocator cache, so that a row's peak memory is its own. The
worker ends itself when the process that started it is gone.

:func:`run_plan` runs a stage's plan: each row, or a skip with the reason (the stage's deadline; the same
configuration failed at a smaller R; its time, or its memory, predicted from a smaller R to overrun).
"""
from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from .device_checks import Stage, log, one_line, row_key

__all__ = ["MARKER", "READY", "WORKER", "RowError", "RowWorker", "tree_pythonpath", "loop_seconds", "predict_s",
           "why_not", "run_plan"]

MARKER, READY = "DEVICE_ROW ", "DEVICE_ROW_READY "

#: the worker's program (``python -c WORKER MARKER READY``): both trees have ``measure.KINDS``
WORKER = r'''
import gc, importlib, json, os, sys, threading, time, traceback
MARKER, READY = sys.argv[1], sys.argv[2]
def emit(tag, obj):
    sys.stdout.write("\n" + tag + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()
def watch(parent=os.getppid()):
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)
threading.Thread(target=watch, daemon=True).start()
t0 = time.time()
try:
    import torch
    import flashschnet
    from flashschnet.openmm.benchmark import measure
    try:
        import openmm  # noqa: F401  (after torch)
    except Exception:
        pass
except BaseException as exc:
    emit(READY, {"error": (type(exc).__name__ + ": " + str(exc))[:2000], "pid": os.getpid()})
    sys.exit(1)
emit(READY, {"flashschnet": os.path.dirname(os.path.abspath(flashschnet.__file__)), "pid": os.getpid(),
             "torch": torch.__version__, "import_s": time.time() - t0})
for line in sys.stdin:
    if not line.strip():
        continue
    cfg = json.loads(line)
    t = time.perf_counter()
    try:
        if cfg.get("call"):
            mod, _, attr = cfg["call"].partition(":")
            fn = getattr(importlib.import_module(mod), attr)
        else:
            fn = measure.KINDS[cfg["kind"]]
        out = dict(fn(cfg), status="ok")
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            out.setdefault("peak_allocated_mb", torch.cuda.max_memory_allocated() / 2**20)
    except Exception as exc:
        out = {"status": "error", "error": (type(exc).__name__ + ": " + str(exc))[:4000],
               "traceback": traceback.format_exc()[-2000:]}
    out["worker_s"] = time.perf_counter() - t
    emit(MARKER, out)
    try:  # the op's engine cache keeps each row's model, workspace and graph alive: a row's memory is its own
        from flashschnet.fused import op as _op
        with _op._ENGINES_LOCK:
            _op._ENGINES.clear()
    except Exception:
        pass
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
'''


class RowError(RuntimeError):
    """A row that failed (its one-line message, the row's own exception first: recorded ``bare``, without this
    class's name); ``details`` join the stage's error record."""

    bare = True

    def __init__(self, message: str, **details):
        super().__init__(one_line(message))
        self.details = details


def tree_pythonpath(tree: str, pythonpath: Optional[str]) -> str:
    """``PYTHONPATH`` for a worker of the source tree at ``tree`` (a folder holding a ``flashschnet`` package):
    ``tree`` first, then the entries of ``pythonpath`` that hold no ``flashschnet`` of their own (the site of the
    carried wheels stays, the installed checkout goes)."""
    keep = [p for p in (pythonpath or "").split(os.pathsep) if p and not (Path(p) / "flashschnet").exists()]
    return os.pathsep.join([str(Path(tree).resolve())] + keep)


class RowWorker:
    """A worker process of one source tree (see the module docstring), started on the first row.

    Parameters
    ----------
    tree : str
        "current" (the checkout as this process imports it) or "baseline".
    root : path, optional
        The baseline tree (a folder with ``flashschnet/``); required for ``tree="baseline"``.
    python : str
        The interpreter (default: this one).
    echo : bool
        Print the worker's other output lines (its notes and warnings), indented.
    """

    def __init__(self, tree: str = "current", root=None, python: str = sys.executable, echo: bool = True):
        if tree == "baseline" and not root:
            raise ValueError("a baseline worker needs the baseline tree's folder (root)")
        self.tree, self.root, self.python, self.echo = tree, (Path(root).resolve() if root else None), python, echo
        self.proc: Optional[subprocess.Popen] = None
        self.ready: Dict[str, Any] = {}
        self.starts = 0
        #: why this worker cannot start (it died while importing, or imported another tree): "" if it can
        self.broken = ""
        self._lines: "queue.Queue[Optional[Tuple[str, Any]]]" = queue.Queue()
        self._tail: collections.deque = collections.deque(maxlen=6)
        self._cache = tempfile.TemporaryDirectory(prefix="device-rows-cache-") if tree == "baseline" else None

    # ---------------------------------------------------------------------------------------------- process
    def _env(self) -> Dict[str, str]:
        env = dict(os.environ)
        if self.tree == "baseline":
            env["PYTHONPATH"] = tree_pythonpath(str(self.root), env.get("PYTHONPATH"))
            env["FLASHSCHNET_CACHE_DIR"] = self._cache.name       # the baseline's filter tables apart
        return env

    def _reader(self, stream, is_stdout: bool) -> None:
        for line in stream:
            line = line.rstrip("\n")
            for tag in (MARKER, READY):
                if is_stdout and line.startswith(tag):
                    try:
                        self._lines.put((tag, json.loads(line[len(tag):])))
                    except ValueError:
                        self._lines.put((tag, {"status": "error", "error": f"unreadable answer: {line[:200]}"}))
                    break
            else:
                if line.strip():
                    self._tail.append(line.strip())
                    if self.echo:
                        print(f"    | {line}", flush=True)
        if is_stdout:
            self._lines.put(None)

    def start(self, deadline: float) -> Dict[str, Any]:
        """Start the worker and wait (until ``deadline``, a ``time.time()``) for its ready line; check that it
        imported ``flashschnet`` from its tree. Raises :class:`RowError`."""
        self.close()
        self._lines, self._tail = queue.Queue(), collections.deque(maxlen=6)
        t0 = time.time()
        self.proc = subprocess.Popen([self.python, "-u", "-c", WORKER, MARKER, READY], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                                     cwd=tempfile.gettempdir(), env=self._env())
        self.starts += 1
        for stream, out in ((self.proc.stdout, True), (self.proc.stderr, False)):
            threading.Thread(target=self._reader, args=(stream, out), daemon=True).start()
        try:
            tag, ready = self._wait(deadline, "starting the worker")
        except RowError as exc:
            if "died" in str(exc):
                self.broken = str(exc)
            raise
        if tag != READY or "error" in ready:
            self.close()
            self.broken = one_line(f"the {self.tree} tree's worker cannot start: {ready.get('error', ready)}")
            raise RowError(self.broken)
        where = Path(ready["flashschnet"]).resolve()
        inside = self.root is not None and self.root in where.parents
        if (self.tree == "baseline") != inside:
            self.close()
            self.broken = (f"the {self.tree} tree's worker imported flashschnet from {where}"
                           + (f", not from {self.root}" if self.tree == "baseline" else f", inside {self.root}"))
            raise RowError(self.broken)
        self.ready = dict(ready, start_s=round(time.time() - t0, 2))
        log(f"{self.tree} tree's row worker: flashschnet from {where} (pid {ready['pid']}, "
            f"{self.ready['start_s']:.1f} s to start)")
        return self.ready

    def _wait(self, deadline: float, doing: str) -> Tuple[str, Dict[str, Any]]:
        try:
            item = self._lines.get(timeout=max(deadline - time.time(), 0.05))
        except queue.Empty:
            self.close()
            raise RowError(f"killed at the stage deadline while {doing}") from None
        if item is None:
            rc = self.proc.wait() if self.proc else None
            self.proc = None
            why = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"
            raise RowError(f"the {self.tree} tree's worker died while {doing} ({why}); last output: "
                           + " / ".join(self._tail), exit_status=rc)
        return item

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """End the worker (kill it if it does not end on a closed stdin)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -------------------------------------------------------------------------------------------------- rows
    def run(self, cfg: Dict[str, Any], deadline: float) -> Dict[str, Any]:
        """Measure configuration ``cfg`` in the worker (started if needed); its measurement with ``tree`` and
        ``worker_start_s`` (a fresh worker's start), or :class:`RowError` (the row's error, one line; the worker
        died; the ``deadline`` passed: the worker is killed)."""
        fresh = not self.alive()
        if fresh:
            self.start(deadline)
        try:
            self.proc.stdin.write(json.dumps(cfg) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.close()
            raise RowError(f"cannot send the row to the worker: {exc}") from None
        tag, out = self._wait(deadline, "running the row")
        if out.get("status") != "ok":
            raise RowError(out.get("error", "the worker gave no result"), worker_traceback=out.get("traceback", ""))
        out.pop("status", None)
        out.update(tree=self.tree, flashschnet_path=self.ready.get("flashschnet"))
        if fresh:
            out["worker_start_s"] = self.ready.get("start_s")
        return out


# ------------------------------------------------------------------------------------------------- the plan
def loop_seconds(rec: Dict[str, Any]) -> float:
    """The part of a row's time that grows with R: its timed calls and warm-up (energy_forces), or its steps."""
    if "median_ms" in rec:
        return (len(rec.get("times_ms") or ()) + 3) * rec["median_ms"] / 1e3
    if "ms_per_step" in rec:
        return (rec.get("steps", 0) + rec.get("warmup_steps", 0) + 5) * rec["ms_per_step"] / 1e3
    return 0.0


def predict_s(done: List[Dict[str, Any]], r: Dict[str, Any]) -> Optional[Tuple[float, int]]:
    """Seconds plan row ``r`` is predicted to take, from the same configuration's largest smaller R among the
    records ``done``: its set-up plus its loop scaled linearly in R; with that R. None: no such record."""
    same = [o for o in done if row_key(o) == row_key(r) and o["replicas"] < r["replicas"]
            and loop_seconds(o) > 0]
    if not same:
        return None
    base = max(same, key=lambda o: o["replicas"])
    loop = loop_seconds(base)
    setup = max(base.get("wall_s", loop) - loop, 0.0)
    return setup + loop * r["replicas"] / base["replicas"], base["replicas"]


def why_not(st: Stage, r: Dict[str, Any], max_memory_mb: Optional[float] = None) -> Optional[str]:
    """Why not to run plan row ``r`` now, or None: the stage deadline, the same configuration failed at a smaller
    R, its time (:func:`predict_s`; without a smaller R, the median row's so far) over the time left, or its memory
    (``peak_extra_mb`` linear in R) over ``max_memory_mb``."""
    left = st.left()
    if left < 1.0:
        return f"stage deadline: {max(left, 0):.0f} s left"
    failed = [e["replicas"] for e in st.data["errors"] if "replicas" in e and row_key(e) == row_key(r)
              and e["replicas"] < r["replicas"]]
    if failed:
        return f"failed at R={min(failed)} (see errors)"
    done = st.data["results"]
    if max_memory_mb:
        mem = [o for o in done if row_key(o) == row_key(r) and o["replicas"] < r["replicas"] and o.get("peak_extra_mb")]
        if mem:
            base = max(mem, key=lambda o: o["replicas"])
            need = base["peak_extra_mb"] * r["replicas"] / base["replicas"]
            if need > max_memory_mb:
                return (f"predicted {need / 1024:.1f} GB > {max_memory_mb / 1024:.1f} GB "
                        f"(linear in R from R={base['replicas']})")
    pred = predict_s(done, r)
    if pred and pred[0] > left:
        return f"predicted {pred[0]:.0f} s > the {left:.0f} s left (set-up + loop, linear in R from R={pred[1]})"
    walls = sorted(o["wall_s"] for o in done if o.get("wall_s") is not None)
    if pred is None and walls and walls[len(walls) // 2] > left:
        return f"predicted {walls[len(walls) // 2]:.0f} s (the median row so far) > the {left:.0f} s left"
    return None


def run_plan(st: Stage, plan: List[Dict[str, Any]], worker: RowWorker,
             make: Callable[[Dict[str, Any]], Tuple[str, Dict[str, Any], Dict[str, Any]]],
             extra: Optional[Callable[[Dict[str, Any]], Optional[str]]] = None, max_memory_mb: Optional[float] = None,
             grace_s: float = 5.0) -> List[str]:
    """Run every row of ``plan`` in ``worker``, in order: ``make(row) -> (item, tags, configuration)``; a row is
    skipped with the reason of ``extra(row)`` or :func:`why_not`; a running row is killed ``grace_s`` after the
    stage's deadline. Returns each row's outcome: "ok", "skipped" or "error"."""
    outcomes = []
    for r in plan:
        item, tags, cfg = make(r)
        why = (extra(r) if extra else None) or why_not(st, dict(r, **tags), max_memory_mb)
        if why:
            st.skip(item, why, **tags)
            outcomes.append("skipped")
            continue
        rec = st.run(item, lambda: worker.run(cfg, st.deadline + grace_s), need_s=1.0, **tags)
        outcomes.append("error" if rec is None else "ok")
    return outcomes
