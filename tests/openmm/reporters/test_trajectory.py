"""ReplicaTrajectoryReporter: one DCD/XTC/HDF5 file per packed replica, read back with mdtraj.

Two systems: the packed CG trp-cage (3 replicas, placeholder model, not periodic: no unit cell) and a small
periodic Lennard-Jones box (triclinic, MonteCarloBarostat, so the box changes between frames) split into 2
"replicas" of 20 particles. A recording reporter with the same request sees the same states, so every frame
is compared with the positions and box the reporter was handed.
"""
from __future__ import annotations

import os

import mdtraj as md
import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet.errors import InputError
from flashschnet.openmm.reporters import ReplicaTrajectoryReporter

torch.set_num_threads(1)

# what each format keeps of a position in nm: DCD float32 Angstrom, XTC 1/1000 nm, HDF5 float32 nm
POS_TOL = {"dcd": 1e-5, "xtc": 6e-4, "h5": 1e-5}
FORMATS = ("dcd", "xtc", "h5")


class Recorder:
    """Keeps what OpenMM hands to reporters asking for positions (same 'periodic' request -> same state)."""

    def __init__(self, interval):
        self.interval, self.frames = interval, []

    def describeNextReport(self, simulation):
        return {"steps": self.interval - simulation.currentStep % self.interval, "periodic": None,
                "include": ["positions"]}

    def report(self, simulation, state):
        self.frames.append({"xyz": state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
                            "box": state.getPeriodicBoxVectors(asNumpy=True).value_in_unit(u.nanometer),
                            "time": state.getTime().value_in_unit(u.picosecond),
                            "step": simulation.currentStep})


def _lj_simulation(n=40, seed=3):
    """40 LJ particles in a triclinic periodic box with a barostat at high pressure (the box shrinks)."""
    system = openmm.System()
    a, b, c = openmm.Vec3(2.2, 0, 0), openmm.Vec3(0.4, 2.2, 0), openmm.Vec3(-0.3, 0.5, 2.2)
    system.setDefaultPeriodicBoxVectors(a, b, c)
    nb = openmm.NonbondedForce()
    nb.setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
    nb.setCutoffDistance(0.9)
    for _ in range(n):
        system.addParticle(40.0)
        nb.addParticle(0.0, 0.34, 0.5)
    system.addForce(nb)
    baro = openmm.MonteCarloBarostat(2000 * u.bar, 300 * u.kelvin, 2)
    baro.setRandomNumberSeed(seed)
    system.addForce(baro)
    top = app.Topology()
    chain = top.addChain()
    for _ in range(n):
        top.addAtom("AR", app.Element.getBySymbol("Ar"), top.addResidue("AR", chain))
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 5 / u.picosecond, 0.004 * u.picosecond)
    integ.setRandomNumberSeed(seed)
    sim = app.Simulation(top, system, integ, openmm.Platform.getPlatformByName("Reference"))
    grid = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n] * 0.5 + 0.2
    sim.context.setPositions(grid)
    sim.context.setVelocitiesToTemperature(300 * u.kelvin, seed)
    return sim


def _one_replica_topology(n):
    top = md.Topology()
    chain = top.add_chain()
    for _ in range(n):
        top.add_atom("AR", md.element.argon, top.add_residue("AR", chain))
    return top


def _load(path, fmt, top):
    return md.load(path) if fmt == "h5" else md.load(path, top=top)


def _check_files(tmp_path, tag, rec, replicas, n, top, periodic):
    for fmt in FORMATS:
        for r in range(replicas):
            t = _load(str(tmp_path / f"{tag}_{r:03d}.{fmt}"), fmt, top)
            assert t.n_frames == len(rec.frames) and t.n_atoms == n, (fmt, r)
            want = np.stack([f["xyz"][r * n:(r + 1) * n] for f in rec.frames])
            err = np.abs(t.xyz - want).max()
            assert err < POS_TOL[fmt], (fmt, r, err)
            if periodic:
                boxes = np.stack([f["box"] for f in rec.frames])
                assert t.unitcell_vectors is not None, fmt
                assert np.abs(t.unitcell_vectors - boxes).max() < 2e-5, (fmt, r)
            else:
                assert t.unitcell_vectors is None, (fmt, r)
            if fmt in ("xtc", "h5"):
                assert np.allclose(t.time, [f["time"] for f in rec.frames], atol=1e-4), fmt
    h5top = md.load(str(tmp_path / f"{tag}_000.h5")).topology          # HDF5 carries its topology
    assert h5top.n_atoms == n and [a.name for a in h5top.atoms] == [a.name for a in top.atoms]


def test_packed_cg_replicas_non_periodic(tmp_path):
    from flashschnet import load_model, map_pdb
    from flashschnet.openmm import build_system, cg_topology, replica_positions_nm

    R = 3
    model = load_model(str(EXAMPLES / "trpcage_placeholder.pt"))
    mol = map_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"))
    system = build_system(mol, model, replicas=R)
    assert not system.usesPeriodicBoundaryConditions()
    integ = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.004 * u.picosecond)
    integ.setRandomNumberSeed(5)
    sim = app.Simulation(cg_topology(mol, R), system, integ, openmm.Platform.getPlatformByName("CPU"),
                         {"Threads": "1"})
    sim.context.setPositions(replica_positions_nm(mol, R))
    sim.context.setVelocitiesToTemperature(300 * u.kelvin, 5)
    top1 = cg_topology(mol, 1)
    rec = Recorder(5)
    reps = [ReplicaTrajectoryReporter(str(tmp_path / ("cg_{replica:03d}." + fmt)), 5, R, top1) for fmt in FORMATS]
    sim.reporters.extend([rec, *reps])
    sim.step(15)
    for rep in reps:
        assert rep.frames == 3
        rep.close()
    assert len(rec.frames) == 3
    # the replicas moved apart: each file is its own replica, not a copy
    assert np.abs(rec.frames[-1]["xyz"][:mol.n_beads] - rec.frames[-1]["xyz"][mol.n_beads:2 * mol.n_beads]).max() > 1e-3
    _check_files(tmp_path, "cg", rec, R, mol.n_beads, md.Topology.from_openmm(top1), periodic=False)


def test_periodic_box_follows_the_barostat(tmp_path):
    sim = _lj_simulation()
    top = _one_replica_topology(20)
    rec = Recorder(10)
    reps = [ReplicaTrajectoryReporter(str(tmp_path / ("lj_{replica:03d}." + fmt)), 10, 2, top) for fmt in FORMATS]
    sim.reporters.extend([rec, *reps])
    sim.step(60)
    for rep in reps:
        rep.close()
    boxes = np.stack([f["box"] for f in rec.frames])
    assert len(boxes) == 6
    assert np.ptp(boxes[:, 0, 0]) > 1e-3, "the barostat did not change the box: the test would prove nothing"
    assert abs(boxes[0, 2, 0]) > 0.1          # triclinic: angles are checked too
    _check_files(tmp_path, "lj", rec, 2, 20, top, periodic=True)
    # the DCD unit cell is also what our own DCD reader skips correctly
    from flashschnet.openmm.dcd import read_dcd

    xyz = read_dcd(str(tmp_path / "lj_001.dcd"))
    assert np.abs(xyz - np.stack([f["xyz"][20:] for f in rec.frames])).max() < 1e-5


@pytest.mark.parametrize("fmt", FORMATS)
def test_append_continues_the_files(tmp_path, fmt):
    sim = _lj_simulation()
    top = _one_replica_topology(20)
    rec = Recorder(10)
    pattern = str(tmp_path / ("a_{replica}." + fmt))
    rep = ReplicaTrajectoryReporter(pattern, 10, 2, top)
    sim.reporters.extend([rec, rep])
    sim.step(20)
    rep.close()
    sim.reporters.remove(rep)
    rep = ReplicaTrajectoryReporter(pattern, 10, 2, top, append=True)
    assert rep.frames == 2
    sim.reporters.append(rep)
    sim.step(20)
    rep.close()
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))
    for r in range(2):
        t = _load(pattern.format(replica=r), fmt, top)
        assert t.n_frames == 4
        want = np.stack([f["xyz"][r * 20:(r + 1) * 20] for f in rec.frames])
        assert np.abs(t.xyz - want).max() < POS_TOL[fmt]
        assert np.abs(t.unitcell_vectors - np.stack([f["box"] for f in rec.frames])).max() < 2e-5


def test_format_argument_overrides_the_extension(tmp_path):
    sim = _lj_simulation()
    rep = ReplicaTrajectoryReporter(str(tmp_path / "x_{replica}.traj"), 5, 2, _one_replica_topology(20), format="xtc")
    sim.reporters.append(rep)
    sim.step(5)
    rep.close()
    from mdtraj.formats import XTCTrajectoryFile

    with XTCTrajectoryFile(str(tmp_path / "x_1.traj")) as f:
        xyz = f.read()[0]
    assert xyz.shape == (1, 20, 3)


def test_bad_input_is_one_clear_error(tmp_path):
    top = _one_replica_topology(20)
    with pytest.raises(InputError, match=r"unknown trajectory format '\.pdb'.*\.dcd, \.xtc or \.h5"):
        ReplicaTrajectoryReporter(str(tmp_path / "r_{replica}.pdb"), 10, 2, top)
    with pytest.raises(InputError, match="unknown format"):
        ReplicaTrajectoryReporter(str(tmp_path / "r_{replica}.dcd"), 10, 2, top, format="trr")
    with pytest.raises(InputError, match=r"put \{replica\} in the path pattern"):
        ReplicaTrajectoryReporter(str(tmp_path / "r.dcd"), 10, 2, top)
    with pytest.raises(InputError, match="only field allowed"):
        ReplicaTrajectoryReporter(str(tmp_path / "r_{replica}_{run}.dcd"), 10, 2, top)
    with pytest.raises(InputError, match="does not exist"):
        ReplicaTrajectoryReporter(str(tmp_path / "r_{replica}.xtc"), 10, 2, top, append=True)
    with pytest.raises(InputError, match="interval and replicas"):
        ReplicaTrajectoryReporter(str(tmp_path / "r_{replica}.xtc"), 0, 2, top)
    # one replica: no {replica} needed
    ReplicaTrajectoryReporter(str(tmp_path / "single.dcd"), 10, 1, _one_replica_topology(40)).close()
    # atom counts that do not fit the System surface at the first step, before any frame is written
    for n_top, replicas, pattern in ((7, 2, "does not divide the System's 40 particles"),
                                     (20, 3, r"40 particles = 2 replicas of 20, but replicas=3")):
        sim = _lj_simulation()
        rep = ReplicaTrajectoryReporter(str(tmp_path / ("bad%d_{replica}.h5" % n_top)), 10, replicas,
                                        _one_replica_topology(n_top))
        sim.reporters.append(rep)
        with pytest.raises(InputError, match=pattern):
            sim.step(10)
        rep.close()
