"""tools/device/device_report.py run as a program: it rewrites only the section of the run after the kernel rewrite
(between flashschnet.openmm.benchmark.device_report's markers ``device-report-2``; the first GPU run's section,
between ``device-report``, stays as it was), or appends that section where the file has no such markers; with
--stdout it prints the section and writes nothing. The renderer's own tests are
tests/openmm/benchmark/test_device_report.py."""
from __future__ import annotations

import json
import subprocess
import sys

from flashschnet.openmm.benchmark import device_report as dr
from tests.conftest import ROOT
from tests.helpers.benchmark_reports import synthetic

SCRIPT = ROOT / "tools" / "device" / "device_report.py"


def test_the_tool_writes_only_its_section(tmp_path):
    """Both runs at once (each is mostly its imports): the first writes the new section below the first run's,
    which it leaves alone; --stdout prints the section and writes nothing."""
    first = f"{dr.FIRST_BEGIN}\nthe first GPU run\n{dr.FIRST_END}\n"
    original = f"# Benchmarks\n\nkeep\n\n## GPU (H200)\n\n{first}"
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
    assert text.startswith(original.rstrip("\n") + f"\n\n{dr.SECTION}\n\n{dr.BEGIN}\n")
    assert text.endswith(dr.END + "\n") and "GPU run of" in text and "Targets (the kernel rewrite's goals" in text
    assert dr.splice(text, dr.render(synthetic())) == text                     # idempotent: the same section
    rewritten = dr.splice(text, "body\n")
    assert rewritten.startswith(original.rstrip("\n")) and f"{dr.BEGIN}\nbody\n{dr.END}" in rewritten
    assert show.returncode == 0 and "GPU run of" in shown and untouched.read_text() == original
