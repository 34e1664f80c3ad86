"""flashschnet.openmm.runner.job: run_job, the run scaffold both force fields use, on a tiny System (two replicas of
three particles in a harmonic well, tests/helpers/ensemble_systems.py, on the Reference platform): a new run writes
run.json, its checked starting state as step 0 and every report after it (frames, log rows), and checkpoints; a
resume goes on from the checkpoint without writing step 0 again; resume_already_done answers "nothing to do" for a
run at its step count; a replica that blows up under on_blowup="drop" is frozen, named and its frames stop. The
CG and MARTINI runs through the command lines: tests/scripts/, tests/openmm/martini/test_run.py."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from flashschnet.openmm.dcd import read_dcd, read_header
from flashschnet.openmm.runner import DynamicsSettings, MDJob, resume_already_done, run_job
from tests.helpers.ensemble_systems import HarmonicBuilder

R, N = 2, 3                  # replicas, particles per replica


def _job(out, steps, builder=None, **settings):
    b = (builder or HarmonicBuilder(particles=N))(R)
    s = DynamicsSettings(out=str(out), steps=steps, platform="Reference", seed=7, dt_fs=4.0, report_interval=5,
                         checkpoint_interval=10, **settings)
    s.validate()
    return MDJob(out=str(out), settings=s, topology=b.topology, system=b.system, replicas=R, particles=N,
                 trajectories=[str(out / f"replica_{r:03d}.dcd") for r in range(R)],
                 trajectory_topology=b.trajectory_topology, masses_amu=b.masses_amu,
                 start=lambda simulation: simulation.context.setPositions(b.positions_nm),
                 run_json={"steps": steps, "what": "harmonic"}, label=lambda i: f"particle {i}",
                 replica_energies=b.energies)


def _log(out):
    with open(out / "log.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_new_run_records_step_0_and_every_report_and_a_resume_goes_on_from_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    lines = []
    r = run_job(_job(out, 20), progress=False, echo=lines.append)
    assert (r.steps_done, r.replicas, r.n_beads, r.dropped, r.nothing_to_do) == (20, R, N, [], False)
    assert r.ns_per_day_per_replica > 0 and lines == []
    assert json.loads((out / "run.json").read_text()) == {"steps": 20, "what": "harmonic"}
    for w in range(R):
        path = str(out / f"replica_{w:03d}.dcd")
        frames = read_dcd(path)
        assert frames.shape == (5, N, 3) and read_header(path).first_step == 0          # steps 0, 5, ..., 20
        np.testing.assert_allclose(frames[0], 0.05, atol=1e-6)                         # the starting state
        assert not np.allclose(frames[1], 0.05, atol=1e-6)
    rows = _log(out)
    assert [(int(x["step"]), int(x["replica"])) for x in rows] == [(s, w) for s in range(0, 21, 5) for w in range(R)]
    # step 0's energy: 3 particles at (0.05, 0.05, 0.05) nm in k/2 |x|^2, k = 100 kJ/mol/nm^2
    assert float(rows[0]["potential_energy_kJ_mol"]) == pytest.approx(0.5 * 100.0 * N * 3 * 0.05 ** 2, rel=1e-6)

    done = resume_already_done(str(out), 20, R)
    assert done is not None and done.nothing_to_do and (done.steps_done, done.steps_target) == (20, 20)
    assert resume_already_done(str(out), 30, R) is None

    r = run_job(_job(out, 30), resume=True, progress=False, echo=lines.append)
    assert r.steps_done == 30 and lines == [f"resuming {out} at step 20"]
    assert [len(read_dcd(str(out / f"replica_{w:03d}.dcd"))) for w in range(R)] == [7, 7]      # step 0 once
    assert [int(x["step"]) for x in _log(out)] == [s for s in range(0, 31, 5) for _ in range(R)]


def test_a_replica_that_blows_up_is_dropped_and_the_other_goes_on(tmp_path):
    """Replica 1 sits on an inverted well (HarmonicBuilder.unstable_replica) and exceeds --max-force."""
    out = tmp_path / "drop"
    lines = []
    job = _job(out, 200, HarmonicBuilder(particles=N, k=1000.0, unstable_replica=1), max_force=2.0e3)
    job.on_blowup = "drop"
    r = run_job(job, progress=False, echo=lines.append)
    assert r.steps_done == 200 and r.dropped == [1] and r.on_blowup == "drop"
    dropped = json.loads((out / "dropped.json").read_text())
    assert [d["replica"] for d in dropped] == [1] and "exceeds" in dropped[0]["reason"]
    step = dropped[0]["step"]
    assert 0 < step < 200 and any(line.startswith(f"replica 1 dropped at step {step}: ") for line in lines)
    frames = [len(read_dcd(str(out / f"replica_{w:03d}.dcd"))) for w in range(R)]
    assert frames == [200 // 5 + 1, step // 5]                   # replica 1: steps 0 .. step - 5
    assert max(int(x["step"]) for x in _log(out) if x["replica"] == "1") < step
