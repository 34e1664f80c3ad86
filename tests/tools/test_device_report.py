"""tools/device_report.py run as a program: it rewrites only docs/benchmarks.md's GPU section (between the markers
of flashschnet.openmm.benchmark.device_report, whose own tests are tests/openmm/benchmark/test_device_report.py;
the synthetic device.json: tests/helpers/benchmark_reports.py); with --stdout it prints the section and writes
nothing."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.helpers.benchmark_reports import synthetic
from flashschnet.openmm.benchmark import device_report as dr

SCRIPT = ROOT / "tools" / "device_report.py"


def test_splice_replaces_only_between_the_markers(tmp_path):
    """The tool run as a program (both runs at once: each is mostly its imports): it rewrites only the section
    between the markers; with --stdout it prints the section and writes nothing."""
    original = f"# Benchmarks\n\nkeep\n\n## GPU (H200)\n\nintro\n\n{dr.BEGIN}\nold\n{dr.END}\n\ntail\n"
    doc, untouched = tmp_path / "benchmarks.md", tmp_path / "untouched.md"
    doc.write_text(original)
    untouched.write_text(original)
    dj = tmp_path / "device.json"
    dj.write_text(json.dumps(synthetic()))
    write, show = (subprocess.Popen([sys.executable, str(SCRIPT), str(dj), *extra], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                   for extra in (["--doc", str(doc)], ["--doc", str(untouched), "--stdout"]))
    (_, err), (shown, _) = write.communicate(timeout=300), show.communicate(timeout=300)
    assert write.returncode == 0, err
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nkeep\n\n## GPU (H200)\n\nintro\n\n" + dr.BEGIN + "\n")
    assert text.endswith(dr.END + "\n\ntail\n") and "\nold\n" not in text and "**PASS**" in text
    again = dr.splice(text, dr.render(synthetic()))
    assert again == text                                                       # idempotent
    # --stdout writes nothing
    assert show.returncode == 0 and "**PASS**" in shown and untouched.read_text() == original
    # no markers: a GPU section with them is appended
    appended = dr.splice("# B\n\ntext\n", "body\n")
    assert appended == f"# B\n\ntext\n\n## GPU (H200)\n\n{dr.BEGIN}\nbody\n{dr.END}\n"
