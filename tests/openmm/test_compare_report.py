"""flashschnet.openmm.compare_report: the comparison's Markdown and figure from its result dict. The committed
CPU comparisons (docs/martini-*-cpu.md) are the rendering of their JSON, so the docs show what the code writes."""
from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from flashschnet.openmm.compare_report import _replicas, markdown, plot

DOCS = ROOT / "docs"
COMPARISONS = sorted(DOCS.glob("martini-*-cpu.json"))


@pytest.mark.parametrize("path", COMPARISONS, ids=[p.stem for p in COMPARISONS])
def test_the_docs_comparisons_are_the_rendering_of_their_json(path):
    result = json.loads(path.read_text())
    assert markdown(result) == path.with_suffix(".md").read_text()


def test_the_report_says_how_the_replicas_ran(tmp_path):
    assert _replicas({"replicas": 8, "contexts": 2}) == "8 in 2 Contexts (one process each)"
    assert _replicas({"replicas": 8}) == "8 in one Context"          # a result written before "contexts"
    result = json.loads(COMPARISONS[0].read_text())
    result["flashschnet"]["contexts"] = 2
    result["platform"] = "CPU for MARTINI 3, Reference for FlashSchNet"
    md = markdown(result)
    assert f"| replicas | 1 | {result['flashschnet']['replicas']} in 2 Contexts (one process each) |" in md
    assert "(OpenMM platform: CPU for MARTINI 3, Reference for FlashSchNet)" in md
    plot(result, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 10_000
