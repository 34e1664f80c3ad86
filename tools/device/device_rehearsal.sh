#!/usr/bin/env bash
# Rehearse the device run on this CPU machine: a Python 3.12 venv shaped like the device image (torch 2.11,
# triton 3.6.0, numpy 2.5.2, nothing of ours), the carried wheels installed by the same commands the device runs
# (tools/device/device_install.sh, sourced by tools/device/device_benchmark.sh too), then every stage of
# `tools/device/device_checks.py --device cpu --smoke`, the TorchForce rows included (OpenMM's CPU platform, the same
# openmm-torch build the device gets), the baseline tree's rows too (.baseline/, built by
# tools/device/fetch_device_baseline.sh if missing). Exit status 0 only when every stage passed. Also lists what the
# device call carries (the tree, .whl/, .martini_ff/, .baseline/) and its size against the device tool's 64 MiB limit.
#   bash tools/device/device_rehearsal.sh            # log: $OUT/rehearsal.log, results: $OUT/device.json
#   OUT (/tmp/device-rehearsal)   FLASHSCHNET_VENV_ROOT (~/.cache/flashschnet/venvs)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${OUT:-/tmp/device-rehearsal}"; mkdir -p "$OUT"
# the device image's versions (the device tool's KINDS.md); the venv is built once and reused
IMAGE=(torch==2.11.0 triton==3.6.0 numpy==2.5.2)
py312="$(PYENV_VERSION=3.12.1 command -v python3.12 || true)"
[ -n "$py312" ] || { echo "device rehearsal: no python3.12 here (the device has Python 3.12)" >&2; exit 1; }
root="${FLASHSCHNET_VENV_ROOT:-$HOME/.cache/flashschnet/venvs}"
venv="$root/device-rehearsal-py3.12-$(echo "${IMAGE[*]}" | sha256sum | cut -c1-12)"
{
  echo "== device rehearsal $(date -u +%FT%TZ) on $(uname -m), $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null)"
  mkdir -p "$root"
  if [ ! -f "$venv/.complete" ]; then
    echo "== building the device-shaped venv $venv (${IMAGE[*]}; once)"
    rm -rf "$venv"
    PYENV_VERSION=3.12.1 "$py312" -m venv "$venv" && "$venv/bin/python" -m pip install -q --upgrade pip \
      && "$venv/bin/python" -m pip install -q "${IMAGE[@]}" 2> >(grep -v '^WARNING: Location' >&2) \
      && touch "$venv/.complete" || { echo "REHEARSAL FAILED: could not build the venv"; exit 1; }
  fi
  if [ ! -d .whl ]; then
    bash tools/device/fetch_device_wheels.sh || { echo "REHEARSAL FAILED: fetching the wheels"; exit 1; }
  fi
  if [ ! -d .martini_ff ] && [ -d ../shared/martini/m3 ]; then    # as tools/device/device_benchmark.sh says: gzipped
    mkdir -p .martini_ff && cp ../shared/martini/m3/*.itp .martini_ff/ && gzip -f .martini_ff/martini_v3.0.0.itp
  fi
  exclude="$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)"
  grep -qx '/.martini_ff/' "$exclude" 2>/dev/null || echo '/.martini_ff/' >> "$exclude"
  if [ ! -f .baseline/flashschnet/__init__.py ]; then
    bash tools/device/fetch_device_baseline.sh || echo "no baseline tree: its rows will be skips (see above)"
  fi
  echo "== what the device call carries (limit 64 MiB = 67108864 bytes)"
  tree_bytes="$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)"
  whl_bytes="$(du -cb .whl/*.whl | tail -1 | cut -f1)"; ff_bytes="$(du -cb .martini_ff 2>/dev/null | tail -1 | cut -f1)"
  base_bytes="$(du -sb .baseline 2>/dev/null | cut -f1)"
  for f in .whl/*.whl; do printf '  %10d  %s\n' "$(stat -c %s "$f")" "$f"; done
  printf '  %10d  .martini_ff/ (MARTINI 3 .itp files)\n  %10d  .baseline/ (the tree of %s)\n' \
    "${ff_bytes:-0}" "${base_bytes:-0}" "$(cat .baseline/COMMIT 2>/dev/null || echo 'no baseline')"
  printf '  %10d  the working tree (tracked and untracked, not ignored)\n' "$tree_bytes"
  total=$((tree_bytes + whl_bytes + ${ff_bytes:-0} + ${base_bytes:-0}))
  echo "  total $total bytes ($((total * 100 / 67108864))% of 64 MiB): carry=[\".whl\", \".martini_ff\", \".baseline\"]"
  [ "$total" -lt 67108864 ] || { echo "REHEARSAL FAILED: the carried set is over 64 MiB"; exit 1; }
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  PY="$venv/bin/python"; SITE="$tmp/site"; FS="$tmp/fs"
  source tools/device/device_install.sh
  ff=()                                 # the gzipped .itp files unpacked outside the tree, as on the device
  if ls .martini_ff/*.itp.gz >/dev/null 2>&1; then
    mkdir -p "$tmp/martini_ff" && cp .martini_ff/*.itp "$tmp/martini_ff/" 2>/dev/null
    for f in .martini_ff/*.itp.gz; do gunzip -c "$f" > "$tmp/martini_ff/$(basename "${f%.gz}")"; done
    ff=(--martini-ff "$tmp/martini_ff")
  fi
  "$PY" tools/device/device_checks.py --device cpu --smoke --out "$OUT" ${ff[@]+"${ff[@]}"}
  rc=$?
  echo "device_checks.py exit status $rc"
  if [ "$rc" -eq 0 ]; then echo "REHEARSAL PASSED: every stage"; else echo "REHEARSAL FAILED: see the stages above"; fi
  exit "$rc"
} 2>&1 | tee "$OUT/rehearsal.log"
exit "${PIPESTATUS[0]}"
