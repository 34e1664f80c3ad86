#!/usr/bin/env bash
# The prepared GPU checks for a lent device machine (see the device tool's README): ONE call gives every number
# (environment and OpenMM plugin load failures, Triton compile/launch, correctness on the mlcg oracle, timings at
# R = 1, 8, 64, 128 for reference / torch / triton / triton+bf16, the OpenMM loop through openmm.PythonForce).
# The logic is tools/device_checks.py (each stage in its own process, with its own deadline; ~7.5 min in all,
# hard stop at ~8 min 10 s plus the installs); this script installs, sets the paths and calls it. The device
# image has Python 3.12, torch + triton, no OpenMM and no openmm-torch: the OpenMM wheels travel in .whl/.
#
# Here, once per session:   bash tools/fetch_device_wheels.sh        (fills .whl/, ignored by git)
#                           mkdir -p .martini_ff && cp ../shared/martini/m3/*.itp .martini_ff/   (MARTINI row)
# Then, with the device tool:
#     run(command="bash tools/device_benchmark.sh", carry=[".whl", ".martini_ff"], timeout_s=590)
# It writes two files to $OUT: device.json (everything, one object) and device.log (this output).
# Here, on a CPU, the same stages at tiny sizes:  python tools/device_checks.py --device cpu --smoke --out /tmp/x
set -uo pipefail                      # no -e: a failed install is logged and the checks still run (and record it)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
{
  echo "== installing the carried OpenMM wheels (.whl/) and this checkout"
  ls .whl/*.whl || echo "no .whl/: run tools/fetch_device_wheels.sh here and pass carry=[\".whl\"]"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || echo "INSTALL FAILED: the OpenMM wheels (the openmm stage will fail)"
  if ! python3 -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/fs . >/dev/null 2>&1; then
    echo "pip install of the checkout failed: using a copy of the source tree in /tmp/fs instead"
    rm -rf /tmp/fs && mkdir -p /tmp/fs && cp -r model /tmp/fs/flashschnet && cp -r plugin /tmp/fs/flashschnet/openmm \
      && cp -r scripts /tmp/fs/flashschnet/scripts
  fi
  # The OpenMM CUDA plugin's RUNPATH looks for libnvrtc.so.13 / libcufft.so.12 in ../../../nvidia/cu13/lib next to
  # OpenMM.libs, i.e. /tmp/site/nvidia: point that at the nvidia wheels torch brought (LD_LIBRARY_PATH too).
  nv="$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$nv" ] && [ ! -e /tmp/site/nvidia ]; then ln -s "$nv" /tmp/site/nvidia; fi
  libs="$([ -n "$nv" ] && ls -d "$nv"/*/lib 2>/dev/null | paste -sd: -)"
  echo "nvidia wheels: ${nv:-none found}"
  if [ -n "$libs" ]; then export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
  export PYTHONPATH=/tmp/fs:/tmp/site PYTHONUNBUFFERED=1
  timeout -k 5 490 python3 tools/device_checks.py --device cuda --out "$OUT"
  echo "device_checks.py exit status $?"
} 2>&1 | tee "$OUT/device.log"
