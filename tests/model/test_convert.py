"""flashschnet.convert (flashschnet-convert): mlcg pickles converted without mlcg, checked against energies and
forces that mlcg itself computed (tests/data/oracles/real/, see its README.txt), and refusal of pickles that
would run code. The restricted unpickler alone (flashschnet.mlcg_pickle): tests/model/test_mlcg_pickle.py; the
term tuples and type-table priors of a new molecule: tests/model/priors/test_tuples.py and test_type_parameters.py."""
from __future__ import annotations

import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from tests.conftest import EXAMPLES, SHARED
from flashschnet.checkpoint import build_model, load_model
from flashschnet.convert import convert_mlcg
from flashschnet.priors import specialize_prior_tables
from flashschnet.errors import InputError
from flashschnet.priors import per_term_energy, prior_energy_forces
from flashschnet.scripts.convert import main
from tests.helpers.model_files import RunsCode
from tests.helpers.real_oracles import REAL, S_MODEL, S_ORACLE, chignolin_pdb, load_oracle

CA_ORACLE = REAL / "real_cln_ca.pt"
CA_MODEL = SHARED / "oracles" / "mlcg" / "real" / "real_cln_ca_model.pt"     # not copied: another project's file
ENTRY = Path(sys.executable).parent / "flashschnet-convert"


def _ca_model():
    if not CA_MODEL.exists():
        pytest.skip(f"{CA_MODEL} not found (../shared/ is absent); the real mlcg file is not bundled")
    return CA_MODEL


def test_published_layout_network_and_type_table_priors_match_mlcg():
    o = load_oracle(S_ORACLE)
    ckpt = convert_mlcg(S_MODEL)
    assert ckpt["units"] == {"length": "angstrom", "energy": "kcal/mol"} and ckpt["priors"] is None
    assert len(ckpt["prior_tables"]) == 51
    model = build_model(ckpt, dtype=torch.float64)
    pos, types = o["positions_A"], o["bead_types"]
    e, f = model.energy_forces(pos, types)
    assert torch.allclose(e, o["per_term_energies"]["SchNet"], rtol=0, atol=1e-10)
    # mlcg keeps no tuples in these files: use the oracle's (mlcg's chignolin neighbour lists)
    tuples = {name: t["index_mapping"].t() for name, t in o["prior_terms"].items()}
    prior = specialize_prior_tables(ckpt["prior_tables"], tuples, types, mapping="5bead")
    terms = per_term_energy(prior, pos)
    for name, ref in o["per_term_energies"].items():
        if name == "SchNet":
            continue
        ours = terms.get(name, torch.zeros_like(ref))      # mlcg's empty terms (no chignolin tuple) are 0
        assert torch.allclose(ours, ref, rtol=0, atol=1e-10), name
    ep, fp = prior_energy_forces(prior, pos)
    assert torch.allclose(e + ep, o["energies"], rtol=0, atol=1e-10)
    assert torch.allclose(f + fp, o["forces"], rtol=0, atol=1e-10)


def test_specialized_real_file_matches_mlcg_per_term_and_in_total(tmp_path):
    o = load_oracle(CA_ORACLE)
    out = tmp_path / "cln_ca.pt"
    assert main([str(_ca_model()), str(out)]) == 0
    model = load_model(out, dtype=torch.float64)              # our checkpoint: weights_only=True
    assert model.config["cg_mapping"] == "ca" and model.priors.fingerprint == ("ca", tuple(o["bead_types"].tolist()))
    assert model.prior_tables is None
    pos, types = o["positions_A"], o["bead_types"]
    e, f = model.energy_forces(pos, types)
    assert torch.allclose(e, o["per_term_energies"]["SchNet"], rtol=0, atol=1e-10)
    terms = per_term_energy(model.priors, pos)
    assert set(terms) == set(o["per_term_energies"]) - {"SchNet"}
    for name, ref in terms.items():
        assert torch.allclose(ref, o["per_term_energies"][name], rtol=0, atol=1e-10), name
    ep, fp = prior_energy_forces(model.priors, pos)
    assert torch.allclose(e + ep, o["energies"], rtol=0, atol=1e-10)
    assert torch.allclose(f + fp, o["forces"], rtol=0, atol=1e-10)
    m32 = load_model(out)                                     # float32, as mlcg ran the untouched file
    e32, _ = m32.energy_forces(pos.float(), types)
    assert torch.allclose(e32.double() + ep, o["energies_float32"], rtol=0, atol=2e-3)


def test_converted_checkpoint_round_trips_with_its_tables(tmp_path):
    out = tmp_path / "s.pt"
    assert main([str(S_MODEL), str(out)]) == 0
    raw = torch.load(out, weights_only=True)                  # plain data only
    model = load_model(out, dtype=torch.float64)
    assert [t["name"] for t in model.prior_tables] == [t["name"] for t in raw["prior_tables"]]
    again = tmp_path / "again.pt"
    from flashschnet.checkpoint import save_checkpoint

    save_checkpoint(again, model, priors=None, metadata=model.metadata)
    reread = torch.load(again, weights_only=True)
    for a, b in zip(raw["prior_tables"], reread["prior_tables"]):
        assert a["name"] == b["name"] and torch.equal(a["tables"]["keys"], b["tables"]["keys"])


def _archive(path, payload: bytes, prefix="evil"):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{prefix}/data.pkl", payload)
        z.writestr(f"{prefix}/version", "3\n")


class _Evals:
    def __reduce__(self):
        return (eval, ("1+1",))


@pytest.mark.parametrize("make, refused", [
    (lambda m: RunsCode(m), "system"),
    (lambda m: _Evals(), "eval"),
    (lambda m: {"model": torch.nn.Linear}, "torch.nn.modules.linear.Linear"),   # a class: stubbed, then not a SumOut
])
def test_code_running_pickles_are_refused_and_nothing_runs(tmp_path, make, refused):
    marker = tmp_path / "ran"
    bad = tmp_path / "bad.pt"
    _archive(bad, pickle.dumps(make(marker), protocol=2))
    with pytest.raises(InputError) as err:
        convert_mlcg(bad)
    msg = str(err.value)
    assert "\n" not in msg and str(bad) in msg
    if refused in ("system", "eval"):
        assert "refuses to load" in msg and refused in msg
    else:
        assert "not an mlcg SumOut" in msg
    assert not marker.exists()


@pytest.mark.parametrize("content, message", [
    (b"", "not a torch zip archive"),
    (b"junk" * 100, "not a torch zip archive"),
])
def test_unreadable_files(tmp_path, content, message):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    with pytest.raises(InputError, match=message):
        convert_mlcg(bad)
    plain = tmp_path / "plain.pt"
    torch.save({"a": torch.zeros(2)}, plain)
    with pytest.raises(InputError, match="not an mlcg SumOut"):
        convert_mlcg(plain)
    truncated = tmp_path / "trunc.pt"
    truncated.write_bytes(S_MODEL.read_bytes()[:20000])
    with pytest.raises(InputError):
        convert_mlcg(truncated)


def test_cli_entry_point(tmp_path):
    res = subprocess.run([str(ENTRY), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "INPUT" in res.stdout.upper() and "--force" in res.stdout
    bad = tmp_path / "bad.pt"
    _archive(bad, pickle.dumps(RunsCode(tmp_path / "ran"), protocol=2))
    res = subprocess.run([str(ENTRY), str(bad), str(tmp_path / "o.pt")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "refuses to load" in res.stderr
    assert not (tmp_path / "o.pt").exists() and not (tmp_path / "ran").exists()
    out = tmp_path / "s.pt"
    res = subprocess.run([str(ENTRY), str(S_MODEL), str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "51 type-table prior terms" in res.stderr
    res = subprocess.run([str(ENTRY), str(S_MODEL), str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "--force" in res.stderr


def test_converted_transferable_model_in_openmm_equals_mlcg(tmp_path):
    """PDB -> 5-bead map -> System with the converted network (TorchForce) and its type-table priors applied to
    the molecule (native forces): OpenMM's energy and forces equal mlcg's totals."""
    import openmm
    import openmm.unit as u

    from flashschnet.cg import map_pdb
    from flashschnet.openmm import build_system

    o = load_oracle(S_ORACLE)
    out = tmp_path / "s.pt"
    assert main([str(S_MODEL), str(out)]) == 0
    model = load_model(out, dtype=torch.float64)
    mol = map_pdb(chignolin_pdb(tmp_path), mapping="5bead")
    system = build_system(mol, model)
    ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    for frame in range(3):
        ctx.setPositions(o["positions_A"][frame].numpy() * 0.1)
        st = ctx.getState(getEnergy=True, getForces=True)
        e = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole) / 4.184
        f = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer) / 41.84
        assert abs(e - float(o["energies"][frame])) < 1e-8 * max(1.0, abs(float(o["energies"][frame])))
        assert abs(f - o["forces"][frame].numpy()).max() < 1e-6


def test_simulate_runs_a_converted_transferable_model(tmp_path, capsys):
    from flashschnet.scripts.simulate import main as simulate

    out = tmp_path / "s.pt"
    assert main([str(S_MODEL), str(out)]) == 0
    rc = simulate([str(EXAMPLES / "1L2Y_trpcage.pdb"), "--model", str(out), "--steps", "20", "--report-interval",
                   "10", "--out", str(tmp_path / "run"), "--quiet", "--seed", "3", "--threads", "1"])
    assert rc == 0, capsys.readouterr().err
    assert (tmp_path / "run" / "replica_000.dcd").exists()
