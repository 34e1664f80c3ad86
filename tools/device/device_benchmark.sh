#!/usr/bin/env bash
# The prepared one-call GPU benchmark for a lent device machine (one H200; see the device tool's README): ONE call
# gives every number, the new kernels and the old side by side. In order of importance, each row a skip with its
# reason when its stage's deadline would be overrun (tools/device/device_checks.py; its stages and shares of the 410 s
# budget are flashschnet.openmm.benchmark.device_main's):
#   1. the checkout's rows and the same rows of the baseline tree (.baseline/: the last commit before the kernel
#      rewrite, f4fff81), in the same call: energy_forces of float32 tables with and without the model's CUDA graph
#      and of tf32 products, and the OpenMM TorchForce loop, at R = 1 and 64 (stage "baseline", ~1 min);
#   2. BPTI (284 beads) at R = 1, 8, 64, 128, 256: the default network (float32 tables) with and without the
#      model's CUDA graph, tf32 and bf16 products at R = 1, 64, the reference at R = 8, 64; peak GPU memory per row;
#   3. lysozyme (tests/data/structures/1HEL_lysozyme.pdb) at R = 1, 64: how the cost grows with size;
#   4. OpenMM's share of a step: a do-nothing TorchForce (with and without openmm-torch's CUDA graphs) and a
#      do-nothing PythonForce in the same Simulation loop as the network rows;
#   5. MARTINI 3 BPTI in water as 1 process and as 4 processes at once on the same GPU;
#   and before them the environment, Triton's compile of every kernel variant and correctness on the mlcg oracle
#   (the model's CUDA-graph capture and replay included: a failure there is one error line, not a crash).
# This script installs (tools/device/device_install.sh: the same commands tools/device/device_rehearsal.sh runs here),
# sets the paths and calls tools/device/device_checks.py (each stage in its own process with its own deadline; 410 s
# budget, killed at 430 s: with the install, under 8 minutes). The device image has Python 3.12, torch 2.11 + CUDA 13,
# triton 3.6.0, numpy 2.5, no OpenMM and no openmm-torch: those travel as wheels in .whl/.
#
# Here, once per session:   bash tools/device/fetch_device_wheels.sh      (fills .whl/, ignored by git)
#                           bash tools/device/fetch_device_baseline.sh    (fills .baseline/, ignored by git)
#                           mkdir -p .martini_ff && cp ../shared/martini/m3/*.itp .martini_ff/ \
#                             && gzip -f .martini_ff/martini_v3.0.0.itp && echo /.martini_ff/ >> .git/info/exclude
#                                         (the MARTINI rows; the 16 MB parameter file travels as 1.3 MB of gzip)
#                           bash tools/device/device_rehearsal.sh         (the same install and stages on this CPU,
#                                                                          and the carried size against 64 MiB)
# Then, with the device tool (one call: the command ends by ~7.5 minutes, worst case; ~9-10 with the start):
#     run(command="bash tools/device/device_benchmark.sh", carry=[".whl", ".martini_ff", ".baseline"], timeout_s=500)
# It writes two files to $OUT: device.json (everything, one object) and device.log (this output); then, here:
#     python tools/device/device_report.py /work/.device/.../device.json   (docs/benchmarks.md's section of this run)
set -uo pipefail                      # no -e: a failed install is logged and the checks still run (and record it)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
t0=$(date +%s)
{
  source tools/device/device_install.sh
  if [ -f .baseline/flashschnet/__init__.py ]; then
    echo "baseline tree: .baseline/ at $(cat .baseline/COMMIT 2>/dev/null), $(du -sb .baseline | cut -f1) bytes"
  else
    echo "no .baseline/: run tools/device/fetch_device_baseline.sh here and pass carry=[..., \".baseline\"]" \
      "(its rows skip)"
  fi
  ff=()                                 # the MARTINI 3 .itp files, the gzipped ones unpacked outside the tree
  if ls .martini_ff/*.itp.gz >/dev/null 2>&1; then
    mkdir -p /tmp/martini_ff && cp .martini_ff/*.itp /tmp/martini_ff/ 2>/dev/null
    for f in .martini_ff/*.itp.gz; do gunzip -c "$f" > "/tmp/martini_ff/$(basename "${f%.gz}")"; done
    ff=(--martini-ff /tmp/martini_ff)
  fi
  echo "== install done after $(( $(date +%s) - t0 )) s"
  timeout -k 5 430 "$PY" tools/device/device_checks.py --device cuda --out "$OUT" ${ff[@]+"${ff[@]}"}
  echo "device_checks.py exit status $?; the whole command $(( $(date +%s) - t0 )) s"
} 2>&1 | tee "$OUT/device.log"
