#!/usr/bin/env bash
# Download the wheels the device benchmark carries (.whl/, ignored by git): the device image has Python 3.12,
# torch 2.11 + CUDA 13, triton 3.6.0 and numpy 2.5 but no OpenMM, no openmm-torch and no registry. The set:
#   openmm and OpenMM-CUDA-13 at requirements.txt's openmm pin (the OpenMM CUDA platform for CUDA 13),
#   acellera-openmmtorch-cu13 at requirements.txt's openmm-torch release (TorchForce with the Reference, CPU,
#   CUDA and OpenCL plugins, built for torch 2.10-2.12: the device's torch 2.11), and the pure-Python / small
#   packages flashschnet imports that the image lacks (see DEVICE_WHEELS).
# tools/device/device_rehearsal.sh installs exactly this set, with tools/device/device_install.sh, into a Python 3.12
# venv shaped like the device, here; both list the set and its size (the tree plus .whl/ must stay under 64 MiB).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
pin() { sed -n "s/^$1==\([^ #]*\).*/\1/p" requirements.txt; }
openmm="$(pin openmm)"; omt="$(pin acellera-openmmtorch-cpu)"
[ -n "$openmm" ] && [ -n "$omt" ] || { echo "no openmm / acellera-openmmtorch-cpu pin in requirements.txt" >&2; exit 1; }
DEVICE_WHEELS=("openmm==$openmm" "openmm-cuda-13==$openmm" "acellera-openmmtorch-cu13==$omt")
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "${DEVICE_WHEELS[@]}" 2> >(grep -v '^WARNING: Location' >&2)
ls -la .whl
echo "carried: $(du -cb .whl/*.whl | tail -1 | cut -f1) bytes in .whl/"
