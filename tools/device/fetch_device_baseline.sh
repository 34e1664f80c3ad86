#!/usr/bin/env bash
# Build the baseline tree of the device benchmark's side-by-side rows: .baseline/flashschnet/ (ignored by git) from
# `git archive` of the last commit before the kernel rewrite (f4fff81; BASELINE_COMMIT overrides), in the package
# layout setup.py makes -- model/ -> flashschnet, plugin/ -> flashschnet/openmm, scripts/ -> flashschnet/scripts,
# examples/ -> flashschnet/examples (its __init__.py and structures: flashschnet.examples.example_path finds the
# benchmark's default BPTI there; the .pt example models are left out) -- copied, not pip-installed. The device
# runs the baseline's rows with PYTHONPATH=.baseline:$SITE in place of the installed checkout
# (flashschnet.openmm.benchmark.device_rows); .baseline/COMMIT names the commit.
#   bash tools/device/fetch_device_baseline.sh             # -> .baseline/ (and /.baseline/ in .git/info/exclude)
#   bash tools/device/fetch_device_baseline.sh DIR         # -> DIR (a test's temporary folder)
# Then, with the device tool: carry=[".whl", ".martini_ff", ".baseline"] (see tools/device/device_benchmark.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
COMMIT="${BASELINE_COMMIT:-f4fff81}"
DEST="${1:-.baseline}"
git cat-file -e "$COMMIT^{commit}" 2>/dev/null \
  || { echo "fetch_device_baseline: no commit $COMMIT in this clone (a shallow clone? git fetch --unshallow)" >&2; exit 1; }
if [ "$DEST" = ".baseline" ]; then
  exclude="$(git rev-parse --git-path info/exclude)"
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.baseline/' "$exclude" 2>/dev/null || echo '/.baseline/' >> "$exclude"
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
git archive --format=tar "$COMMIT" model plugin scripts examples | tar -x -C "$tmp"
rm -rf "$DEST" && mkdir -p "$DEST"
cp -r "$tmp/model" "$DEST/flashschnet"
cp -r "$tmp/plugin" "$DEST/flashschnet/openmm"
cp -r "$tmp/scripts" "$DEST/flashschnet/scripts"
mkdir -p "$DEST/flashschnet/examples"
cp "$tmp/examples/__init__.py" "$tmp"/examples/*.pdb "$DEST/flashschnet/examples/"
git rev-parse "$COMMIT^{commit}" > "$DEST/COMMIT"
echo "baseline tree: $DEST/flashschnet from $(cat "$DEST/COMMIT")"
echo "carried: $(du -sb "$DEST" | cut -f1) bytes in $DEST/ ($(find "$DEST" -type f | wc -l) files)"
