"""flashschnet.scripts.simulate (flashschnet-simulate): --help through the console entry point, a short run mdtraj
reads back, resume (bitwise, cut after the checkpoint; the run's own settings, its input files found by content,
"nothing to do" instead of a "nan ns/day" run), blow-up handling, bad input as one line and exit
status 2, and the network options a run records (quantization, matmul, compression). The write faults of a run:
test_os_errors.py."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mdtraj as md
import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.dcd import read_dcd
from flashschnet.scripts.simulate import main

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
OTHER_MODEL = EXAMPLES / "trpcage_trained.pt"
ENTRY = Path(sys.executable).parent / "flashschnet-simulate"
COMMON = ["--report-interval", "10", "--seed", "11", "--quiet", "--threads", "1"]
OUTPUTS = ("replica_000.dcd", "log.csv", "checkpoint.chk", "run.json")


def _run(tmp_path, name, *extra, steps=20):
    out = tmp_path / name
    rc = main([PDB, "--model", MODEL, "--steps", str(steps), "--out", str(out), "--report-interval", "10",
               "--seed", "11", "--quiet", "--threads", "1", *extra])
    return rc, out


def test_help_through_the_console_entry_point():
    assert ENTRY.exists(), f"console entry point not installed at {ENTRY}"
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for flag in ("--model", "--steps", "--out", "--replicas", "--platform", "--seed", "--dt", "--temperature",
                 "--report-interval", "--resume"):
        assert flag in res.stdout


def test_short_run_reads_back_with_mdtraj(tmp_path):
    rc, out = _run(tmp_path, "run", "--replicas", "2")
    assert rc == 0
    names = sorted(os.listdir(out))
    assert names == ["checkpoint.chk", "cleaned.pdb", "log.csv", "replica_000.dcd", "replica_001.dcd", "run.json",
                     "topology.pdb"]
    top = md.load(str(out / "topology.pdb"))
    assert top.n_atoms == 97
    for r in range(2):
        traj = md.load(str(out / f"replica_{r:03d}.dcd"), top=str(out / "topology.pdb"))
        assert traj.n_frames == 3 and traj.n_atoms == 97        # steps 0 (the start), 10, 20
        assert np.isfinite(traj.xyz).all()
        # bonds intact: every CG bond shorter than 0.5 nm
        bonds = np.array([[a.index, b.index] for a, b in top.topology.bonds])
        assert md.compute_distances(traj, bonds).max() < 0.5
    a = md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb")).xyz
    b = md.load(str(out / "replica_001.dcd"), top=str(out / "topology.pdb")).xyz
    assert not np.array_equal(a, b)  # replicas are independent trajectories
    with open(out / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["step"]), int(r["replica"])) for r in rows] == [(0, 0), (0, 1), (10, 0), (10, 1), (20, 0), (20, 1)]
    for r in rows:
        assert np.isfinite(float(r["potential_energy_kJ_mol"])) and 50 < float(r["temperature_K"]) < 1000
    assert float(rows[0]["time_ps"]) == 0.0 and float(rows[2]["time_ps"]) == pytest.approx(0.04)


@pytest.mark.parametrize("platform", ["Reference", "CPU"])
def test_resume_continues_the_trajectory(tmp_path, platform):
    rc, straight = _run(tmp_path, "straight", "--platform", platform, steps=40)
    assert rc == 0
    rc, split = _run(tmp_path, "split", "--platform", platform, steps=20)
    assert rc == 0
    rc, _ = _run(tmp_path, "split", "--resume", "--platform", platform, steps=40)
    assert rc == 0
    t1 = md.load(str(straight / "replica_000.dcd"), top=str(straight / "topology.pdb"))
    t2 = md.load(str(split / "replica_000.dcd"), top=str(split / "topology.pdb"))
    assert t1.n_frames == t2.n_frames == 5                  # step 0 once, not again on resume
    # the resumed run repeats the straight one bitwise (tests/integration/test_long_runs.py checks every output)
    assert np.array_equal(t1.xyz, t2.xyz)
    with open(split / "log.csv") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f)]
    assert steps == [0, 10, 20, 30, 40]


def test_resume_cuts_output_written_after_the_checkpoint(tmp_path):
    # checkpoints every 20 steps, frames every 10: a run stopped at 30 has one frame past its checkpoint
    rc, out = _run(tmp_path, "cut", "--checkpoint-interval", "20", steps=30)
    assert rc == 0
    # simulate a crash after step 30's output but before its checkpoint: put the step-20 checkpoint back
    from flashschnet.openmm.reporters import read_checkpoint

    meta, _ = read_checkpoint(str(out / "checkpoint.chk"))
    assert meta["step"] == 30
    rc, ref = _run(tmp_path, "ref", "--checkpoint-interval", "20", steps=20)
    os.replace(ref / "checkpoint.chk", out / "checkpoint.chk")
    rc, _ = _run(tmp_path, "cut", "--resume", "--checkpoint-interval", "20", steps=40)
    assert rc == 0
    traj = md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb"))
    assert traj.n_frames == 5
    with open(out / "log.csv") as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [0, 10, 20, 30, 40]


def test_blow_up_stops_with_a_clear_message_and_keeps_the_checkpoint(tmp_path, capsys):
    rc, out = _run(tmp_path, "boom", steps=20)
    assert rc == 0
    rc, _ = _run(tmp_path, "boom", "--resume", "--max-force", "1", steps=40)
    assert rc == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "simulation unstable: step 30: replica 0: force" in err
    assert "last good checkpoint: step 20" in err
    from flashschnet.openmm.reporters import read_checkpoint

    assert read_checkpoint(str(out / "checkpoint.chk"))[0]["step"] == 20
    traj = md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb"))
    assert traj.n_frames == 3   # steps 0, 10, 20: the broken step-30 state was not recorded


@pytest.mark.parametrize("args, message", [
    (["missing.pdb"], "file does not exist"),
    ([PDB, "--replicas", "0"], "--replicas must be >= 1"),
    ([PDB, "--dt", "-1"], "--dt"),
    ([PDB, "--platform", "NoSuchPlatform"], "platform 'NoSuchPlatform' is not available"),
    ([PDB, "--report-interval", "10", "--checkpoint-interval", "15"], "multiple of --report-interval"),
    ([str(EXAMPLES / "4PTI_bpti.pdb")], "priors were made for"),
    ([PDB, "--compress", "none", "--compress-knots", "64"], "--compress-knots needs a compression"),
    ([PDB, "--backend", "reference", "--compress-knots", "64"], "--compress-knots needs a compression (--compress "
                                                                "auto runs the exact filters here)"),
    ([PDB, "--compress", "float16", "--compress-knots", "100000"], "knots must be an integer between 4 and 65536"),
])
def test_bad_input_gives_one_line_and_status_2(tmp_path, capsys, args, message):
    argv = [a if a != "missing.pdb" else str(tmp_path / "missing.pdb") for a in args]
    rc = main(argv + ["--model", MODEL, "--steps", "10", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    # notes (e.g. ignored waters) may come first, one line each; the error is the last line
    assert all(line.startswith("flashschnet-simulate: note:") for line in err[:-1])
    assert message in err[-1] and err[-1].startswith("flashschnet-simulate: error:")


def test_existing_run_and_resume_mismatch(tmp_path, capsys):
    rc, out = _run(tmp_path, "r", steps=10)
    assert rc == 0
    capsys.readouterr()
    rc, _ = _run(tmp_path, "r", steps=10)
    assert rc == 2 and "already holds a run" in capsys.readouterr().err
    rc, _ = _run(tmp_path, "r", "--resume", "--replicas", "2", steps=20)
    assert rc == 2 and "replicas" in capsys.readouterr().err
    rc, _ = _run(tmp_path, "fresh", "--resume", steps=20)
    assert rc == 2 and "nothing to resume" in capsys.readouterr().err


def test_bad_model_file_through_the_cli(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    rc = main([PDB, "--model", str(bad), "--steps", "10", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.pt: not a readable model file" in err[0]
    assert not (tmp_path / "o" / "run.json").exists()


def test_an_out_that_cannot_be_a_folder_is_refused_before_the_model_loads(tmp_path, capsys):
    """--out naming a file, or a path below one: one line, before any note of loading the model."""
    (tmp_path / "file").write_text("mine")
    for out, says in ((tmp_path / "file", "exists and is not a directory"),
                      (tmp_path / "file" / "run", f"{tmp_path / 'file'} is a file, not a directory")):
        rc = main([PDB, "--model", MODEL, "--steps", "10", "--out", str(out), "--quiet"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and says in err[0] and f"--out {out}" in err[0], err
    assert (tmp_path / "file").read_text() == "mine"


def test_entry_point_run_without_traceback(tmp_path):
    """The installed command on a bad PDB: status 2, one line on stderr, no traceback."""
    pdb = tmp_path / "water.pdb"
    pdb.write_text("HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\nEND\n")
    res = subprocess.run([str(ENTRY), str(pdb), "--model", MODEL, "--steps", "1", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if "simtk.openmm" not in ln]
    assert "Traceback" not in res.stderr and len(lines) == 1 and "no protein residues" in lines[0]


def test_python_force_run(tmp_path, capsys):
    rc, out = _run(tmp_path, "py", "--network-force", "python", steps=10)
    assert rc == 0
    assert md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb")).n_frames == 2    # steps 0, 10
    assert "done: 10 steps x 1 replica of 97 beads" in capsys.readouterr().err     # not "1 replicas"


def test_gpu_only_options_on_cpu_are_noted_not_silently_ignored(tmp_path, capsys):
    rc, out = _run(tmp_path, "gpu-opts", "--matmul", "bf16", "--cuda-graph", steps=10)
    assert rc == 0
    err = capsys.readouterr().err
    assert "note: --matmul bf16 is ignored: it sets the triton backend's tensor-core products" in err, err
    assert "note: --cuda-graph is ignored: it replays the triton backend's step on CUDA" in err, err
    # the engine that ran is in the note and in run.json (flashschnet.fused.engine.running_engine)
    assert "note: network backend torch (engine torch; cpu, single precision" in err, err
    assert json.loads((out / "run.json").read_text())["engine"] == "torch"


def test_quantized_run_records_the_variant_and_resumes_only_with_it(tmp_path, capsys):
    rc, out = _run(tmp_path, "q", "--quantize", "fp16", steps=10)
    assert rc == 0
    assert json.loads((out / "run.json").read_text())["quantize"] == "fp16"
    assert "16-bit weights: float16, per-channel scales" in capsys.readouterr().err
    assert md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb")).n_frames == 2
    rc = main([PDB, "--model", MODEL, "--steps", "20", "--out", str(out), "--report-interval", "10", "--quiet",
               "--resume", "--quantize", "bf16"])
    assert rc == 2 and "quantize" in capsys.readouterr().err


def test_matmul_is_recorded_and_resumes_only_with_it(tmp_path, capsys):
    """--matmul (the triton backend's product precision; the torch backend here computes exactly anyway) is a
    setting of the run: recorded in run.json, and a resume with another one is refused. --cuda-graph is speed
    only (a no-op on the CPU) and may change on resume."""
    rc, out = _run(tmp_path, "m", "--matmul", "bf16", "--cuda-graph", steps=10)
    assert rc == 0
    run = json.loads((out / "run.json").read_text())
    assert run["matmul"] == "bf16" and run["cuda_graph"] is True
    rc = main([PDB, "--model", MODEL, "--steps", "20", "--out", str(out), "--report-interval", "10", "--quiet",
               "--resume", "--matmul", "fp16"])
    assert rc == 2 and "matmul" in capsys.readouterr().err
    rc = main([PDB, "--model", MODEL, "--steps", "20", "--out", str(out), "--report-interval", "10", "--quiet",
               "--resume", "--matmul", "bf16"])
    assert rc == 0


def test_compression_is_recorded_and_resumes_only_with_it(tmp_path, capsys):
    """--compress / --compress-knots (filter tables, docs/compression.md) are settings of the run: recorded in
    run.json, named in the network note, a resume with another table dtype or knot count is refused, and one that
    leaves them out takes the run's; a run written before the options existed resumes as uncompressed."""
    rc, out = _run(tmp_path, "c", "--compress", "float16", "--compress-knots", "64", steps=10)
    assert rc == 0
    run = json.loads((out / "run.json").read_text())
    assert run["compress"] == "float16" and run["compress_knots"] == 64
    assert "filter tables: quintic float16 table, 64 knots" in capsys.readouterr().err
    assert md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb")).n_frames == 2
    resume = [PDB, "--model", MODEL, "--steps", "20", "--out", str(out), "--report-interval", "10", "--quiet",
              "--resume"]
    for extra, key in ((["--compress", "bfloat16", "--compress-knots", "64"], "--compress bfloat16 (the run's: float16)"),
                       (["--compress", "float16", "--compress-knots", "128"], "--compress-knots 128 (the run's: 64)"),
                       (["--compress", "none"], "--compress none (the run's: float16)")):
        assert main(resume + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and key in err[0] and "--resume with" in err[0], err
    assert main(resume + ["--compress", "float16"]) == 0        # the knots left out: the run's
    assert "filter tables: quintic float16 table, 64 knots" in capsys.readouterr().err
    assert main(resume[:-1] + ["--steps", "30", "--resume"]) == 0   # both left out: the run's
    assert "filter tables: quintic float16 table, 64 knots" in capsys.readouterr().err



def test_the_default_network_is_float32_tables_said_once_and_recorded(tmp_path, capsys):
    """Without --compress a run computes with float32 filter tables: one note says so and how to opt out, run.json
    records the tables and that they were the default; --compress none opts out (recorded, no such note)."""
    rc, out = _run(tmp_path, "default", steps=10)
    assert rc == 0
    err = capsys.readouterr().err.splitlines()
    chosen = [line for line in err if "by default" in line]
    assert len(chosen) == 1 and chosen[0].startswith("flashschnet-simulate: note: network: float32 filter tables by "
                                                     "default (quintic, 256 knots; ")
    assert chosen[0].endswith("; --compress none for the exact filter network")
    run = json.loads((out / "run.json").read_text())
    assert (run["compress"], run["compress_knots"], run["compress_default"]) == ("float32", 256, True)
    rc, exact = _run(tmp_path, "exact", "--compress", "none", steps=10)
    assert rc == 0
    err = capsys.readouterr().err
    assert "by default" not in err and "filter tables: none" in err
    run = json.loads((exact / "run.json").read_text())
    assert (run["compress"], run["compress_knots"], run["compress_default"]) == ("none", None, False)


def test_a_run_directory_of_an_older_version_resumes_exact_and_bitwise(tmp_path, capsys):
    """A run.json without the compression keys was written when the exact filter network was the default: its run
    resumes exact (not with the tables that are the default now), repeating the uninterrupted exact run bitwise."""
    rc, straight = _run(tmp_path, "straight", "--compress", "none", steps=20)
    assert rc == 0
    rc, old = _run(tmp_path, "old", "--compress", "none", steps=10)
    assert rc == 0
    run = json.loads((old / "run.json").read_text())
    for key in ("compress", "compress_knots", "compress_default"):
        del run[key]
    (old / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    assert main([PDB, "--model", MODEL, "--steps", "20", "--out", str(old), "--quiet", "--threads", "1",
                 "--resume"]) == 0
    assert "filter tables: none" in capsys.readouterr().err
    t1, t2 = (md.load(str(d / "replica_000.dcd"), top=str(d / "topology.pdb")) for d in (straight, old))
    assert t1.n_frames == t2.n_frames == 3 and np.array_equal(t1.xyz, t2.xyz)


def test_a_nan_coordinate_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    """A NaN in the PDB used to raise from OpenMM's PDB writer inside the cleaning step (a traceback)."""
    lines = (EXAMPLES / "1L2Y_trpcage.pdb").read_text().splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("ATOM"))
    lines[i] = lines[i][:30] + "     nan" + lines[i][38:]
    pdb = tmp_path / "nan.pdb"
    pdb.write_text("\n".join(lines) + "\n")
    rc = main([str(pdb), "--model", MODEL, "--steps", "10", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"flashschnet-simulate: error: {pdb}: line {i + 1}: atom {lines[i][12:16].strip()} of residue "
                   + err[0].split(" of residue ", 1)[1]], err
    assert "non-finite coordinate" in err[0] and not (tmp_path / "o").exists()


def test_step_0_is_the_first_frame_and_the_default_interval_gives_101_frames(tmp_path, capsys):
    """No --report-interval: --steps 200 -> every 2 steps (--steps // 100), checkpoints every 20; the starting
    structure (topology.pdb's positions) is frame 0, step 0 in the DCD header and the log."""
    from flashschnet.openmm.dcd import read_dcd, read_header
    from flashschnet.tiny import tiny_model

    tiny = tiny_model(PDB, str(tmp_path / "tiny.pt"))    # ~40x faster per step
    out = tmp_path / "auto"
    assert main([PDB, "--model", tiny, "--steps", "200", "--out", str(out), "--seed", "3", "--quiet",
                 "--threads", "1"]) == 0
    assert "warning" not in capsys.readouterr().err
    settings = json.loads((out / "run.json").read_text())
    assert (settings["report_interval"], settings["checkpoint_interval"]) == (2, 20)
    head = read_header(str(out / "replica_000.dcd"))
    assert (head.frames, head.first_step, head.interval) == (101, 0, 2)
    frames = read_dcd(str(out / "replica_000.dcd"))
    start = md.load(str(out / "topology.pdb")).xyz[0]
    assert np.abs(frames[0] - start).max() < 1e-4 and np.abs(frames[-1] - start).max() > 1e-2    # PDB: 0.001 A
    with open(out / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(0, 201, 2)) and float(rows[0]["time_ps"]) == 0.0


def test_a_run_shorter_than_its_report_interval_warns_and_writes_step_0(tmp_path, capsys):
    rc, out = _run(tmp_path, "short", steps=5)                       # --report-interval 10
    assert rc == 0
    warnings = [l for l in capsys.readouterr().err.splitlines() if "warning" in l]
    assert warnings == ["flashschnet-simulate: warning: --steps 5 with --report-interval 10 writes only the starting "
                        "frame (step 0) and its log row; leave --report-interval out (here 1: 6 frames) or pass "
                        "--steps of at least 10"]
    assert md.load(str(out / "replica_000.dcd"), top=str(out / "topology.pdb")).n_frames == 1
    with open(out / "log.csv") as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [0]


def test_a_start_that_fails_the_health_check_writes_no_frame(tmp_path, capsys):
    """The step-0 frame is checked like any other: a start beyond --max-force stops the run (exit 3) before a
    frame, a log row or a checkpoint is written."""
    from flashschnet.openmm.dcd import read_dcd

    rc, out = _run(tmp_path, "bad-start", "--max-force", "1", steps=10)
    assert rc == 3
    assert "simulation unstable: step 0: replica 0: force" in capsys.readouterr().err
    assert len(read_dcd(str(out / "replica_000.dcd"))) == 0 and not (out / "checkpoint.chk").exists()
    with open(out / "log.csv") as f:
        assert list(csv.DictReader(f)) == []


# -- --resume --out DIR: the run's own settings, its input files by content, "nothing to do" ----------------------

def _outputs(out):
    return {name: (out / name).read_bytes() for name in OUTPUTS}


def test_resume_finds_the_model_by_content_not_by_name(tmp_path, monkeypatch, capsys):
    """The issue's reproduction: a resume from another working directory whose examples/MODEL is a different
    model is refused naming both sha256 sums; the model moved to another folder resumes bitwise."""
    first = tmp_path / "first"
    (first / "examples").mkdir(parents=True)
    shutil.copy(MODEL, first / "examples" / "model.pt")
    monkeypatch.chdir(first)
    assert main([PDB, "--model", "examples/model.pt", "--steps", "20", "--out", str(tmp_path / "split"), *COMMON]) == 0
    straight = tmp_path / "straight"
    assert main([PDB, "--model", str(MODEL), "--steps", "40", "--out", str(straight), *COMMON]) == 0
    capsys.readouterr()

    second = tmp_path / "second"                    # another folder, its examples/model.pt another model
    (second / "examples").mkdir(parents=True)
    shutil.copy(OTHER_MODEL, second / "examples" / "model.pt")
    monkeypatch.chdir(second)
    before = _outputs(tmp_path / "split")
    assert main(["--resume", "--out", str(tmp_path / "split"), "--model", "examples/model.pt", "--steps", "40",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashschnet-simulate: error:")
    run = json.loads(before["run.json"])
    assert run["files"]["model"]["sha256"] in err[0] and str(first / "examples" / "model.pt") in err[0]
    assert hashlib.sha256(OTHER_MODEL.read_bytes()).hexdigest() in err[0]
    assert _outputs(tmp_path / "split") == before                    # nothing touched

    # the original moved away: a plain resume says where it was and what to give ...
    moved = tmp_path / "moved" / "renamed.pt"
    moved.parent.mkdir()
    shutil.move(first / "examples" / "model.pt", moved)
    assert main(["--resume", "--out", str(tmp_path / "split"), "--steps", "40", "--quiet"]) == 2
    assert "is gone; give --model PATH" in capsys.readouterr().err
    # ... and given at its new place (every other setting from run.json) it continues bitwise
    assert main(["--resume", "--out", str(tmp_path / "split"), "--model", str(moved), "--steps", "40", "--quiet"]) == 0
    split = tmp_path / "split"
    a, b = read_dcd(str(split / "replica_000.dcd")), read_dcd(str(straight / "replica_000.dcd"))
    assert a.shape == b.shape == (5, 97, 3) and np.array_equal(a, b)      # the header's creation time differs
    strip = lambda text: [row.rsplit(",", 1)[0] for row in text.splitlines()]   # noqa: E731 (the speed column)
    assert strip((split / "log.csv").read_text()) == strip((straight / "log.csv").read_text())
    assert json.loads((split / "run.json").read_text())["files"]["model"]["path"] == str(moved)
    capsys.readouterr()

    # long enough already: nothing to do, nothing written, no "nan ns/day"
    before = _outputs(split)
    for extra in ([], ["--steps", "30"]):
        assert main(["--resume", "--out", str(split), "--quiet", *extra]) == 0
        err = capsys.readouterr().err
        assert "nothing to do" in err and "at step 40" in err and "nan" not in err
    assert _outputs(split) == before


def test_resume_lists_every_disagreement_in_one_line(tmp_path, capsys):
    out = tmp_path / "r"
    assert main([PDB, "--model", str(MODEL), "--steps", "10", "--out", str(out), *COMMON]) == 0
    capsys.readouterr()
    assert main(["--resume", "--out", str(out), "--steps", "20", "--dt", "2", "--temperature", "310",
                 "--replicas", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    for part in ("--dt 2 (the run's: 4)", "--temperature 310 (the run's: 300)", "--replicas 2 (the run's: 1)"):
        assert part in err[0]


@pytest.mark.parametrize("args, message", [
    (["--steps", "10"], "give the PDB file and --model for a new run"),
    ([PDB, "--steps", "10"], "give --model for a new run"),
    ([PDB, "--model", str(MODEL), "--temperatures", "300,320", "--temperature", "350", "--steps", "10"],
     "--temperature 350 with --temperatures"),
])
def test_what_a_new_run_needs_is_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "new"
    assert main([*args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists() or not any(out.iterdir())
