"""OpenMM-ML: ``MLPotential("flashschnet", modelPath=...)`` through the ``openmmml.potentials`` entry point gives
the System that :func:`flashschnet.openmm.build_system` gives (same energies and forces, CG masses), on every
platform; bad topologies and options are one-line errors."""
from __future__ import annotations

from importlib.metadata import entry_points

import numpy as np
import pytest
import torch

from tests.conftest import EXAMPLES, platforms

openmm = pytest.importorskip("openmm")
openmmml = pytest.importorskip("openmmml")
import openmm.app as app  # noqa: E402
import openmm.unit as u  # noqa: E402
from openmmml import MLPotential  # noqa: E402

from flashschnet.cg import map_pdb  # noqa: E402
from flashschnet.checkpoint import load_model  # noqa: E402
from flashschnet.errors import InputError  # noqa: E402
from flashschnet.openmm import build_system, cg_topology, replica_positions_nm, write_cg_pdb  # noqa: E402

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")
MODEL = str(EXAMPLES / "trpcage_placeholder.pt")
KJ, KJ_NM = u.kilojoule_per_mole, u.kilojoule_per_mole / u.nanometer


@pytest.fixture(scope="module")
def mol():
    return map_pdb(PDB)


def _energy_forces(system, pos_nm, platform="Reference"):
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName(platform))
    ctx.setPositions(pos_nm)
    st = ctx.getState(getEnergy=True, getForces=True)
    return st.getPotentialEnergy().value_in_unit(KJ), st.getForces(asNumpy=True).value_in_unit(KJ_NM)


def _perturbed(mol, replicas, seed=0):
    return replica_positions_nm(mol, replicas) + np.random.default_rng(seed).normal(0.0, 0.01, (replicas * mol.n_beads, 3))


def test_the_entry_point_registers_the_potential():
    names = {ep.name: ep.value for ep in entry_points(group="openmmml.potentials")}
    assert names.get("flashschnet") == "flashschnet.openmm.mlpotential:FlashSchNetPotentialImplFactory"
    assert "flashschnet" in MLPotential._implFactories


@pytest.mark.parametrize("platform", platforms())
@pytest.mark.parametrize("replicas", [1, 3])
def test_create_system_equals_build_system(mol, platform, replicas):
    torch.set_num_threads(1)
    system = MLPotential("flashschnet", modelPath=MODEL).createSystem(cg_topology(mol, replicas), replicas=replicas)
    ours = build_system(mol, load_model(MODEL), replicas=replicas)
    assert system.getNumParticles() == replicas * mol.n_beads
    masses = [system.getParticleMass(i).value_in_unit(u.dalton) for i in range(system.getNumParticles())]
    assert masses == list(np.tile(mol.masses, replicas))      # CG masses, not OpenMM-ML's element masses
    assert any(isinstance(f, openmm.CMMotionRemover) for f in system.getForces())
    pos = _perturbed(mol, replicas)
    e1, f1 = _energy_forces(system, pos, platform)
    e2, f2 = _energy_forces(ours, pos, platform)
    assert e1 == e2 and np.array_equal(f1, f2)


def test_topology_pdb_of_a_run_with_positions_and_a_short_simulation(tmp_path, mol):
    path = tmp_path / "topology.pdb"
    write_cg_pdb(mol, path)
    pdb = app.PDBFile(str(path))
    potential = MLPotential("flashschnet", modelPath=MODEL, precision="double")
    system = potential.createSystem(pdb.topology, positions=pdb.positions)
    e1, _ = _energy_forces(system, _perturbed(mol, 1))
    e2, _ = _energy_forces(build_system(mol, load_model(MODEL, dtype=torch.float64)), _perturbed(mol, 1))
    assert abs(e1 - e2) < 1e-9 * max(1.0, abs(e2))
    integrator = openmm.LangevinMiddleIntegrator(300 * u.kelvin, 1 / u.picosecond, 0.004 * u.picoseconds)
    integrator.setRandomNumberSeed(3)
    sim = app.Simulation(pdb.topology, system, integrator, openmm.Platform.getPlatformByName("Reference"))
    sim.context.setPositions(pdb.positions)
    sim.step(200)
    pos = sim.context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
    assert np.isfinite(pos).all()
    assert np.linalg.norm(pos[mol.bonds[:, 0]] - pos[mol.bonds[:, 1]], axis=1).max() < 0.5
    assert not np.allclose(pos, np.asarray(pdb.positions.value_in_unit(u.nanometer)))


def test_priors_option(mol, tmp_path):
    none = MLPotential("flashschnet", modelPath=MODEL, priors=None).createSystem(cg_topology(mol))
    model = MLPotential("flashschnet", modelPath=MODEL).createSystem(cg_topology(mol))
    assert none.getNumForces() < model.getNumForces()
    e_none, _ = _energy_forces(none, _perturbed(mol, 1))
    e_net, _ = _energy_forces(build_system(mol, load_model(MODEL), priors=None), _perturbed(mol, 1))
    assert e_none == e_net


def test_a_model_without_priors_is_a_warning_as_simulate_notes_it(mol, tmp_path):
    import warnings

    from flashschnet.checkpoint import save_checkpoint

    bare = tmp_path / "bare.pt"
    save_checkpoint(bare, load_model(MODEL), priors=None)
    with pytest.warns(UserWarning, match=r"MLPotential\('flashschnet'\): the model has no priors; running the "
                                         r"network alone .*priors=None to say the network runs alone"):
        MLPotential("flashschnet", modelPath=str(bare)).createSystem(cg_topology(mol))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)          # said, so silent; and a model with priors: silent
        MLPotential("flashschnet", modelPath=str(bare), priors=None).createSystem(cg_topology(mol))
        MLPotential("flashschnet", modelPath=MODEL).createSystem(cg_topology(mol))


def test_matmul_and_cuda_graph_options_reach_the_network(mol, monkeypatch):
    """matmul / cudaGraph are passed on to the model the network force runs."""
    import flashschnet.checkpoint as ckpt

    seen = {}
    original = ckpt.load_model

    def recording(*a, **kw):
        seen.update(kw)
        return original(*a, **kw)

    monkeypatch.setattr(ckpt, "load_model", recording)
    pot = MLPotential("flashschnet", modelPath=MODEL, backend="torch", matmul="bf16", cudaGraph=True)
    system = pot.createSystem(cg_topology(mol))
    assert seen["matmul"] == "bf16" and seen["cuda_graph"] is True
    assert system.getNumParticles() == mol.n_beads


def test_compress_options_reach_the_network(mol, monkeypatch):
    """compress / compressKnots give the model the forces are built from filter tables, before quantize; by default
    float32 tables (as flashschnet-simulate), compress="none" the exact filter network."""
    import flashschnet.openmm.system as system_module

    seen = {}
    monkeypatch.setattr(system_module, "add_model_forces", lambda system, mol, model, *a, **kw: seen.update(m=model))
    MLPotential("flashschnet", modelPath=MODEL, compress="float16", compressKnots=64,
                quantize="fp16").createSystem(cg_topology(mol))
    assert seen["m"].config["compression"] == {"kind": "quintic", "knots": 64, "dtype": "float16"}
    assert seen["m"].config["quantization"] == {"dtype": "float16", "per_channel": True}
    MLPotential("flashschnet", modelPath=MODEL).createSystem(cg_topology(mol))      # the default: float32 tables
    assert seen["m"].config["compression"] == {"kind": "quintic", "knots": 256, "dtype": "float32"}
    MLPotential("flashschnet", modelPath=MODEL, compress="none").createSystem(cg_topology(mol))
    assert seen["m"].config["compression"] is None


def test_compress_options_give_the_compressed_model(mol):
    """compress / compressKnots: the System runs the model with filter tables (applied before quantize), as
    build_system does with the same model compressed by hand."""
    from flashschnet.transforms import apply_compression, apply_variant

    system = MLPotential("flashschnet", modelPath=MODEL, compress="float16", compressKnots=64,
                         quantize="fp16").createSystem(cg_topology(mol))
    model = apply_variant(apply_compression(load_model(MODEL), "float16", 64), "fp16")
    assert model.config["compression"] == {"kind": "quintic", "knots": 64, "dtype": "float16"}
    pos = _perturbed(mol, 1)
    e1, f1 = _energy_forces(system, pos)
    e2, f2 = _energy_forces(build_system(mol, model), pos)
    e3, _ = _energy_forces(MLPotential("flashschnet", modelPath=MODEL).createSystem(cg_topology(mol)), pos)
    assert e1 == e2 and np.array_equal(f1, f2) and e1 != e3


def test_converted_transferable_mlcg_model_matches_mlcg(tmp_path):
    """The real mlcg file (tests/data/oracles/real/), converted, through OpenMM-ML on the CG topology of
    chignolin: energies and forces equal mlcg's own."""
    from flashschnet.scripts.convert import main as convert
    from tests.helpers.real_oracles import S_MODEL, S_ORACLE, chignolin_pdb

    out = tmp_path / "s.pt"
    assert convert([str(S_MODEL), str(out)]) == 0
    o = torch.load(S_ORACLE, weights_only=True)
    cln = map_pdb(chignolin_pdb(tmp_path))
    system = MLPotential("flashschnet", modelPath=str(out), precision="double").createSystem(
        cg_topology(cln), removeCMMotion=False)
    for frame in range(2):
        e, f = _energy_forces(system, o["positions_A"][frame].numpy() * 0.1)
        assert abs(e / 4.184 - float(o["energies"][frame])) < 1e-8 * max(1.0, abs(float(o["energies"][frame])))
        assert np.abs(f / 41.84 - o["forces"][frame].numpy()).max() < 1e-6


def _swap_cb_and_c(mol):
    """A CG topology of ``mol`` with the CB and C beads of the first non-glycine residue swapped."""
    top = app.Topology()
    chain = top.addChain("A")
    order = list(range(mol.n_beads))
    i = mol.bead_names.index("CB")
    order[i], order[i + 1] = order[i + 1], order[i]
    residues = {}
    for k in order:
        r = int(mol.bead_residue[k])
        if r not in residues:
            res = mol.residues[r]
            residues[r] = top.addResidue(res.resname, chain, str(res.resseq))
        top.addAtom(mol.bead_names[k], app.Element.getBySymbol("C"), residues[r])
    return top


@pytest.mark.parametrize("make, kwargs, message", [
    (lambda m: app.PDBFile(PDB).topology, {}, "304 atoms per replica, but its 5bead CG mapping has 97 beads"),
    (lambda m: cg_topology(m, 2), {"replicas": 3}, "cannot hold 3 equal replicas"),
    (lambda m: cg_topology(m, 2), {}, "2 identical copies of one molecule: if they are packed replicas, pass replicas=2"),
    (_swap_cb_and_c, {}, "the beads must come in the mapping's order"),
    (lambda m: cg_topology(m), {"cutoff": 1.0}, "unknown option(s) cutoff"),
])
def test_bad_topologies_and_options_are_one_line_errors(mol, make, kwargs, message):
    with pytest.raises(InputError) as exc:
        MLPotential("flashschnet", modelPath=MODEL).createSystem(make(mol), **kwargs)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "needs modelPath="),
    ({"modelPath": MODEL, "precision": "half"}, "precision must be"),
    ({"modelPath": MODEL, "quantize": "int4"}, "int4"),
    ({"modelPath": MODEL, "matmul": "int8"}, "matmul must be one of"),
    ({"modelPath": MODEL, "compress": "fp16"}, "compress must be one of auto, none, float32, float16, bfloat16"),
    ({"modelPath": MODEL, "compress": "none", "compressKnots": 64}, "compressKnots needs a compression"),
    ({"modelPath": MODEL, "precision": "double", "compressKnots": 64}, "compressKnots needs a compression (compress "
                                                                       "auto runs the exact filters here)"),
    ({"modelPath": MODEL, "compress": "float32", "compressKnots": 2.5}, "compressKnots must be an integer"),
    ({"modelPath": MODEL, "temperature": 300}, "unknown option(s) temperature"),
])
def test_bad_potential_options(kwargs, message):
    with pytest.raises(InputError, match=None) as exc:
        MLPotential("flashschnet", **kwargs)
    assert message in str(exc.value)


def test_mixed_systems_are_refused(mol):
    potential = MLPotential("flashschnet", modelPath=MODEL)
    top = cg_topology(mol)
    mm = openmm.System()
    for m in mol.masses:
        mm.addParticle(float(m))
    with pytest.raises(InputError, match="createMixedSystem with a subset"):
        potential.createMixedSystem(top, mm, list(range(10)))


@pytest.mark.parametrize("mapping", ["5bead", "ca"])
@pytest.mark.parametrize("name", ["1L2Y_trpcage.pdb", "1VII_villin.pdb", "4PTI_bpti.pdb"])
def test_cg_molecule_from_topology_inverts_cg_topology(name, mapping):
    """The molecule read back from a CG topology (with and without positions) has the beads, types, masses,
    bonds and chains of the mapped PDB."""
    from tests.conftest import STRUCTURES

    from flashschnet.openmm import cg_molecule_from_topology

    path = STRUCTURES / name if (STRUCTURES / name).exists() else EXAMPLES / name
    mol = map_pdb(path, mapping=mapping)
    top = cg_topology(mol, 2)
    for positions in (None, np.tile(mol.positions, (2, 1)) * 0.1):
        back = cg_molecule_from_topology(top, positions=positions, replicas=2, mapping=mapping)
        assert back.bead_names == mol.bead_names
        assert np.array_equal(back.bead_types, mol.bead_types) and np.array_equal(back.masses, mol.masses)
        assert np.array_equal(back.bonds, mol.bonds)
        assert np.array_equal(back.chain_of_residue, mol.chain_of_residue)
        assert [r.resname for r in back.residues] == [r.resname for r in mol.residues]
    assert np.allclose(back.positions, mol.positions)
