"""flashschnet-benchmark: --help through the console entry point, and a tiny end-to-end run (trp-cage,
R = 1, 2, both CPU backends, a 2-step OpenMM run, the built-in default model) checking the JSON and the
printed table; a --out that cannot be written is one line (exit 5) and leaves no file. The run from an installed
package outside the checkout: tests/integration/test_packaging.py."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashschnet.atomic as atomic
from tests.conftest import EXAMPLES
from tests.helpers.cli_errors import error_line
from flashschnet.scripts.benchmark import main

ENTRY = Path(sys.executable).parent / "flashschnet-benchmark"


def test_help_through_the_console_entry_point():
    assert ENTRY.exists(), f"console entry point not installed at {ENTRY}"
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for flag in ("--pdb", "--model", "--replicas", "--backends", "--device", "--dtype", "--repeats", "--warmup",
                 "--openmm-steps", "--openmm-replicas", "--threads", "--out", "--max-memory-gb"):
        assert flag in res.stdout
    assert "_worker" not in res.stdout


def test_tiny_run_writes_json_and_table(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1,2", "--repeats", "1", "--warmup", "1",
               "--openmm-steps", "2", "--openmm-replicas", "1", "--threads", "1", "--device", "cpu",
               "--compress", "none", "--out", str(out)])      # (the default rows: test_default_rows_are_...)
    assert rc == 0
    captured = capsys.readouterr()
    report = json.loads(out.read_text())

    assert set(report) >= {"machine", "settings", "results", "ratios", "openmm"}
    m = report["machine"]
    for key in ("cpu_model", "cores", "torch_version", "threads", "device_name"):
        assert key in m
    assert m["threads"] == 1 and m["device"] == "cpu"
    s = report["settings"]
    assert s["replicas"] == [1, 2] and s["backends"] == ["reference", "torch"] and s["repeats"] == 1
    assert s["matmul"] == "auto" and s["cuda_graph"] is False
    assert s["n_beads"] > 0

    results = {(r["backend"], r["replicas"]): r for r in report["results"]}
    assert set(results) == {("reference", 1), ("torch", 1), ("reference", 2), ("torch", 2)}
    for (backend, R), r in results.items():
        assert r["status"] == "ok", r
        assert r["median_ms"] > 0 and r["min_ms"] > 0 and len(r["times_ms"]) == 1
        assert r["ns_per_day_per_replica"] > 0
        assert abs(r["ns_per_day_aggregate"] - R * r["ns_per_day_per_replica"]) < 1e-9 * r["ns_per_day_aggregate"]
        assert abs(r["ns_per_day_per_replica"] - 4e-6 * 86400 / (r["median_ms"] / 1e3)) < 1e-6 * r["ns_per_day_per_replica"]
        assert r["peak_extra_mb"] >= 0 and r["outputs_finite"]

    ratios = {(q["backend"], q["replicas"]): q for q in report["ratios"]}
    assert set(ratios) == {("torch", 1), ("torch", 2)}
    for (backend, R), q in ratios.items():
        ref, r = results[("reference", R)], results[(backend, R)]
        assert abs(q["speedup_vs_reference"] - ref["median_ms"] / r["median_ms"]) < 1e-9 * q["speedup_vs_reference"]
        assert q["memory_pct_of_reference"] is None or q["memory_pct_of_reference"] > 0

    assert [o["backend"] for o in report["openmm"]] == ["reference", "torch"]
    for o in report["openmm"]:
        assert o["status"] == "ok", o
        assert o["replicas"] == 1 and o["steps"] == 2
        assert o["ms_per_step"] > 0 and o["ns_per_day_aggregate"] > 0

    table = captured.out
    for text in ("median ms", "ns/day", "peak extra MB", "speed-up vs ref", "reference", "torch", "OpenMM"):
        assert text in table
    assert "R=1" in captured.err and "R=2" in captured.err  # a progress line per configuration


def test_memory_limit_skips_with_a_prediction(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1,4", "--backends", "reference",
               "--repeats", "1", "--warmup", "0", "--openmm-steps", "0", "--threads", "1", "--device", "cpu",
               "--max-memory-gb", "0.000001", "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    r1, r4 = report["results"]
    assert r1["status"] == "ok"
    assert r4["status"] == "skipped" and "predicted" in r4["reason"] and "limit" in r4["reason"]
    assert "median_ms" not in r4  # a prediction is never shown as a measurement
    assert report["openmm"] == [] and report["ratios"] == []
    assert "skipped: predicted" in capsys.readouterr().out


def test_openmm_run_through_python_force(tmp_path):
    out = tmp_path / "py.json"
    rc = main(["--pdb", "examples/1L2Y_trpcage.pdb", "--replicas", "1", "--backends", "torch", "--repeats", "1",
               "--warmup", "1", "--openmm-steps", "2", "--openmm-replicas", "1", "--openmm-force", "python",
               "--compress", "auto", "--out", str(out)])          # the default network only: torch's float32 tables
    assert rc == 0
    report = json.loads(out.read_text())
    assert [(r["backend"], r["compress"]) for r in report["results"]] == [("torch", "float32")]
    assert report["openmm"][0]["status"] == "ok" and report["openmm"][0]["network_force"] == "python"


def test_quantized_rows(tmp_path, capsys):
    """--quantize adds a row per variant (label backend+variant) with the smaller weights and a ratio to the
    unquantized reference; the OpenMM run uses the quantized model too."""
    out = tmp_path / "q.json"
    rc = main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1", "--backends", "reference,torch",
               "--quantize", "none,fp16,bf16-cast", "--compress", "none", "--repeats", "1", "--warmup", "1",
               "--openmm-steps", "2",
               "--openmm-replicas", "1", "--threads", "1", "--device", "cpu", "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["settings"]["quantize"] == ["none", "fp16", "bf16-cast"]
    rows = {(r["backend"], r["quantize"]): r for r in report["results"]}
    assert len(rows) == 6 and all(r["status"] == "ok" and r["outputs_finite"] for r in rows.values())
    assert rows[("torch", "fp16")]["weights_kb"] < rows[("torch", "none")]["weights_kb"]
    assert rows[("torch", "fp16")]["weights_kb"] == rows[("torch", "bf16-cast")]["weights_kb"]
    labels = {q["label"] for q in report["ratios"]}
    assert labels == {"torch", "reference+fp16", "torch+fp16", "reference+bf16-cast", "torch+bf16-cast"}
    assert {(o["backend"], o["quantize"]) for o in report["openmm"]} == set(rows)
    assert all(o["status"] == "ok" for o in report["openmm"])
    table = capsys.readouterr().out
    assert "torch+fp16" in table and "weights KB" in table


def test_compressed_rows(tmp_path, capsys):
    """--compress adds a row per filter-table dtype (label backend+tab-f16) with the table's weights and a ratio
    to the plain reference; the OpenMM run uses the compressed model too."""
    out = tmp_path / "c.json"
    rc = main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1", "--backends", "reference,torch",
               "--compress", "none,float16", "--compress-knots", "64", "--repeats", "1", "--warmup", "1",
               "--openmm-steps", "2", "--openmm-replicas", "1", "--threads", "1", "--device", "cpu",
               "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["settings"]["compress"] == ["none", "float16"] and report["settings"]["compress_knots"] == 64
    rows = {(r["backend"], r["compress"]): r for r in report["results"]}
    assert len(rows) == 4 and all(r["status"] == "ok" and r["outputs_finite"] for r in rows.values())
    assert all(r["compress_knots"] == (64 if c == "float16" else None) and r["quantize"] == "none"
               for (_, c), r in rows.items())
    assert rows[("torch", "float16")]["weights_kb"] < rows[("torch", "none")]["weights_kb"]
    ratios = {q["label"]: q for q in report["ratios"]}
    assert set(ratios) == {"torch", "reference+tab-f16", "torch+tab-f16"}
    ref, tab = rows[("reference", "none")], rows[("torch", "float16")]
    q = ratios["torch+tab-f16"]
    assert q["compress"] == "float16" and q["backend"] == "torch"
    assert abs(q["speedup_vs_reference"] - ref["median_ms"] / tab["median_ms"]) < 1e-9 * q["speedup_vs_reference"]
    assert {(o["backend"], o["compress"]) for o in report["openmm"]} == set(rows)
    assert all(o["status"] == "ok" for o in report["openmm"])
    table = capsys.readouterr().out
    assert "torch+tab-f16" in table and "reference+tab-f16" in table


def test_compression_is_a_configuration_axis(tmp_path, monkeypatch, capsys):
    """Configurations are compress x quantize x backends (tables first in the label: torch+tab-f32+fp16); every
    ratio is taken against the plain reference row (no tables, no 16-bit weights) of the same R. The workers are
    stubbed: this checks the loop, the JSON and the table, not a measurement."""
    import flashschnet.scripts.benchmark as bench
    from flashschnet.transforms import DEFAULT_KNOTS

    seen = []
    ms = {"reference": 100.0, "torch": 10.0}

    def worker(cfg):
        seen.append(cfg)
        t = ms[cfg["backend"]] / (2 if cfg["compress"] != "none" else 1) / (4 if cfg["quantize"] != "none" else 1)
        if cfg["kind"] == "openmm":
            return {"status": "ok", "platform": "CPU", "ms_per_step": t, "ns_per_day_per_replica": 1.0,
                    "ns_per_day_aggregate": 1.0}
        return {"status": "ok", "median_ms": t, "min_ms": t, "times_ms": [t], "ns_per_day_per_replica": 1.0,
                "ns_per_day_aggregate": 1.0, "peak_extra_mb": 10.0, "weights_kb": 1.0, "outputs_finite": True,
                "subprocess_wall_s": 0.0}

    monkeypatch.setattr(bench, "_run_worker", worker)
    out = tmp_path / "axis.json"
    rc = main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1", "--backends", "reference,torch",
               "--compress", "none,float32,bfloat16", "--quantize", "none,fp16", "--openmm-steps", "1",
               "--openmm-replicas", "1", "--device", "cpu", "--out", str(out)])
    assert rc == 0
    combos = [(c["compress"], c["quantize"], c["backend"]) for c in seen if c["kind"] == "energy_forces"]
    assert combos == [(c, q, b) for c in ("none", "float32", "bfloat16") for q in ("none", "fp16")
                      for b in ("reference", "torch")]
    assert [c for c in seen if c["kind"] == "openmm"] and len(seen) == 2 * len(combos)
    assert all(c["compress_knots"] == (None if c["compress"] == "none" else DEFAULT_KNOTS) for c in seen)
    report = json.loads(out.read_text())
    assert report["settings"]["compress"] == ["none", "float32", "bfloat16"]
    assert report["settings"]["compress_knots"] == DEFAULT_KNOTS
    ratios = {q["label"]: q for q in report["ratios"]}
    assert set(ratios) == {"torch", "reference+fp16", "torch+fp16", "reference+tab-f32", "torch+tab-f32",
                           "reference+tab-f32+fp16", "torch+tab-f32+fp16", "reference+tab-bf16", "torch+tab-bf16",
                           "reference+tab-bf16+fp16", "torch+tab-bf16+fp16"}
    assert ratios["torch+tab-f32+fp16"]["speedup_vs_reference"] == 100.0 / (10.0 / 8)
    assert ratios["reference+tab-bf16"]["speedup_vs_reference"] == 2.0
    assert ratios["torch+tab-f32"]["memory_pct_of_reference"] == 100.0
    table = capsys.readouterr().out
    assert "torch+tab-f32+fp16" in table and "8.00x" in table    # reference+tab-f32+fp16: 100 / 12.5


def test_default_rows_are_the_exact_network_and_what_flashschnet_simulate_runs(tmp_path, monkeypatch, capsys):
    """Without --compress the rows are every backend's exact network and each backend's default network (compress
    "auto": float32 tables on torch, the exact filters again on the reference, so no second reference row); the
    table names the default rows. Workers stubbed: the loop and the report, not a measurement."""
    import flashschnet.scripts.benchmark as bench

    seen = []

    def worker(cfg):
        seen.append(cfg)
        return {"status": "ok", "median_ms": 1.0, "min_ms": 1.0, "times_ms": [1.0], "ns_per_day_per_replica": 1.0,
                "ns_per_day_aggregate": 1.0, "peak_extra_mb": 1.0, "weights_kb": 1.0, "outputs_finite": True,
                "platform": "CPU", "ms_per_step": 1.0, "subprocess_wall_s": 0.0}

    monkeypatch.setattr(bench, "_run_worker", worker)
    out = tmp_path / "defaults.json"
    assert main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1", "--openmm-steps", "1",
                 "--device", "cpu", "--out", str(out)]) == 0
    rows = [(c["backend"], c["compress"]) for c in seen if c["kind"] == "energy_forces"]
    assert rows == [("reference", "none"), ("torch", "none"), ("torch", "float32")]
    report = json.loads(out.read_text())
    assert report["settings"]["compress"] == ["none", "auto"] and report["settings"]["compress_knots"] == 256
    assert report["settings"]["default_rows"] == ["reference", "torch+tab-f32"]
    assert "default network (flashschnet-simulate without --compress): reference, torch+tab-f32" in \
        capsys.readouterr().out
    seen.clear()                                          # in double precision the default is the exact network
    assert main(["--pdb", str(EXAMPLES / "1L2Y_trpcage.pdb"), "--replicas", "1", "--openmm-steps", "0",
                 "--device", "cpu", "--dtype", "float64", "--out", str(out)]) == 0
    assert [(c["backend"], c["compress"]) for c in seen] == [("reference", "none"), ("torch", "none")]


def test_bad_quantize_and_compress_lists_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--quantize", "fp8"])
    assert "quantize variants must be among" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--compress", "float32,fp16"])
    assert "compressions must be among auto,none,float32,float16,bfloat16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--compress", "float32", "--compress-knots", "2"])
    assert "--compress-knots" in capsys.readouterr().err
    assert main(["--compress", "none", "--compress-knots", "64", "--out", str(tmp_path / "k.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--compress-knots needs a compression" in err[0]
    assert not (tmp_path / "k.json").exists()


def test_builtin_model_has_the_oracle_hyperparameters(fixture_a):
    """The default model is mlcg_schnet_A's architecture (hidden 128, filters 128, 3 blocks, 50 Gaussian RBF,
    15 A cosine), built in code with seeded random weights: the same network in every run."""
    from flashschnet.checkpoint import mlcg_export_to_checkpoint
    from flashschnet.config import normalize_config
    from flashschnet.openmm.benchmark.defaults import default_model

    model = default_model(backend="torch")
    assert model.config == normalize_config(mlcg_export_to_checkpoint(fixture_a, "A")["config"])
    again = default_model(backend="reference")
    for (k, v), w in zip(model.network.state_dict().items(), again.network.state_dict().values()):
        assert torch.equal(v, w), k
    assert model.priors is None and model.network.embedding_layer.weight.dtype == torch.float32


def test_paths_are_taken_from_the_cwd_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)          # examples/... exists in the checkout, not here
    assert main(["--model", "examples/trpcage_placeholder.pt", "--out", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashschnet-benchmark: error: --model") and "no such file" in err[0]
    assert not (tmp_path / "b.json").exists()


def test_a_failing_configuration_is_an_error_row():
    from flashschnet.openmm.benchmark.worker import measure

    threads = torch.get_num_threads()            # measure() sets the configuration's threads
    try:
        out = measure({"kind": "energy_forces", "model": "/nonexistent/model.pt",
                       "pdb": str(EXAMPLES / "1L2Y_trpcage.pdb"), "backend": "torch", "device": "cpu",
                       "dtype": "float32", "threads": 1, "replicas": 1, "warmup": 0, "repeats": 1})
    finally:
        torch.set_num_threads(threads)
    assert out["status"] == "error" and "\n" not in out["error"] and "nonexistent" in out["error"]


def test_benchmark_json_that_cannot_be_written(tmp_path, capsys, monkeypatch, write_faults):
    import flashschnet.scripts.benchmark as benchmark
    from flashschnet.openmm.benchmark.report import write_json

    monkeypatch.setattr(benchmark, "_benchmark", lambda args, argv, pdb: write_json({"results": []}, args.out) and 0)
    write_faults.fail("b.json.tmp", module=atomic, errno=errno.ENOSPC, limit=5)
    assert benchmark.main(["--out", str(tmp_path / "b.json")]) == 5
    line = error_line(capsys.readouterr().err, "flashschnet-benchmark")
    assert f"writing the benchmark report {tmp_path / 'b.json'} failed: No space left on device" in line, line
    assert os.listdir(tmp_path) == []
