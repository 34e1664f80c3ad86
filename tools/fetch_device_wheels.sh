#!/usr/bin/env bash
# Download the OpenMM wheels the device benchmark carries (the device image has Python 3.12 and no OpenMM).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl openmm==8.5.2 openmm-cuda-13==8.5.2
ls -la .whl
