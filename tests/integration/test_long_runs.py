"""Long-run reliability of flashschnet-simulate: a resumed run repeats the uninterrupted one bitwise; SIGKILL at
any moment leaves readable outputs and a complete checkpoint from which --resume finishes the run bitwise;
a replica that blows up stops the run or is dropped (--on-blowup) without touching the others; memory stays
flat over many reports.

Most tests use a *tiny* random-weight model (16 channels, one interaction block; priors fitted to trp-cage;
built by :func:`flashschnet.tiny.tiny_model`), about 40 times faster per step than the placeholder model, so the
kill schedule and the memory check can afford hundreds of reports.

The units these runs rest on have their own tests: the DCD writer's order and truncate_dcd
(tests/openmm/reporters/test_dcd_reporter.py), the atomic checkpoint (tests/openmm/reporters/test_checkpoint.py), the health
check's drop policy (test_health.py), the fused path's independence of the Verlet list's history
(tests/model/fused/test_torch_engine.py) and the Verlet rebuild with a NaN replica (tests/model/test_neighbors.py).
"""
from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import mdtraj as md
import numpy as np
import openmm
import pytest

from tests.conftest import EXAMPLES, ROOT, platforms
from flashschnet.errors import InputError
from flashschnet.openmm.dcd import read_dcd
from flashschnet.openmm.reporters import CHECKPOINT_MAGIC, read_checkpoint
from flashschnet.scripts.simulate import main
from flashschnet.tiny import tiny_model
from tests.helpers.dcd import dcd_parts

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
PLACEHOLDER = str(EXAMPLES / "trpcage_placeholder.pt")
ENTRY = Path(sys.executable).parent / "flashschnet-simulate"
TOOL = ROOT / "tools" / "benchmarks" / "memory_long_run.py"
N_BEADS = 97


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Path of the tiny test model (trp-cage priors)."""
    return tiny_model(PDB, str(tmp_path_factory.mktemp("tiny") / "tiny.pt"))


def _args(out, model, steps, *extra, replicas=2, platform="CPU", report=10):
    return [PDB, "--model", str(model), "--steps", str(steps), "--out", str(out), "--report-interval", str(report),
            "--seed", "11", "--quiet", "--threads", "1", "--replicas", str(replicas), "--platform", platform,
            *map(str, extra)]


def _log_rows(out):
    """log.csv rows without the speed column (wall-clock dependent)."""
    with open(Path(out) / "log.csv", newline="") as f:
        return [r[:5] for r in csv.reader(f)]


def _checkpoint_state(path, model, replicas, platform):
    """(meta, positions, velocities) of a checkpoint file, loaded into a fresh Context as --resume does."""
    from flashschnet.cg import map_pdb
    from flashschnet.checkpoint import load_model
    from flashschnet.openmm.system import build_system

    meta, blob = read_checkpoint(str(path))
    system = build_system(map_pdb(PDB, mapping="5bead"), load_model(str(model)), replicas=replicas)
    for d in meta.get("dropped", []):
        for i in range(d["replica"] * N_BEADS, (d["replica"] + 1) * N_BEADS):
            system.setParticleMass(i, 0.0)
    ctx = openmm.Context(system, openmm.LangevinMiddleIntegrator(300, 1, 0.004),
                         openmm.Platform.getPlatformByName(platform))
    ctx.loadCheckpoint(blob)
    st = ctx.getState(getPositions=True, getVelocities=True)
    return meta, st.getPositions(asNumpy=True)._value.copy(), st.getVelocities(asNumpy=True)._value.copy()


def _assert_same_run(a, b, replicas, model, platform):
    """Two output directories hold the same run, bitwise: DCD headers (but the creation time) and frames, log
    rows (but the speed), the final checkpoint's step, time, positions and velocities."""
    for r in range(replicas):
        assert dcd_parts(Path(a) / f"replica_{r:03d}.dcd") == dcd_parts(Path(b) / f"replica_{r:03d}.dcd"), r
    assert _log_rows(a) == _log_rows(b)
    ma, pa, va = _checkpoint_state(Path(a) / "checkpoint.chk", model, replicas, platform)
    mb, pb, vb = _checkpoint_state(Path(b) / "checkpoint.chk", model, replicas, platform)
    assert (ma["step"], ma["time_ps"], ma["dcd_frames"]) == (mb["step"], mb["time_ps"], mb["dcd_frames"])
    assert np.array_equal(pa, pb) and np.array_equal(va, vb)


# ------------------------------------------------------------------------------------- 1. bitwise restart


@pytest.mark.parametrize("platform", ["Reference", "CPU", "CUDA", "OpenCL"])
def test_resume_repeats_the_uninterrupted_run_bitwise(tmp_path, platform):
    """40 steps straight vs 20 + --resume to 40 (placeholder model, 2 replicas): identical DCD frames, log rows
    and final checkpoint state. Before the fix the frames after the resume differed by ~1 float32 ulp: the
    fused CPU path chunked the Verlet list's pairs (skin included), so the chunks -- and the rounding -- depended
    on where the list had last been rebuilt; and TorchScript switched to a specialised plan after the first
    calls."""
    if platform not in platforms():
        pytest.skip(f"OpenMM platform {platform} is not available here")
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main(_args(straight, PLACEHOLDER, 40, platform=platform)) == 0
    assert main(_args(split, PLACEHOLDER, 20, platform=platform)) == 0
    assert main(_args(split, PLACEHOLDER, 40, "--resume", platform=platform)) == 0
    assert len(read_dcd(str(split / "replica_001.dcd"))) == 5          # steps 0, 10, 20, 30, 40
    _assert_same_run(straight, split, 2, PLACEHOLDER, platform)


# ------------------------------------------------------------------------------------- 2. kills, torn writes


def test_resume_of_a_run_killed_before_its_first_checkpoint_explains(tmp_path):
    from flashschnet.openmm.runner import open_run_dir

    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(InputError, match="stopped before its first checkpoint"):
        open_run_dir(str(tmp_path), True, {}, ())


def _launch(out, model, steps):
    return subprocess.Popen([str(ENTRY), *_args(out, model, steps, "--checkpoint-interval", 10, report=5)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for(cond, proc, timeout=120.0):
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"the run ended early: {proc.stderr.read()}"
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def _kill(proc):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def _check_after_kill(out, model):
    """What a killed run leaves: a complete checkpoint (read_checkpoint, Context.loadCheckpoint), DCDs that
    read_dcd and mdtraj read (at least the frames the checkpoint counts; mdtraj may see one complete frame the
    header does not count yet; mdtraj cannot open a DCD without frames, so a file holding only its header is
    checked by size)."""
    meta, pos, vel = _checkpoint_state(out / "checkpoint.chk", model, 2, "CPU")
    assert np.isfinite(pos).all() and np.isfinite(vel).all()
    for r in range(2):
        path = out / f"replica_{r:03d}.dcd"
        ours = read_dcd(str(path))
        if len(dcd_parts(path)[1]) < 3 * (8 + 4 * N_BEADS):     # not one complete frame yet
            assert len(ours) == 0
            continue
        theirs = md.load(str(path), top=str(out / "topology.pdb")).xyz
        assert len(ours) >= meta["dcd_frames"][r] and len(ours) <= len(theirs) <= len(ours) + 1
        assert np.abs(theirs[:len(ours)] - ours).max(initial=0.0) < 1e-6     # same float32 data, nm
    return meta


def test_sigkill_at_seeded_moments_then_resume_finishes_bitwise(tmp_path, tiny):
    """The console command (tiny model, 2 replicas, 600 steps, a frame every 5 steps, a checkpoint every 10) is
    SIGKILLed right after its first checkpoint appears and then, after each --resume, at a seeded random
    moment while it writes; torn writes a kill can leave (a partial DCD frame, a header counting a frame that is
    not there -- OpenMM's own write order --, a partial CSV row, a half-written checkpoint.chk.tmp) are added
    before the last resume. Every killed state is readable, and the final --resume gives exactly 121 frames per
    replica (steps 0, 5, ..., 600: step 0 once), bitwise equal to an uninterrupted run."""
    steps = 600
    ref = tmp_path / "ref"
    assert main(_args(ref, tiny, steps, "--checkpoint-interval", 10, report=5)) == 0
    out = tmp_path / "killed"
    proc = _launch(out, tiny, steps)
    _wait_for(lambda: (out / "checkpoint.chk").exists(), proc)
    _kill(proc)
    steps_seen = [_check_after_kill(out, tiny)["step"]]
    rng = random.Random(2024)
    for _ in range(3):
        proc = subprocess.Popen([str(ENTRY), *_args(out, tiny, steps, "--checkpoint-interval", 10, "--resume",
                                                    report=5)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        size0 = os.path.getsize(out / "log.csv")
        # once it writes frames again (past its start-up), kill it at a seeded moment
        _wait_for(lambda: os.path.getsize(out / "log.csv") > size0 + 200, proc)
        time.sleep(rng.uniform(0.0, 0.4))
        _kill(proc)
        steps_seen.append(_check_after_kill(out, tiny)["step"])
    print("checkpoint steps after the kills:", steps_seen)
    assert steps_seen[-1] < steps, "the run finished before the last kill; nothing was interrupted"
    assert steps_seen == sorted(steps_seen) and steps_seen[-1] > steps_seen[0]

    # torn writes
    d0, d1 = out / "replica_000.dcd", out / "replica_001.dcd"
    with open(d0, "ab") as f:
        f.write(b"\x04\x00\x00\x00partial frame")
    n1 = len(read_dcd(str(d1)))
    with open(d1, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<i", n1 + 1))
    with open(out / "log.csv", "a") as f:
        f.write("4")
    (out / "checkpoint.chk.tmp").write_bytes(CHECKPOINT_MAGIC + b"\xff" * 7)
    assert len(read_dcd(str(d1))) == n1
    assert len(md.load(str(d0), top=str(out / "topology.pdb"))) == len(read_dcd(str(d0)))

    res = subprocess.run([str(ENTRY), *_args(out, tiny, steps, "--checkpoint-interval", 10, "--resume", report=5)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert not (out / "checkpoint.chk.tmp").exists()
    for r in range(2):
        assert len(read_dcd(str(out / f"replica_{r:03d}.dcd"))) == steps // 5 + 1
        assert md.load(str(out / f"replica_{r:03d}.dcd"), top=str(out / "topology.pdb")).n_frames == steps // 5 + 1
    _assert_same_run(ref, out, 2, tiny, "CPU")


# ------------------------------------------------------------------------------------- 3. blow-up policy


def _corrupt(out, model, platform, replicas=(1,), squash=None, velocity_scale=None):
    """Rewrite the checkpoint in ``out`` with the given replicas squashed about their centre (huge prior forces)
    or their velocities scaled (they leave to infinity, then NaN); return the new positions [R*N, 3] (nm)."""
    from flashschnet.cg import map_pdb
    from flashschnet.checkpoint import load_model
    from flashschnet.openmm.system import build_system

    path = out / "checkpoint.chk"
    meta, blob = read_checkpoint(str(path))
    system = build_system(map_pdb(PDB, mapping="5bead"), load_model(str(model)), replicas=2)
    ctx = openmm.Context(system, openmm.LangevinMiddleIntegrator(300, 1, 0.004),
                         openmm.Platform.getPlatformByName(platform))
    ctx.loadCheckpoint(blob)
    st = ctx.getState(getPositions=True, getVelocities=True)
    pos, vel = st.getPositions(asNumpy=True)._value.copy(), st.getVelocities(asNumpy=True)._value.copy()
    for r in replicas:
        s = slice(r * N_BEADS, (r + 1) * N_BEADS)
        if squash is not None:
            pos[s] = pos[s].mean(0) + squash * (pos[s] - pos[s].mean(0))
        if velocity_scale is not None:
            vel[s] *= velocity_scale
    ctx.setPositions(pos)
    ctx.setVelocities(vel)
    header = json.dumps(meta).encode()
    path.write_bytes(CHECKPOINT_MAGIC + struct.pack("<Q", len(header)) + header + ctx.createCheckpoint())
    return pos


def test_on_blowup_stop_names_replica_and_step_and_keeps_the_checkpoint(tmp_path, tiny, capsys):
    out = tmp_path / "stop"
    assert main(_args(out, tiny, 20)) == 0
    _corrupt(out, tiny, "CPU", squash=0.3)
    capsys.readouterr()
    assert main(_args(out, tiny, 60, "--resume")) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "simulation unstable: step 30: replica 1: force" in err and "last good checkpoint: step 20" in err
    assert read_checkpoint(str(out / "checkpoint.chk"))[0]["step"] == 20
    assert [len(read_dcd(str(out / f"replica_{r:03d}.dcd"))) for r in range(2)] == [3, 3]     # steps 0, 10, 20
    assert not (out / "dropped.json").exists()


@pytest.mark.parametrize("platform", ["CPU", "Reference"])
def test_on_blowup_drop_freezes_the_replica_and_the_others_go_on(tmp_path, tiny, capsys, platform):
    """Replica 1 squashed at step 20 exceeds --max-force at the step-30 check and is dropped; replica 0 keeps
    all its frames and rows. What holds for replica 0 compared with a run where replica 1 stayed sound: on the
    CPU platform, bitwise the same trajectory (its random numbers do not depend on the other particles);
    on Reference, the same up to the drop and a different but sound trajectory after it (the Reference
    integrator draws random numbers only for particles with mass, so freezing replica 1 shifts replica 0's
    stream)."""
    good, out = tmp_path / "good", tmp_path / "drop"
    for d in (good, out):
        assert main(_args(d, tiny, 20, "--on-blowup", "drop", platform=platform)) == 0
    start = _corrupt(out, tiny, platform, squash=0.3)
    capsys.readouterr()
    assert main(_args(good, tiny, 60, "--resume", "--on-blowup", "drop", platform=platform)) == 0
    assert main(_args(out, tiny, 60, "--resume", "--on-blowup", "drop", platform=platform)) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert [ln for ln in err if "dropped at" in ln] == [
        ln for ln in err if ln.startswith("flashschnet-simulate: replica 1 dropped at step 30: force ")]
    assert len([ln for ln in err if "dropped at" in ln]) == 1
    assert err[-1].endswith("1 of 2 replicas dropped)")
    dropped = json.loads((out / "dropped.json").read_text())
    assert [(d["replica"], d["step"]) for d in dropped] == [(1, 30)] and "exceeds" in dropped[0]["reason"]
    assert json.loads((out / "run.json").read_text())["on_blowup"] == "drop"
    meta = read_checkpoint(str(out / "checkpoint.chk"))[0]
    assert meta["dropped"] == dropped and meta["dcd_frames"] == [7, 3]
    frozen = read_dcd(str(out / "replica_001.dcd"))
    ours, theirs = read_dcd(str(out / "replica_000.dcd")), read_dcd(str(good / "replica_000.dcd"))
    assert len(frozen) == 3 and len(ours) == 7 and np.isfinite(ours).all()     # from step 0
    with open(out / "log.csv") as f:
        rows = [(int(r["step"]), int(r["replica"])) for r in csv.DictReader(f)]
    assert rows == [(0, 0), (0, 1), (10, 0), (10, 1), (20, 0), (20, 1), (30, 0), (40, 0), (50, 0), (60, 0)]
    assert np.array_equal(ours[:4], theirs[:4])
    if platform == "CPU":
        assert np.array_equal(ours, theirs)
    # frozen where its last check passed -- here the (squashed) state the resumed run started from --, at rest
    _, pos, vel = _checkpoint_state(out / "checkpoint.chk", tiny, 2, platform)
    assert np.array_equal(pos[N_BEADS:], start[N_BEADS:]) and not vel[N_BEADS:].any()


def test_a_replica_gone_nan_is_dropped_and_stays_dropped_on_resume(tmp_path, tiny, capsys):
    """Replica 1 with huge velocities goes NaN between checks; the CPU platform then refuses to compute forces
    ("Particle coordinate is NaN") and the run drops the replica at that step and goes on (replica 0 bitwise as
    without the accident). A --resume keeps it frozen, and resuming after the drop repeats the straight run."""
    good, base = tmp_path / "good", tmp_path / "base"
    for d in (good, base):
        assert main(_args(d, tiny, 20, "--on-blowup", "drop")) == 0
    _corrupt(base, tiny, "CPU", velocity_scale=1e150)
    straight, split = tmp_path / "straight", tmp_path / "split"
    shutil.copytree(base, straight)
    shutil.copytree(base, split)
    capsys.readouterr()
    assert main(_args(straight, tiny, 80, "--resume", "--on-blowup", "drop")) == 0
    msg = [ln for ln in capsys.readouterr().err.splitlines() if "dropped at" in ln]
    assert len(msg) == 1 and "replica 1 dropped at step" in msg[0] and "NaN" in msg[0]
    step = json.loads((straight / "dropped.json").read_text())[0]["step"]
    assert 20 < step < 30                                  # between checks: OpenMM stopped, not the check
    assert main(_args(good, tiny, 80, "--resume", "--on-blowup", "drop")) == 0
    assert np.array_equal(read_dcd(str(straight / "replica_000.dcd")), read_dcd(str(good / "replica_000.dcd")))
    assert main(_args(split, tiny, 50, "--resume", "--on-blowup", "drop")) == 0
    capsys.readouterr()
    assert main(_args(split, tiny, 80, "--resume", "--on-blowup", "drop")) == 0
    err = capsys.readouterr().err
    assert "resuming" in err and "(1 of 2 replicas dropped)" in err and "dropped at" not in err
    _assert_same_run(straight, split, 2, tiny, "CPU")
    assert len(read_dcd(str(split / "replica_001.dcd"))) == 3 and len(read_dcd(str(split / "replica_000.dcd"))) == 9
    # frozen at its last good frame (step 20: the last one in its DCD), at rest
    _, pos, vel = _checkpoint_state(split / "checkpoint.chk", tiny, 2, "CPU")
    assert np.abs(pos[N_BEADS:] - read_dcd(str(split / "replica_001.dcd"))[-1]).max() < 1e-6
    assert not vel[N_BEADS:].any()


def test_all_replicas_dropped_stops_with_status_3(tmp_path, tiny, capsys):
    out = tmp_path / "all"
    assert main(_args(out, tiny, 20, "--on-blowup", "drop")) == 0
    _corrupt(out, tiny, "CPU", replicas=(0, 1), squash=0.3)
    capsys.readouterr()
    assert main(_args(out, tiny, 60, "--resume", "--on-blowup", "drop")) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("flashschnet-simulate: simulation unstable: step 30: all 2 replicas dropped")
    assert "last good checkpoint: step 20" in err[-1]


def test_on_blowup_is_a_fixed_setting_with_a_default_for_older_runs(tmp_path, tiny, capsys):
    out = tmp_path / "r"
    assert main(_args(out, tiny, 10, replicas=1)) == 0
    settings = json.loads((out / "run.json").read_text())
    assert settings["on_blowup"] == "stop"
    capsys.readouterr()
    assert main(_args(out, tiny, 20, "--resume", "--on-blowup", "drop", replicas=1)) == 2
    assert "on_blowup" in capsys.readouterr().err
    del settings["on_blowup"]                              # a run.json from before the option
    (out / "run.json").write_text(json.dumps(settings))
    assert main(_args(out, tiny, 20, "--resume", replicas=1)) == 0
    assert main(_args(out, tiny, 30, "--resume", "--on-blowup", "drop", replicas=1)) == 2
    with pytest.raises(SystemExit):
        main(_args(out, tiny, 30, "--on-blowup", "ignore"))


# ------------------------------------------------------------------------------------- 4. memory


def test_memory_stays_flat_over_many_reports(tmp_path):
    """tools/benchmarks/memory_long_run.py in its own process: 12,000 steps of trp-cage with the tiny model and a report
    every 20 steps (600 reports: health check, DCD frame, log row, a checkpoint every 200 steps), RSS sampled
    every 1,000 steps. After a 4,000-step warm-up, the baseline RSS may grow by at most 4 MB: the smaller of
    the last two samples minus the smaller of the first two (steps 4,000 and 5,000). Two samples per end, not
    one, because a single sample can catch a transient peak (+2 to +16 MB, gone at the next sample, in four
    of the seventeen samples after the warm-up of a 100,000-step placeholder run); a leak raises every later
    sample.

    The bound: the process settles at ~710 MB within the first ~2,000 steps and then moves by a few hundred kB
    (allocator noise; measured here: +0.0 MB from step 4,000 to 12,000). A leak of one State per report
    costs ~20 kB per report for 97 beads (the second run below: a slope of 9.7 MB per 10,000 steps, 2026-12-07;
    40-60 kB on 2026-12-02), i.e. ~6 MB over the 300 or more reports between the baseline samples; anything that
    grows by more than ~13 kB per report is caught (a leaked [97, 3] float64 array is 2.3 kB, so only a leak of a
    few such arrays per report would be). The second run keeps every reported State on purpose (--hoard-states;
    ~9 MB over the ~450 reports between its baseline samples; 6,000 steps gave 3.9-4.6 MB, too close to the bound)
    and must exceed the bound: the check can fail."""
    def measure(name, *extra):
        out = tmp_path / f"{name}.json"
        res = subprocess.run([sys.executable, str(TOOL), "--model", "tiny", "--report-interval", "20",
                              "--out", str(out), *extra], capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stderr
        return json.loads(out.read_text())

    bound = 4.0
    flat = measure("flat", "--steps", "12000", "--sample-every", "1000", "--warmup", "4000")
    assert [s["step"] for s in flat["samples"]] == list(range(1000, 12001, 1000))
    assert flat["baseline_growth_mb_after_warmup"] < bound, flat["samples"]
    leaky = measure("leaky", "--steps", "12000", "--sample-every", "1000", "--warmup", "1000", "--hoard-states")
    assert leaky["baseline_growth_mb_after_warmup"] > bound, leaky["samples"]
