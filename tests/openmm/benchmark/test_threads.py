"""flashschnet.openmm.benchmark.threads (the threads benchmark; tools/benchmarks/threads_benchmark.py measures) on
made-up measurements (nothing is timed here): the medians, the best choice and the default's loss per row, the 20%
verdict, the not-idle flag, the section spliced between its markers, the clock's ns/day, the workers' environment."""
from __future__ import annotations

import pytest

from flashschnet.openmm.benchmark import threads as tb
from tests.helpers.benchmark_reports import SPEEDS, threads_report


def test_rows_hold_medians_the_best_and_the_defaults_loss():
    rows = tb.summarise(threads_report())
    assert [(r["load"], r["model"], r["replicas"]) for r in rows] == [
        ("idle", "exact", 1), ("idle", "exact", 8), ("loaded", "exact", 1), ("loaded", "exact", 8)]
    first = rows[0]
    assert first["ns_per_day"] == {"default": 30, "threads1": 21, "before": 33}     # medians: 90 is an outlier
    assert first["best"] == "before" and first["default_loss"] == pytest.approx(1 - 30 / 33)
    assert first["default_threads"] == [2] and rows[2]["default_threads"] == [1]
    assert rows[3]["best"] == "threads1" and rows[3]["default_loss"] == pytest.approx(1 / 3)
    # where the default ran another column's settings (its twin), both columns' rounds pooled, against the others
    assert [r["twin"] for r in rows] == ["before", "before", "threads1", "threads1"]
    assert first["pooled"] == 31.5 and first["pooled_best"] is None and first["pooled_loss"] == 0.0
    assert rows[3]["pooled"] == 12.5 and rows[3]["pooled_loss"] == 0.0      # --threads 2 (1 ns/day) is no rival
    v = tb.verdict(rows)
    assert v["ok"] is True and v["worst_loss"] == 0.0
    # no twin (a count that varied between rounds): the default's own column decides
    report = threads_report()
    for r in report["records"]:
        if r["load"] == "loaded" and r["replicas"] == 8 and r["config"] == "default" and r["round"] == 0:
            r["torch_threads"] = 2
    rows = tb.summarise(report)
    assert rows[3]["twin"] is None and rows[3]["pooled_loss"] is None
    v = tb.verdict(rows)
    assert v["ok"] is False and v["worst"] == "loaded exact R=8" and v["worst_loss"] == pytest.approx(1 / 3)


def test_a_twin_runs_the_defaults_settings_exactly():
    assert tb.twin_of([2, 2], ["default", "threads1", "passive", "active", "before"], 2) == "before"
    assert tb.twin_of([1], ["default", "passive", "threads1"], 2) == "threads1"
    assert tb.twin_of([1, 2], ["default", "threads1", "before"], 2) is None      # it chose differently
    assert tb.twin_of([2], ["default", "passive", "active", "omm1"], 2) is None  # OpenMP variables set: not twins
    assert tb.twin_of([4], ["default", "before"], 2) is None


def test_verdict_passes_within_20_percent():
    speeds = {k: dict(v, default=[max(x) * 0.85 for x in zip(*v.values())]) for k, v in SPEEDS.items()}
    v = tb.verdict(tb.summarise(threads_report(speeds)))
    assert v["ok"] is True and v["worst_loss"] <= tb.TOLERANCE
    # a rival 30% faster than the default's settings (both twins) fails it
    speeds = {k: dict(v, passive=[1.3 * max(a, b) for a, b in zip(v["default"], v["before"])])
              for k, v in SPEEDS.items() if k[0] == "idle"}
    report = threads_report(speeds)
    report["settings"]["configs"].append("passive")
    v = tb.verdict(tb.summarise(report))
    assert v["ok"] is False and v["worst_loss"] > tb.TOLERANCE


def test_rendered_table():
    text = tb.render(threads_report())
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("| load |"))
    assert header == ("| load | model | R | default | --threads 1 | --threads 2 (before) | best | default vs best "
                      "| default's settings, pooled | vs best other | default's threads |")
    assert ("| idle | exact | 1 | 30 | 21 | **33** | --threads 2 (before) | -9% | 31.5 (with --threads 2 (before)) "
            "| -0% | 2 |") in lines
    assert "| loaded | exact | 8 | 10 | **15** | 1 | --threads 1 | -33% | 12.5 (with --threads 1) | -0% | 1 |" in lines
    # where the default ran a twin's settings, the two columns show the noise: 9%, 5%, 10%, 33%
    assert "the two columns differ by 10% (median; at most 33%)" in text
    assert "keeps within 20%" in text and "2-core AMD EPYC" in text
    assert "python tools/benchmarks/threads_benchmark.py --rounds 3 --steps 300" in text
    assert "not measured on an idle machine" not in text
    noisy = tb.render(threads_report(background=0.9))
    assert "**The idle rows were not measured on an idle machine** (other processes kept 0.90 cores busy)" in noisy
    one = threads_report()
    for r in one["records"]:
        if r["load"] == "idle" and r["round"] == 0 and r["config"] == "before":
            r["background_cores"] = 0.95
    assert "round 1 --threads 2 (before) (0.95 cores)." in tb.render(one)


def test_failed_measurements_are_named_not_counted():
    report = threads_report(errors={("idle", "exact", 1, "default", r) for r in range(3)})
    rows = tb.summarise(report)
    assert rows[0]["ns_per_day"]["default"] is None and rows[0]["default_loss"] is None
    text = tb.render(report)
    assert "| idle | exact | 1 | – | 21 | **33** |" in text and "Errors: RuntimeError: boom" in text
    assert "| idle | exact | 1 | – | 21 | **33** | --threads 2 (before) | – | – |" in text


def test_splice_replaces_between_the_markers_or_appends():
    doc = f"# B\n\nbefore\n\n{tb.BEGIN}\nold\n{tb.END}\n\nafter\n"
    assert tb.splice(doc, "new\n") == f"# B\n\nbefore\n\n{tb.BEGIN}\nnew\n{tb.END}\n\nafter\n"
    assert tb.splice("# B\n", "new\n") == f"# B\n\n{tb.SECTION}\n\n{tb.BEGIN}\nnew\n{tb.END}\n"


def test_clock_and_steps():
    marks = [(1, 0.0), (5, 10.0), (6, 10.5), (15, 15.0)]
    # 10 steps x 2 replicas x 4 fs in 5 s
    assert tb.ns_per_day(marks, 5, 2) == pytest.approx(2 * 10 * 4e-6 * 86400 / 5)
    with pytest.raises(ValueError):
        tb.ns_per_day(marks[:2], 5, 1)
    assert [tb.timed_steps(300, r) for r in (1, 2, 4, 8, 64)] == [300, 150, 75, 38, 10]


def test_worker_environment_is_the_configurations_alone():
    base = {"PATH": "/bin", "OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "7", "GOMP_SPINCOUNT": "1"}
    assert tb.worker_env("default", base) == {"PATH": "/bin"}
    assert tb.worker_env("passive", base) == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}
    assert tb.worker_env("omm1", base) == {"PATH": "/bin", "OPENMM_CPU_THREADS": "1"}
    assert tb.resolve("before", 4) == {"label": "--threads 4 (before)", "env": {}, "threads": 4}
    assert tb.resolve("threads1", 4)["threads"] == 1 and tb.resolve("default", 4)["threads"] is None


def test_clock_ends_the_run_after_its_time_limit():
    class Sim:
        currentStep = 0

    sim, clock = Sim(), tb.Clock(warmup=2, limit_s=0.0)
    assert clock.describeNextReport(sim)["steps"] == 1
    for step in (1, 2):
        sim.currentStep = step
        clock.report(sim, None)                     # the warm-up: never cut short
    sim.currentStep = 3
    with pytest.raises(tb.TimeUp):
        clock.report(sim, None)
    assert [s for s, _ in clock.marks] == [1, 2, 3]
    patient = tb.Clock(warmup=2, limit_s=1e9)
    for step in (1, 2, 3, 4):
        sim.currentStep = step
        patient.report(sim, None)
    assert len(patient.marks) == 4
