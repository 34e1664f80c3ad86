#!/usr/bin/env bash
# The prepared GPU checks for a lent device machine (see the device tool's README): ONE call gives every number
# (environment and OpenMM plugin load failures, Triton compile/launch, correctness on the mlcg oracle and the tf32
# prediction, energy_forces timings, and the OpenMM loop through the real TorchForce on the CUDA platform, with
# and without CUDA graphs, beside PythonForce; MARTINI 3 BPTI in the same run).
# The logic is tools/device_checks.py (each stage in its own process, with its own deadline; under 8 minutes in
# all); this script installs (tools/device_install.sh: the same commands tools/device_rehearsal.sh runs here),
# sets the paths and calls it. The device image has Python 3.12, torch 2.11 + CUDA 13, triton 3.6.0, numpy 2.5, no
# OpenMM and no openmm-torch: those travel as wheels in .whl/.
#
# Here, once per session:   bash tools/fetch_device_wheels.sh        (fills .whl/, ignored by git)
#                           mkdir -p .martini_ff && cp ../shared/martini/m3/*.itp .martini_ff/   (MARTINI row)
#                           bash tools/device_rehearsal.sh            (the same install and stages on this CPU)
# Then, with the device tool:
#     run(command="bash tools/device_benchmark.sh", carry=[".whl", ".martini_ff"], timeout_s=590)
# It writes two files to $OUT: device.json (everything, one object) and device.log (this output); then, here:
#     python tools/device_report.py /work/.device/.../device.json     (docs/benchmarks.md's GPU section)
set -uo pipefail                      # no -e: a failed install is logged and the checks still run (and record it)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
{
  source tools/device_install.sh
  timeout -k 5 490 "$PY" tools/device_checks.py --device cuda --out "$OUT"
  echo "device_checks.py exit status $?"
} 2>&1 | tee "$OUT/device.log"
