"""Golden outputs: what main computes before a refactor, so the refactor can be shown to change nothing.

:func:`compute` returns, as named numpy arrays,

* ``model/<backend>/<precision>/<variant>/<compression>/{energy,forces}``: the mlcg oracle model A
  (``tests/data/oracles/mlcg_schnet_A.pt``) on two of its frames, for every backend (triton under Triton's
  interpreter when there is no GPU), precision, 16-bit weight variant and filter compression in :data:`CASES`
  (model units: kcal/mol, Angstrom);
* ``openmm/<network_force>/{energy,forces}``: the same model as an OpenMM force (TorchForce / PythonForce,
  packed replicas, Reference platform; kJ/mol, nm);
* ``run/cg``, ``run/tempering/<rung>``, ``run/martini``: the DCD coordinates (nm) of a 20-step
  ``flashschnet-simulate`` run (2 packed replicas), a 20-step parallel-tempering run (2 rungs) and a 20-step
  ``flashschnet-martini`` run of trp-cage (skipped, and named in ``skipped``, without ../shared's MARTINI 3 files).

``tools/maintenance/golden.py`` writes them to ``tests/data/golden/golden.npz`` with :func:`fingerprint` (the CPU, the
libraries' versions) beside them; ``tests/integration/test_golden.py`` recomputes and compares: bitwise where the
fingerprint is the one that wrote them (the same arithmetic), else within the precision's tolerance (another CPU's
vector instructions or another library version may round differently).

Everything runs on one PyTorch thread (a reduction's order, hence its rounding, depends on the thread count).
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import warnings
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared"
GOLDEN = DATA / "golden" / "golden.npz"

#: (backend, precision, variant, compression): every backend and precision on the exact network, and the weight
#: variants and compressions on the backends that run them
CASES: List[Tuple[str, str, str, str]] = (
    [(b, p, "none", "none") for b in ("reference", "torch", "triton") for p in ("single", "double")]
    + [(b, "single", v, "none") for b in ("reference", "torch", "triton") for v in ("fp16", "bf16-cast")]
    + [(b, p, "none", c) for b in ("reference", "torch") for p in ("single", "double") for c in ("float32", "bfloat16")]
    + [("triton", "single", "none", "float32"), ("torch", "single", "fp16", "float32")]
)


def fingerprint() -> Dict[str, str]:
    """What decides the rounding of a computation here: the CPU and the numerical libraries."""
    import openmm
    import torch

    flags = ""
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith(("model name", "flags")):
                flags += line
                if line.startswith("flags"):
                    break
    import hashlib

    return {"cpu": hashlib.sha256(flags.encode()).hexdigest()[:16], "machine": platform.machine(),
            "torch": torch.__version__, "openmm": openmm.__version__, "numpy": np.__version__}


def _oracle():
    import torch

    for p in (DATA / "oracles" / "mlcg_schnet_A.pt", SHARED / "oracles" / "mlcg" / "mlcg_schnet_A.pt"):
        if p.exists():
            return p, torch.load(p, weights_only=True)
    raise FileNotFoundError("mlcg_schnet_A.pt not found in tests/data/oracles/ nor ../shared/oracles/mlcg/")


def model_outputs() -> Dict[str, np.ndarray]:
    import torch

    from flashschnet import load_model
    from flashschnet.names import PRECISIONS
    from flashschnet.transforms import apply_compression, apply_variant

    path, fx = _oracle()
    pos, types = fx["positions_A"][:2], fx["bead_types"]
    out: Dict[str, np.ndarray] = {}
    for backend, precision, variant, compression in CASES:
        dtype = getattr(torch, PRECISIONS[precision])
        model = load_model(path, backend=backend, dtype=dtype).network
        model = apply_variant(apply_compression(model, compression), variant)
        model.backend = backend
        e, f = model.energy_forces(pos.to(dtype), types)
        key = f"model/{backend}/{precision}/{variant}/{compression}"
        out[key + "/energy"] = e.detach().numpy().copy()
        out[key + "/forces"] = f.detach().numpy().copy()
    return out


def openmm_outputs() -> Dict[str, np.ndarray]:
    import openmm
    import openmm.unit as u

    from flashschnet import load_model
    from flashschnet.openmm.force import make_network_force

    path, fx = _oracle()
    pos, types = fx["positions_A"][:2], fx["bead_types"]
    out: Dict[str, np.ndarray] = {}
    for network_force in ("torch", "python"):
        model = load_model(path, backend="torch").network
        system = openmm.System()
        for _ in range(pos.shape[0] * len(types)):
            system.addParticle(12.0)
        system.addForce(make_network_force(network_force, model, types, pos.shape[0]))
        ctx = openmm.Context(system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
        ctx.setPositions((pos.reshape(-1, 3).double() * 0.1).numpy())
        st = ctx.getState(getEnergy=True, getForces=True)
        out[f"openmm/{network_force}/energy"] = np.array(st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole))
        out[f"openmm/{network_force}/forces"] = st.getForces(asNumpy=True).value_in_unit(
            u.kilojoule_per_mole / u.nanometer)
        del ctx
    return out


def run_outputs(workdir: Path) -> Tuple[Dict[str, np.ndarray], List[str]]:
    """The DCD coordinates of the three short runs (run in ``workdir``) and the runs skipped, with why."""
    from flashschnet.openmm.dcd import read_dcd
    from flashschnet.scripts.martini import main as martini
    from flashschnet.scripts.simulate import main as simulate

    pdb, model = str(EXAMPLES / "1L2Y_trpcage.pdb"), str(EXAMPLES / "trpcage_placeholder.pt")
    common = ["--steps", "20", "--report-interval", "10", "--seed", "5", "--threads", "1", "--quiet"]
    exact = ["--compress", "none",         # the golden CG runs are of the exact filter network (written before tables
             #                               became the default; the tables' own outputs are the model/ keys) ...
             "--platform", "CPU"]          # ... on the CPU platform (written before Reference became a CG run's
    #                                        default; the golden test checks the arithmetic, not the defaults)
    out: Dict[str, np.ndarray] = {}
    skipped: List[str] = []
    cg = workdir / "cg"
    if simulate([pdb, "--model", model, "--out", str(cg), "--replicas", "2", *exact, *common]) != 0:
        raise RuntimeError("the CG run failed")
    for r in range(2):
        out[f"run/cg/replica_{r:03d}"] = read_dcd(str(cg / f"replica_{r:03d}.dcd"))
    pt = workdir / "tempering"
    if simulate([pdb, "--model", model, "--out", str(pt), "--temperatures", "300,360", "--exchange-interval", "5",
                 *exact, *common]) != 0:
        raise RuntimeError("the tempering run failed")
    for dcd in sorted(pt.glob("T*.dcd")):
        out[f"run/tempering/{dcd.stem}"] = read_dcd(str(dcd))
    m3 = SHARED / "martini" / "m3"
    if (m3 / "martini_v3.0.0.itp").exists():
        mr = workdir / "martini"
        if martini([pdb, "--forcefield-dir", str(m3), "--out", str(mr), *common]) != 0:
            raise RuntimeError("the MARTINI run failed")
        out["run/martini"] = read_dcd(str(mr / "trajectory.dcd"))
    else:
        skipped.append(f"run/martini: no MARTINI 3 files in {m3}")
    return out, skipped


def part_of(key: str) -> str:
    """"run" for a run's coordinates, "model" for energies and forces."""
    return "run" if key.startswith("run/") else "model"


def compute(workdir: Path, part: str = "all") -> Tuple[Dict[str, np.ndarray], List[str]]:
    """The golden outputs (see the module docstring) of ``part`` ("model": energies and forces; "run": the runs;
    "all") on one PyTorch thread; runs write into ``workdir``."""
    import torch

    if not torch.cuda.is_available():                 # the triton backend in Triton's interpreter, as in conftest
        os.environ.setdefault("TRITON_INTERPRET", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        values, skipped = {}, []
        if part in ("model", "all"):
            values.update({**model_outputs(), **openmm_outputs()})
        if part in ("run", "all"):
            runs, skipped = run_outputs(Path(workdir))
            values.update(runs)
    finally:
        torch.set_num_threads(threads)
    return values, skipped


def tolerance(key: str) -> float:
    """Relative tolerance (max |a - b| / max |b|) of ``key`` on a machine whose fingerprint differs."""
    if key.startswith("run/"):
        return 1e-4          # 20 steps of MD in float32 (CG) or mixed precision (MARTINI) from the same start
    if "/double/" in key:
        return 1e-10
    if key.startswith("openmm/"):
        return 1e-5
    return 2e-3 if any(v in key for v in ("fp16", "bf16", "bfloat16")) else 1e-5


def recompute(tmp_path_factory, part: str):
    """The golden outputs of ``part`` computed now (fails when the stored ones are missing)."""
    import pytest

    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} missing: capture it with python tools/maintenance/golden.py")
    return compute(tmp_path_factory.mktemp("golden"), part=part)


def check(values, skipped, part):
    """Compare the recomputed ``values`` of ``part`` with the stored golden arrays (see the module docstring)."""
    stored = np.load(GOLDEN)
    names = [k for k in stored.files if part_of(k) == part]
    meta = json.loads((GOLDEN.parent / "fingerprint.json").read_text())
    bitwise = meta["fingerprint"] == fingerprint()
    missing = sorted(set(names) - set(values) - {k for k in names
                                                 if any(k.startswith(s.split(":")[0]) for s in skipped)})
    assert not missing, f"golden outputs no longer computed: {missing}"
    assert not set(values) - set(names), f"new outputs without a golden value: {set(values) - set(names)}"
    differ = []
    for key in sorted(set(values) & set(names)):
        a, b = np.asarray(values[key]), stored[key]
        if a.shape != b.shape:
            differ.append(f"{key}: shape {a.shape} != {b.shape}")
        elif bitwise:
            if a.dtype != b.dtype or a.tobytes() != b.tobytes():
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).max()
                differ.append(f"{key}: not bitwise equal (max |diff| {diff:.3g})")
        else:
            rel = np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-300)
            if rel > tolerance(key):
                differ.append(f"{key}: relative difference {rel:.3g} > {tolerance(key):g}")
    assert not differ, "\n".join(differ)
    if not bitwise:
        warnings.warn(f"golden outputs compared within tolerance, not bitwise: captured on {meta['fingerprint']}, "
                      f"this machine is {fingerprint()}")
    if skipped:
        warnings.warn(f"golden outputs not recomputed here: {skipped}")
