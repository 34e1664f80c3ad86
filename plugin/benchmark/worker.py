"""One benchmark configuration in a fresh process, so that its peak memory is its own.

    python -m flashschnet.openmm.benchmark.worker '<configuration as JSON>'

runs :func:`flashschnet.openmm.benchmark.measure.energy_forces` (``"kind": "energy_forces"``) or
:func:`~flashschnet.openmm.benchmark.measure.openmm_loop` (``"kind": "openmm"``) and prints
``BENCHMARK_RESULT <json>`` as its last stdout line: the measurement with ``"status": "ok"``, or
``{"status": "error", "error": "<one line>"}`` (a failing configuration is a row of the report, not a crash of
the whole benchmark). :func:`run_worker` starts it and reads that line back.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

MARKER = "BENCHMARK_RESULT "


def measure(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Measure one configuration in this process; errors become ``{"status": "error", "error": ...}``."""
    from .measure import KINDS

    try:
        out = KINDS[cfg["kind"]](cfg)
        out["status"] = "ok"
    except Exception as exc:  # reported in the table, not a crash of the whole benchmark
        out = {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m flashschnet.openmm.benchmark.worker '<configuration as JSON>'", file=sys.stderr)
        return 2
    out = measure(json.loads(argv[0]))
    print(MARKER + json.dumps(out), flush=True)
    return 0


def run_worker(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Measure ``cfg`` in a fresh Python process (this interpreter, this environment; ``OMP_NUM_THREADS``
    defaults to the configuration's threads); the result gets ``subprocess_wall_s``."""
    cmd = [sys.executable, "-m", "flashschnet.openmm.benchmark.worker", json.dumps(cfg)]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(cfg["threads"]))
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(MARKER):
            out = json.loads(line[len(MARKER):])
            break
    else:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        why = "killed (out of memory?)" if res.returncode in (-9, 137) else f"exit status {res.returncode}"
        out = {"status": "error", "error": f"worker {why}: {tail[0][:300]}"}
    out["subprocess_wall_s"] = wall
    return out


if __name__ == "__main__":
    sys.exit(main())
