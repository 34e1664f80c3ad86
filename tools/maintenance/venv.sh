#!/usr/bin/env bash
# Create (once) and reuse a virtual environment kept OUTSIDE the clone, keyed by a hash of the dependency
# pins and the Python version, then install this checkout into it (editable, no dependency resolution).
# Prints the venv's path on stdout; everything else goes to stderr.
#   FLASHSCHNET_VENV_ROOT  where venvs live (default: ~/.cache/flashschnet/venvs)
#   PYTHON                 interpreter to build the venv with (default: python3.11, else python3)
#   FLASHSCHNET_PINS       a file of pins that replace requirements.txt's lines of the same names (path relative to
#                          the checkout, or absolute), e.g. requirements-openmm86.txt (the OpenMM 8.6 set): a venv
#                          of its own, named after the file and keyed by it too; unset: requirements.txt as it is
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${PYTHON:-$(command -v python3.11 || command -v python3)}"
pyver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pins="${FLASHSCHNET_PINS:-}"
if [ -n "$pins" ]; then
  case "$pins" in /*) ;; *) pins="$here/$pins" ;; esac
  [ -f "$pins" ] || { echo "flashschnet: FLASHSCHNET_PINS: no such file: $pins" >&2; exit 1; }
  stem="$(basename "$pins" .txt)"; stem="${stem#requirements-}-"
  key="$(cat "$here/requirements.txt" "$here/requirements-test.txt" "$pins" | sha256sum | cut -c1-16)"
else
  stem=""
  key="$(cat "$here/requirements.txt" "$here/requirements-test.txt" | sha256sum | cut -c1-16)"
fi
root="${FLASHSCHNET_VENV_ROOT:-$HOME/.cache/flashschnet/venvs}"
venv="$root/py$pyver-$stem$key"
mkdir -p "$root"
exec 9>"$venv.lock"; flock 9          # one builder at a time per venv
if [ ! -f "$venv/.complete" ]; then
  echo "flashschnet: building the venv $venv (once per set of pins; a few minutes, ~5.3 GB)" >&2
  rm -rf "$venv"                      # a half-built venv from an interrupted run
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  reqs="$here/requirements.txt"
  if [ -n "$pins" ]; then             # requirements.txt, the lines of the packages FLASHSCHNET_PINS names replaced
    reqs="$venv/requirements.txt"
    "$py" "$here/tools/maintenance/merge_pins.py" "$here/requirements.txt" "$pins" >"$reqs"
  fi
  "$venv/bin/python" -m pip install -q -r "$reqs" -r "$here/requirements-test.txt" >&2
  touch "$venv/.complete"
fi
# install this checkout (fast; its build chatter is shown only when it fails)
if ! log="$("$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$here" 2>&1)"; then
  echo "$log" >&2; echo "flashschnet: installing $here into $venv failed" >&2; exit 1
fi
echo "$venv"
