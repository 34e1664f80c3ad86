"""Every number a lent GPU machine should give, in one command that ends well inside the device tool's limit.

    python tools/device/device_checks.py --device cuda --out "$OUT"          # on the device (device_benchmark.sh)
    python tools/device/device_checks.py --device cpu --smoke --out /tmp/x   # the same stages at tiny sizes, on a CPU
    python tools/device/device_checks.py --help                              # every option

The stages (environment, compile, correctness, timings, baseline, openmm, martini), their deadlines, the row
workers of the checkout's and the baseline's trees and ``OUT/device.json`` are
:mod:`flashschnet.openmm.benchmark.device_main` (its docstring says what each stage measures); this entry point
only says where the checkout is (its ``tests/data``, ``.baseline/`` and ``.martini_ff/``) and is what each stage's
child process runs again with ``--stage``. ``tools/device/device_report.py`` renders device.json into
docs/benchmarks.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

from flashschnet.openmm.benchmark.device_main import main

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], script=Path(__file__).resolve(), root=ROOT))
