"""tools/benchmarks/compression_report.py (a maintainer's report generator, not installed), run as a program: a quick
run writes the Markdown and the JSON with the expected sections and sane numbers; the Markdown re-renders from the
JSON; the dynamics fall back to the oracle model and the mlcg prior where the real mlcg file is absent."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, oracle_path

SCRIPT = ROOT / "tools" / "benchmarks" / "compression_report.py"


def run_tool(*argv, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python tools/benchmarks/compression_report.py ARGV`` (one PyTorch thread, its default)."""
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    oracle_path("mlcg_schnet_A.pt")                       # skips where the oracle is absent
    out = tmp_path_factory.mktemp("compression")
    md, js = out / "compression.md", out / "compression.json"
    proc = run_tool("--quick", "--out", md, "--json", js, "--real-model", out / "absent.pt")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return md, js, json.loads(js.read_text())


def _row(report, kind, knots, dtype, system="oracle"):
    return next(r for r in report["sweep"]["rows"]
                if (r["system"], r["kind"], r["knots"], r["dtype"]) == (system, kind, knots, dtype))


def test_quick_sweep_numbers_are_sane(quick_report):
    _, _, rep = quick_report
    assert rep["quick"] and rep["command"].startswith("python tools/benchmarks/compression_report.py --quick")
    assert [s["name"] for s in rep["sweep"]["systems"]] == ["oracle"]
    assert len(rep["sweep"]["rows"]) == 2 * 2 * 2 + 2                      # kinds x knots x dtypes + equal-bytes cubic
    assert _row(rep, "quintic", 128, "float32")["force_rms"] < 1e-4
    for kind in ("cubic", "quintic"):
        coarse, fine = _row(rep, kind, 64, "float32"), _row(rep, kind, 128, "float32")
        for key in ("force_rms", "force_max", "energy_rms"):
            assert 0 < fine[key] < coarse[key] < 0.1, (kind, key)
        assert fine["W"]["grid"]["W_rms"] < coarse["W"]["grid"]["W_rms"]
        assert fine["block_bytes"] == 2 * coarse["block_bytes"]
    q, c = _row(rep, "quintic", 64, "float32"), _row(rep, "cubic", 96, "float32")
    assert q["block_bytes"] == c["block_bytes"] == 64 * 3 * 128 * 4 and c["force_rms"] > q["force_rms"]
    assert 1e-5 < _row(rep, "quintic", 128, "float16")["force_rms"] < 1e-2
    assert rep["sweep"]["systems"][0]["backend_check"] < 1e-10


def test_quick_dynamics_and_markdown(quick_report, tmp_path):
    md_path, js_path, rep = quick_report
    dyn = rep["dynamics"]
    assert dyn["platform"] == "Reference" and dyn["network_dtype"] == "float64"
    assert list(dyn["nve"]) == ["exact", "quintic 256 float32"]
    for r in dyn["nve"].values():
        assert all(run["completed"] and len(run["total_minus_first_kJ_mol"]) == 11 for run in r["runs"])
    # same start and seeds: the default table changes the runs' drifts very little
    diff = dyn["nve"]["quintic 256 float32"]["diff_vs_reference"]
    assert abs(diff["mean"]) < 1.0 and diff["n"] == 2
    assert all(r["finished"] and r["steps_done"] == 60 for r in dyn["langevin"].values())
    md = md_path.read_text()
    for section in ("## What was measured", "## How it was run", "## Reading", "## Error sweep",
                    "## Cubic vs quintic at equal table bytes", "## NVE energy drift", "## Langevin stability",
                    "**Interpolant.**", "**Default knots.**", "**16-bit tables**", "**NVE drift**", "**Stability.**",
                    "> **Quick mode**", rep["command"]):
        assert section in md, section
    assert not re.search(r"\bnan\b", md)            # Python writes a NaN number as "nan"
    again = tmp_path / "again.md"
    proc = run_tool("--from-json", js_path, "--out", again)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert again.read_text() == md


def test_dynamics_fall_back_to_the_oracle_without_the_real_model(quick_report):
    """The quick run was given a --real-model that does not exist: its dynamics ran the oracle model (49 beads)
    with the mlcg prior, said so, and its Langevin runs moved (forces above zero)."""
    _, _, rep = quick_report
    dyn = rep["dynamics"]
    assert dyn["note"] and "oracle" in dyn["system"] and dyn["beads"] == 49
    assert dyn["note"] in rep["notes"]
    for res in dyn["langevin"].values():
        assert res["finished"] and res["samples"] >= 1 and res["force_max_kcal_mol_A"] > 0


def test_bad_arguments(tmp_path):
    (tmp_path / "other.json").write_text('{"rows": []}')
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT)
             for argv in (["--nve-runs", "1"],
                          ["--from-json", str(tmp_path / "missing.json"), "--out", str(tmp_path / "x.md")],
                          ["--from-json", str(tmp_path / "other.json"), "--out", str(tmp_path / "x.md")])]
    (_, bad_runs), (_, missing), (_, other) = (p.communicate(timeout=300) for p in procs)
    assert procs[0].returncode == 2 and "--nve-runs" in bad_runs and "Traceback" not in bad_runs      # argparse
    assert procs[1].returncode == 2 and "no such file" in missing and "Traceback" not in missing
    assert procs[2].returncode == 2 and "Traceback" not in other, other
    assert f"--from-json {tmp_path / 'other.json'}: not a compression report JSON of this tool (KeyError" in other
    assert not (tmp_path / "x.md").exists()
