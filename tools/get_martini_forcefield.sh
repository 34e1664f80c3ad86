#!/usr/bin/env bash
# Fetch the MARTINI 3.0.0 parameter files flashschnet-martini needs (martini_v3.0.0.itp, ..._ions_v1.itp,
# ..._solvents_v1.itp; LGPL-2.1) into DIR, from the martini-shaker wheel on PyPI (which ships them), without
# installing it. The same files are on the MARTINI website (cgmartini.nl, Martini 3 force-field parameters).
#   bash tools/get_martini_forcefield.sh DIR
set -euo pipefail
dir="${1:?usage: bash tools/get_martini_forcefield.sh DIR}"
py="${PYTHON:-$(command -v python3)}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "martini-shaker==0.1.1" >&2
mkdir -p "$dir"
"$py" - "$tmp" "$dir" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
want = ("martini_v3.0.0.itp", "martini_v3.0.0_ions_v1.itp", "martini_v3.0.0_solvents_v1.itp")
with zipfile.ZipFile(wheel) as z:
    names = {os.path.basename(n): n for n in z.namelist() if n.startswith("shaker/data/itps/")}
    for w in want:
        if w not in names:
            sys.exit(f"{wheel}: has no {w}")
        with open(os.path.join(sys.argv[2], w), "wb") as f:
            f.write(z.read(names[w]))
print(f"MARTINI 3.0.0 parameter files in {sys.argv[2]}: {', '.join(want)}")
PY
