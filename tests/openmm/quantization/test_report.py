"""flashschnet.openmm.quantization.report (the measurements behind tools/benchmarks/quantization_report.py, called as
the tool calls it): a tiny run (one variant, the fused CPU path) that writes the Markdown report, the JSON and valid
PNGs and re-renders from its JSON, and bad arguments refused."""
from __future__ import annotations

import functools
import json

from tests.conftest import ROOT, oracle_path
from flashschnet.openmm.quantization import report

main = functools.partial(report.main, root=ROOT)       # as the tool calls it: defaults found in the checkout


def test_quick_report(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["--quick", "--variants", "fp16", "--backends", "torch", "--out", str(out), "--threads", "1",
               "--quiet", "--oracle", str(oracle_path("mlcg_schnet_A.pt"))])
    assert rc == 0
    rep = json.loads((out / "quantization.json").read_text())
    assert rep["settings"]["command"].startswith("python tools/benchmarks/quantization_report.py --quick")
    datasets = {r["dataset"].split(" ")[0] for r in rep["frame_errors"]}
    assert datasets == {"mlcg", "Langevin"}
    fp16 = [r for r in rep["frame_errors"] if r["variant"] == "fp16"]
    assert len(fp16) == 2 and all(0 < r["force_rel_rmse_vs_fp32"] < 0.01 for r in fp16)
    none = [r for r in rep["frame_errors"] if r["variant"] == "none"]
    assert all(r["force_rel_rmse_vs_fp32"] == 0.0 and r["force_rel_rmse"] < 1e-4 for r in none)
    assert [r["variant"] for r in rep["langevin"]] == ["none", "fp16"]
    assert all(r["completed"] and r["steps"] == 200 for r in rep["langevin"])
    assert set(rep["nve"]) == {"none", "fp16"}
    for r in rep["nve"].values():
        assert r["completed"] and len(r["total_energy_kJ_mol"]) == 11
    assert set(rep["weight_errors"]) == {"trpcage_placeholder", "mlcg_schnet_A"}
    md = (out / "quantization.md").read_text()
    assert "## Verdict" in md and "**fp16**: worst force relative RMSE" in md and "within the 1 % target" in md
    for png in ["quantization_errors.png", "quantization_nve.png", "quantization_ranges_trpcage_placeholder.png"]:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"]({png})" in md
    assert "within the 1 % target" in capsys.readouterr().out
    # the placeholder example reuses fixture A's network: its weight rows and range plot are not repeated
    assert rep["same_weights"] == {"mlcg_schnet_A": "trpcage_placeholder"}
    assert "quantization_ranges_mlcg_schnet_A.png" not in md
    # re-rendering from the JSON gives the same report without measuring again
    again = tmp_path / "again"
    assert main(["--from-json", str(out / "quantization.json"), "--out", str(again)]) == 0
    assert (again / "quantization.md").read_text() == md
    assert (again / "quantization_nve.png").exists()


def test_bad_arguments(capsys, tmp_path):
    import pytest

    with pytest.raises(SystemExit):
        main(["--variants", "fp8"])
    assert "variants must be among" in capsys.readouterr().err
    assert main(["--model", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "no such file" in capsys.readouterr().err
