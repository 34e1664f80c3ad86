"""flashschnet-compare end to end on a tiny budget: both runs, the Markdown/JSON/PNG report, --analyse-only and
the refusal to overwrite."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, SHARED
from flashschnet.scripts.compare import main

M3 = SHARED / "martini" / "m3"
PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
ENTRY = Path(sys.executable).parent / "flashschnet-compare"


def test_help_through_the_console_entry_point():
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for flag in ("--model", "--forcefield-dir", "--out", "--martini-ns", "--flashschnet-ns", "--replicas",
                 "--platform", "--analyse-only"):
        assert flag in res.stdout


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny comparison for this module's tests: ``(out, args, stderr)``; 5 frames a run after step 0 (3 analysed:
    too few for a statistical inefficiency, which :func:`test_summarise_samples_the_analysed_frames` covers)."""
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    out = tmp_path_factory.mktemp("compare") / "cmp"
    args = [PDB, "--model", MODEL, "--forcefield-dir", str(M3), "--out", str(out), "--martini-ns", "0.004",
            "--flashschnet-ns", "0.0002", "--replicas", "2", "--frames", "5", "--threads", "1", "--quiet"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args) == 0
    return out, args, err.getvalue()


def test_tiny_comparison(tiny, capsys):
    out, args, err = tiny
    assert "report in" in err and "sampling.png" in err
    res = json.loads((out / "comparison.json").read_text())
    m, f = res["martini"], res["flashschnet"]
    assert m["speed"]["steps"] == 200 and f["speed"]["steps"] == 50 and f["replicas"] == 2
    assert m["speed"]["ns_per_day"] > 0 and f["speed"]["ns_per_day"] > 0
    assert len(m["summary"]["rmsf_nm"]) == len(f["summary"]["rmsf_nm"]) == 20       # one bead per residue
    assert res["ss_native"] == "CHHHHHHHCCHHHHCCCCCC"                     # mdtraj DSSP of 1L2Y, model 1
    for run in (m, f):
        s = run["summary"]
        assert len(s["times_ns"]) == 6 and s["times_ns"][0] == 0.0          # step 0 and 5 frames
        assert 0.0 <= s["q"]["mean"] <= 1.0 and s["rmsd"]["mean"] >= 0.0
        assert 0.0 <= s["ss_retention"]["mean"] <= 1.0
    md = (out / "comparison.md").read_text()
    for row in ("ns/day per replica", "ns/day aggregate", "backbone RMSD", "radius of gyration", "RMSF",
                "native contacts Q", "secondary-structure retention", "| replicas | 1 | 2 in one Context |",
                "(OpenMM platform: CPU for MARTINI 3, Reference for FlashSchNet)"):     # each force field's default
        assert row in md, row
    assert (out / "comparison.png").stat().st_size > 10_000
    (out / "comparison.md").unlink()
    assert main(args + ["--analyse-only"]) == 0 and (out / "comparison.md").read_text() == md
    capsys.readouterr()
    assert main(args) == 2 and "--analyse-only" in capsys.readouterr().err


def test_sampling_efficiency_in_the_report(tiny):
    """comparison.json holds each force field's sampling block: the wall time of the analysed frames' report
    intervals (from its own log), and, as 3 frames are too few, no g but a warning; the Markdown its table and
    warnings; sampling.png exists."""
    from flashschnet.openmm.run_reader import interval_walls, read_log

    out, _, _ = tiny
    res = json.loads((out / "comparison.json").read_text())
    for name, interval, dt_fs in (("martini", 40, 20.0), ("flashschnet", 10, 4.0)):
        s = res[name]["sampling"]
        assert s["first_frame"] == 3 and s["frame_ps"] == pytest.approx(interval * dt_fs * 1e-3)
        walls = interval_walls(read_log(str(out / name / "log.csv"), lambda _: None, extra=("ns_per_day",)), dt_fs)
        assert sorted(walls) == [interval * k for k in range(1, 6)]            # every interval but step 0's
        assert s["wall_s"] == pytest.approx(sum(walls[interval * k] for k in (3, 4, 5)), rel=1e-12)
        for key in ("rg", "q"):
            e = s["observables"][key]
            assert e["frames"] == 3 and e["status"] == "not enough frames" and e["g"]["value"] is None
            assert e["ess_per_hour"]["value"] is None and s["acf"][key] is None
        assert len(s["warnings"]) == 2 and all("not enough frames" in w for w in s["warnings"])
    md = (out / "comparison.md").read_text()
    for row in ("statistical inefficiency g of Rg", "ESS/hour of Rg per replica", "ESS/hour of Q aggregate",
                "wall-clock time of those frames", "| error bars | none (no estimate)", "Warnings:",
                "* MARTINI 3: Rg: not enough frames", "* FlashSchNet: Q: not enough frames"):
        assert row in md, row
    assert (out / "sampling.png").stat().st_size > 10_000


def test_flashschnet_runs_one_process_per_core_by_default(monkeypatch):
    """--workers: given, it is used; else one per core (--threads, else the cores this process may use), at most
    one per replica, and 1 without dask's distributed."""
    import importlib.util

    from flashschnet.openmm import compare as cmp

    monkeypatch.setattr("flashschnet.threads.available_cpus", lambda: (0, 1, 2))
    s = lambda **kw: cmp.CompareSettings(pdb="a.pdb", model="m.pt", forcefield_dir="ff", out="o", **kw)
    assert cmp.flashschnet_workers(s()) == 3 and cmp.flashschnet_workers(s(replicas=2)) == 2
    assert cmp.flashschnet_workers(s(threads=1)) == 1 and cmp.flashschnet_workers(s(threads=2)) == 2
    assert cmp.flashschnet_workers(s(workers=1)) == 1 and cmp.flashschnet_workers(s(workers=5, threads=1)) == 5
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name, *a))
    assert cmp.flashschnet_workers(s()) == 1


def test_summarise_samples_the_analysed_frames():
    """compare's summary on frames made here (no simulation): the sampling block covers the second half of the
    frames, the wall time of their report intervals, and equals the sampling module's estimate of the same Rg
    and Q series; one analysed interval without a speed makes the wall time (and ESS/hour) unknown."""
    import numpy as np

    from flashschnet.openmm.compare import summarise
    from flashschnet.openmm.observables import structure_metrics
    from flashschnet.openmm.sampling import estimate

    rng = np.random.default_rng(0)
    native = np.cumsum(rng.normal(0.0, 0.22, (20, 3)), axis=0)               # a 20-bead chain, nm
    noise = np.zeros((2, 80, 20, 3))
    for t in range(1, 80):                                                  # correlated breathing
        noise[:, t] = 0.8 * noise[:, t - 1] + rng.normal(0.0, 0.05, (2, 20, 3))
    run = {"frames": native + noise, "native": native, "dt_fs": 4.0, "interval": 25, "first_step": 0,
           "walls": {25 * k: 2.0 for k in range(1, 80)}}
    s = summarise(run)["sampling"]
    assert s["first_frame"] == 40 and s["frame_ps"] == pytest.approx(0.1) and s["wall_s"] == pytest.approx(80.0)
    m = structure_metrics(run["frames"].reshape(160, 20, 3), native)
    for key in ("rg", "q"):
        expect = estimate(m[key].reshape(2, 80)[:, 40:], 0.1, 80.0)
        assert expect["g"]["value"] > 1.0 and expect["error_method"] == "replicas"
        assert s["observables"][key]["g"] == expect["g"] and s["observables"][key]["frames"] == 40
        assert s["observables"][key]["ess_per_hour_aggregate"] == expect["ess_per_hour_aggregate"]
    del run["walls"][25 * 60]
    s = summarise(run)["sampling"]
    assert s["wall_s"] is None and s["observables"]["rg"]["ess_per_hour"]["value"] is None


def test_analyse_only_on_an_older_output(tiny, tmp_path, capsys):
    """--analyse-only on a previous version's output (no sampling.png, no sampling in comparison.json): the runs'
    logs already carry each interval's speed, so ESS/hour is reported; a log without ns_per_day gives ESS/hour
    "not recorded" with one note, exit 0, no traceback."""
    out, args, _ = tiny
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / "sampling.png").unlink()
    res = json.loads((old / "comparison.json").read_text())
    for name in ("martini", "flashschnet"):
        res[name].pop("sampling")
    (old / "comparison.json").write_text(json.dumps(res))
    again = [str(old) if a == str(out) else a for a in args] + ["--analyse-only"]
    assert main(again) == 0 and "ESS/hour is not reported" not in capsys.readouterr().err
    assert json.loads((old / "comparison.json").read_text())["martini"]["sampling"]["wall_s"] > 0
    assert (old / "sampling.png").exists()
    for name in ("martini", "flashschnet"):                # a log without the speed column
        log = old / name / "log.csv"
        rows = [r.split(",") for r in log.read_text().splitlines()]
        keep = [i for i, c in enumerate(rows[0]) if c != "ns_per_day"]
        log.write_text("\n".join(",".join(r[i] for i in keep) for r in rows) + "\n")
    assert main(again) == 0
    err = capsys.readouterr().err
    assert err.count("ESS/hour is not reported") == 1 and "Traceback" not in err
    res = json.loads((old / "comparison.json").read_text())
    for name in ("martini", "flashschnet"):
        s = res[name]["sampling"]
        assert s["wall_s"] is None
        assert all(e["ess_per_hour"]["value"] is None for e in s["observables"].values())
    assert "not recorded" in (old / "comparison.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--mts", "INNER", "--dt", "2.5", "--outer-dt", "6"], "whole multiple of --dt 2.5"),
    (["--mts", "INNER"], "needs --outer-dt"),
])
def test_the_flashschnet_step_options_are_checked_before_any_run(tmp_path, capsys, extra, message):
    """--dt (the inner step with --mts) and --outer-dt reach the FlashSchNet run's settings, which are checked before
    the MARTINI run starts: one line, exit 2, nothing run."""
    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    extra = [str(EXAMPLES / "trpcage_inner.pt") if x == "INNER" else x for x in extra]
    out = tmp_path / "cmp"
    args = [PDB, "--model", str(EXAMPLES / "trpcage_trained.pt"), "--forcefield-dir", str(M3), "--out", str(out),
            "--quiet", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (out / "martini" / "run.json").exists()


def test_an_inner_model_of_another_teacher_is_refused_before_martini_in_seconds(tmp_path, capsys):
    """The FlashSchNet run's inputs are loaded as the run will load them before MARTINI starts: an --mts inner
    model distilled from another model file than --model is one line within seconds, exit 2, nothing written."""
    import time

    if not (M3 / "martini_v3.0.0.itp").exists():
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    out = tmp_path / "cmp"
    args = [PDB, "--model", str(EXAMPLES / "trpcage_placeholder.pt"), "--forcefield-dir", str(M3), "--out", str(out),
            "--quiet", "--mts", str(EXAMPLES / "trpcage_inner.pt"), "--outer-dt", "8"]
    t0 = time.perf_counter()
    assert main(args) == 2
    took = time.perf_counter() - t0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was distilled from" in err[0] and "--mts-any-teacher" in err[0], err
    assert took < 20 and not out.exists(), took


def test_analyse_only_checks_the_options_against_the_runs(tiny, capsys):
    """--analyse-only re-analyses the runs as they ran: options that set them up and differ from their run.json are
    one line listing every one (they were ignored silently); one that agrees passes; --threads is noted as unused."""
    out, args, _ = tiny
    base = [a for a in args if a not in ("--threads", "1")]
    assert main(base + ["--analyse-only", "--replicas", "3", "--seed", "9", "--go"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--analyse-only re-analyses the runs as they ran" in err[0], err
    for part in ("--replicas 3 (the flashschnet run's: 2)", "--seed 9 (the martini run's: 1)",
                 "--seed 9 (the flashschnet run's: 1)", "--go True (the martini run's: False)"):
        assert part in err[0], (part, err[0])
    assert main(base + ["--analyse-only", "--seed", "1", "--threads", "2"]) == 0
    assert "note: --threads: not used by --analyse-only" in capsys.readouterr().err



def test_a_rerun_picks_up_what_a_failed_compare_left(tiny, tmp_path, capsys):
    """Into the same --out, a rerun continues a run that stopped (its settings checked against its run.json), reuses
    one that is done, and moves a run that stopped before its first checkpoint aside (nothing deleted), each with a
    note; then writes the report. Both runs done is one line pointing at --analyse-only."""
    out, args, _ = tiny
    cmp = shutil.copytree(out, tmp_path / "cmp")
    rerun = [str(cmp) if a == str(out) else a for a in args]
    (cmp / "comparison.json").unlink()
    (cmp / "flashschnet" / "checkpoint.chk").unlink()           # FlashSchNet died before its first checkpoint
    capsys.readouterr()
    assert main(rerun) == 0
    err = capsys.readouterr().err
    assert f"{cmp / 'martini'}: the MARTINI 3 run of an earlier compare is done; reused" in err, err
    assert (f"{cmp / 'flashschnet'}: an earlier FlashSchNet run stopped before its first checkpoint; moved to "
            f"{cmp / 'flashschnet'}.incomplete, run again") in err, err
    assert (cmp / "flashschnet.incomplete" / "run.json").exists() and (cmp / "comparison.json").exists()
    assert json.loads((cmp / "comparison.json").read_text())["flashschnet"]["speed"]["steps"] == 50
    # twice the time at the same frame interval: both runs are continued from where they stopped
    longer = [{"0.004": "0.008", "0.0002": "0.0004", "5": "10"}.get(a, a) for a in rerun]
    assert main(longer) == 0
    err = capsys.readouterr().err
    assert "the MARTINI 3 run of an earlier compare is at step 200 of 400; continued" in err, err
    assert "the FlashSchNet run of an earlier compare is at step 50 of 100; continued" in err, err
    res = json.loads((cmp / "comparison.json").read_text())
    assert res["martini"]["speed"]["steps"] == 400 and res["flashschnet"]["speed"]["steps"] == 100
    assert main(longer) == 2
    assert "both runs are done; re-analyse them with --analyse-only" in capsys.readouterr().err
    # a setting that differs from a run to continue: one line before either run takes a step
    (cmp / "comparison.json").unlink()
    martini_log = (cmp / "martini" / "log.csv").read_bytes()
    again = [{"0.008": "0.012", "0.0004": "0.0006", "10": "15"}.get(a, a) for a in longer]
    assert main(again + ["--seed", "7"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "--seed 7 (the run's: " in err and "MARTINI 3:" not in err, err
    assert (cmp / "martini" / "log.csv").read_bytes() == martini_log and not (cmp / "comparison.json").exists()

# -- run directories under damage (tests/fuzz/test_fuzz_run_dirs.py fuzzes the CG runs) -----------------------------

#: the files of the comparison's runs fuzzed here (a seeded draw of damages each: tests/helpers/run_damage.py)
DAMAGED_FILES = ["martini/run.json", "martini/topology.pdb", "martini/log.csv", "martini/trajectory.dcd",
                 "martini/checkpoint.chk", "martini/system/cg.pdb", "martini/system/cleaned.pdb",
                 "flashschnet/run.json", "flashschnet/log.csv", "flashschnet/replica_001.dcd",
                 "flashschnet/cleaned.pdb"]


def test_damaged_run_directories_are_refused_or_noted(tiny, tmp_path, monkeypatch):
    """The MARTINI run and flashschnet-compare --analyse-only under damage, as tests/fuzz/test_fuzz_run_dirs.py does
    for the CG runs: each drawn file deleted, emptied, truncated, overwritten with 0xFF or replaced by the other
    run's file of its kind; flashschnet-analyze of the MARTINI run, flashschnet-martini --resume and
    flashschnet-compare --analyse-only each refuse it in one line naming the file, or note it (and in their JSON
    report's input_warnings), or give exactly the undamaged outcome; no traceback, the input files unchanged."""
    from tests.helpers.run_damage import Damage, Reader, pick_cases, quiet_readers

    out, args, _ = tiny
    captured = {}
    quiet_readers(monkeypatch, captured)
    analyse = [a for a in args if a not in ("--threads", "1")]
    readers = [
        Reader("analyze", "analyze", lambda run, o: [run / "martini", "--out", o, "--quiet"],
               report=lambda run, o: o / "report.json"),
        Reader("resume", "martini", lambda run, o: ["--resume", "--out", run / "martini", "--quiet", "--threads", "1"],
               rewrites=True),
        Reader("compare", "compare", lambda run, o: [str(run) if a == str(out) else a for a in analyse]
               + ["--analyse-only"], report=lambda run, o: run / "comparison.json",
               own=("comparison.json", "comparison.md", "comparison.png", "sampling.png")),
    ]
    other = {"martini": "flashschnet", "flashschnet": "martini"}
    like = {"trajectory.dcd": "replica_000.dcd", "replica_001.dcd": "trajectory.dcd", "system/cg.pdb": "cleaned.pdb",
            "system/cleaned.pdb": "cleaned.pdb", "cleaned.pdb": "system/cleaned.pdb"}
    donors = {f: out / other[f.split("/")[0]] / like.get(f.split("/", 1)[1], f.split("/", 1)[1]) for f in DAMAGED_FILES}
    fuzz = Damage("cmp", out, tmp_path, readers, donors, captured)
    fuzz.baseline()
    cases = pick_cases(DAMAGED_FILES, 14, 40)
    assert sum(fuzz.check(f, d, seed) for f, d, seed in cases) >= 3 * (len(cases) - 2), fuzz.log
