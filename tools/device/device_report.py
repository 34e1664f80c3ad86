"""Render a ``device.json`` of ``tools/device/device_checks.py`` into docs/benchmarks.md's GPU section
(:mod:`flashschnet.openmm.benchmark.device_report`: the targets, the tables, the markers).

    python tools/device/device_report.py device.json            # rewrite the section of the run after the rewrite
    python tools/device/device_report.py device.json --stdout   # print the section, write nothing
    python tools/device/device_report.py device.json --doc other.md

Only the text between ``<!-- device-report-2:begin -->`` and ``<!-- device-report-2:end -->`` is written (a section
holding the markers is appended where the file has none); the first GPU run's section (2026-12-04, between
``<!-- device-report:begin -->`` and ``<!-- device-report:end -->``) stays as it was rendered then.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from flashschnet.openmm.benchmark.device_report import render, splice

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("device_json", help="device.json of tools/device/device_checks.py")
    p.add_argument("--stdout", action="store_true", help="print the section; write nothing")
    p.add_argument("--doc", default=str(DOC), help="the Markdown file to update (default docs/benchmarks.md)")
    args = p.parse_args(argv)
    body = render(json.loads(Path(args.device_json).read_text()))
    if args.stdout:
        print(body, end="")
        return 0
    doc = Path(args.doc)
    doc.write_text(splice(doc.read_text() if doc.exists() else "", body))
    print(f"wrote the GPU section of {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
