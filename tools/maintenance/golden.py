#!/usr/bin/env python
"""Capture the golden outputs (tests/helpers/golden.py) of the current checkout: energies and forces of every
backend, precision, weight variant and compression, through the model and through OpenMM, and the DCD coordinates
of short CG, tempering and MARTINI runs. Run on main before a refactor; ``tests/integration/test_golden.py``
then shows the refactor changed none of them (bitwise on this machine and these library versions).

    python tools/maintenance/golden.py                     # writes tests/data/golden/golden.npz and fingerprint.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch  # noqa: F401  (before openmmtorch)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))                  # the computation is the test's own (tests/helpers/golden.py)

from tests.helpers import golden  # noqa: E402

import numpy as np  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(golden.GOLDEN.parent), help="folder (default: tests/data/golden)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        values, skipped = golden.compute(Path(work))
    np.savez_compressed(out / "golden.npz", **values)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    meta = {"fingerprint": golden.fingerprint(), "commit": commit, "skipped": skipped, "keys": len(values)}
    (out / "fingerprint.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{len(values)} golden arrays -> {out}/golden.npz ({(out / 'golden.npz').stat().st_size} bytes); "
          f"skipped: {skipped or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
