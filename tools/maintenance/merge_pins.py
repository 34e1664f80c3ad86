"""Some pins of a requirements file replaced: what ``FLASHSCHNET_PINS=FILE bash tools/maintenance/venv.sh`` installs.

    python tools/maintenance/merge_pins.py requirements.txt requirements-openmm86.txt > merged.txt

Prints BASE with every line that names a package PINS names left out, then PINS (comments kept). ``pip install -r``
cannot do it itself: two pins of one package conflict, and a constraints file cannot loosen a pin. Standard library
only (tools/maintenance/venv.sh runs it with the interpreter that builds the venv).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, Optional

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def package(line: str) -> Optional[str]:
    """The normalized package name a requirements line pins (None for a comment, a blank or an option line)."""
    m = _NAME.match(line.split("#", 1)[0])
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else None


def merge(base: str, pins: str) -> str:
    """``base`` without the lines of the packages ``pins`` names, then ``pins``."""
    names = {package(ln) for ln in pins.splitlines()} - {None}
    kept: List[str] = [ln for ln in base.splitlines() if package(ln) not in names]
    return "\n".join(kept + pins.splitlines()) + "\n"


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    sys.stdout.write(merge(Path(argv[0]).read_text(), Path(argv[1]).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
