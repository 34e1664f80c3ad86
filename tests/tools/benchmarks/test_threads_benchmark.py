"""tools/benchmarks/threads_benchmark.py run as a program: its --render option rewrites a doc's threads section (between
its markers) from a saved report without measuring (made-up measurements: tests/helpers/benchmark_reports.py's
threads report, which tests/openmm/benchmark/test_threads.py, where flashschnet.openmm.benchmark.threads itself is
tested, reads too)."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.helpers.benchmark_reports import threads_report
from flashschnet.openmm.benchmark import threads as tb

SCRIPT = ROOT / "tools" / "benchmarks" / "threads_benchmark.py"


def test_render_option_updates_the_doc_without_measuring(tmp_path):
    report = tmp_path / "threads.json"
    report.write_text(json.dumps(threads_report()))
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\n{tb.SECTION}\n\n{tb.BEGIN}\nstale\n{tb.END}\n\n## Next\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--render", str(report), "--update-doc", str(doc)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = doc.read_text()
    assert "stale" not in text and text.endswith(f"{tb.END}\n\n## Next\n") and text.count(tb.SECTION) == 1
    assert "| loaded | exact | 1 | 18 | **20** | 3 | --threads 1 | -10% | 19 (with --threads 1) | -0% | 1 |" in text
    assert "wrote the threads section" in proc.stdout
