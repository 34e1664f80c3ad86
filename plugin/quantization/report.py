"""The accuracy cost of channel-wise 16-bit weights, measured: the report generator behind the maintainer's
command (run from a checkout; it was the ``flashschnet-quantization-report`` command)

    python tools/benchmarks/quantization_report.py [--out docs] [--variants fp16,bf16,fp16-cast,bf16-cast]
                                        [--langevin-steps 10000] [--nve-steps 5000] [--nve-dt 2] [--quick]

(:func:`main`). Writes ``OUT/quantization.md`` (tables and verdicts), ``OUT/quantization.json`` (every number)
and PNGs ``OUT/quantization_ranges_<model>.png`` (per-channel weight ranges), ``OUT/quantization_errors.png`` and
``OUT/quantization_nve.png`` (:mod:`.render`). What is measured (see :mod:`.accuracy`):

1. per output channel of every filter- and output-network matrix: largest and smallest non-zero |w|, with
   the float16 limits, and the round-trip error of each variant;
2. energies and forces of every variant in float32, through the fused CPU path and the reference backend,
   against the unquantized model in float64 (and in float32): on the mlcg oracle frames (fixture A,
   chignolin) and on frames of a Langevin run of the bundled example (trp-cage);
3. a Langevin run of ``--langevin-steps`` steps per variant (4 fs, 300 K): stable or not;
4. an NVE run per variant from one shared starting state: total-energy drift.

The issue's target -- force relative RMSE <= 1 % versus float32 for fp16 with per-channel scales, and a
stable 10,000-step run -- is checked for every variant and the report says which ones miss it. Relative paths
(``--pdb``, ``--model``, ``--oracle``) are taken from the current directory, else from ``main``'s ``root`` (the
tool passes its checkout).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch  # before openmm/openmmtorch

from flashschnet.names import VARIANTS
from flashschnet.scripts._cli import (SEED, THREADS, backend_list, check_output_dir, float_type, from_json, int_type,
                                      name_list)

from .render import render

PROG = "tools/benchmarks/quantization_report.py"
DEFAULT_PDB = "examples/1L2Y_trpcage.pdb"
DEFAULT_MODEL = "examples/trpcage_placeholder.pt"
ORACLE_CANDIDATES = ("tests/data/oracles/mlcg_schnet_A.pt", "../shared/oracles/mlcg/mlcg_schnet_A.pt")
VARIANT_NAMES = tuple(v for v in VARIANTS if v != "none")


def _log(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def _path(p: str, root: Optional[Path]) -> Path:
    """``p`` as given if it exists or is absolute, else relative to ``root`` if there (else as given)."""
    q = Path(p)
    if q.exists() or q.is_absolute() or root is None:
        return q
    return root / q if (root / q).exists() else q


def _variants(text: str) -> List[str]:
    return name_list(text, VARIANT_NAMES, "variants")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the accuracy of channel-wise 16-bit (fp16/bf16) filter- and output-network weights "
                    "against float32/float64: per-channel weight ranges, energy and force errors on the mlcg "
                    "oracle frames and on simulation frames, Langevin stability and NVE energy drift. Writes a "
                    "Markdown report, JSON and PNG plots.")
    p.add_argument("--out", default="quantization-report", help="output directory (default quantization-report)")
    p.add_argument("--pdb", default=DEFAULT_PDB, help=f"all-atom structure of the example (default {DEFAULT_PDB})")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model of the example (default {DEFAULT_MODEL})")
    p.add_argument("--oracle", default=None,
                   help="mlcg oracle file (fixture A) whose frames and model are also evaluated (default: "
                        "tests/data/oracles/mlcg_schnet_A.pt or ../shared/oracles/mlcg/; skipped if absent)")
    p.add_argument("--variants", type=_variants, default=list(VARIANT_NAMES),
                   help="comma-separated 16-bit variants (default fp16,bf16,fp16-cast,bf16-cast)")
    p.add_argument("--backends", type=backend_list, default=["torch", "reference"],
                   help="backends evaluated on the frames (default torch,reference; add triton on CUDA or under "
                        "TRITON_INTERPRET=1)")
    p.add_argument("--langevin-steps", type=int_type(1), default=10000,
                   help="Langevin steps per variant (default 10000)")
    p.add_argument("--report-interval", type=int_type(1, 2**31 - 1), default=500,
                   help="steps between saved frames (default 500)")
    p.add_argument("--nve-steps", type=int_type(1), default=5000, help="NVE steps per variant (default 5000)")
    p.add_argument("--nve-dt", type=float_type(0.0, 50.0, low_open=True), default=2.0,
                   help="NVE time step in fs, at most 50 (default 2)")
    p.add_argument("--nve-interval", type=int_type(1), default=50, help="steps between NVE energy samples (default 50)")
    p.add_argument("--platform", default="CPU", help="OpenMM platform of the runs (default CPU)")
    p.add_argument("--threads", type=THREADS, default=None, help="PyTorch CPU threads")
    p.add_argument("--seed", type=SEED, default=3, help="seed of the runs and of the NVE velocities (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="tiny run for tests: 200 Langevin steps, 100 NVE steps (numbers not meaningful)")
    p.add_argument("--from-json", default=None, metavar="JSON",
                   help="do not measure: re-render the Markdown and PNGs into --out from a quantization.json")
    p.add_argument("--keep-runs", action="store_true", help="keep the Langevin runs' directories (default: deleted)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[List[str]] = None, root: Optional[Path] = None) -> int:
    """The command line (``argv``; default ``sys.argv[1:]``); ``root``: where relative paths that are not in the
    current directory are looked up (a checkout). Exit status: 0, or 2 after a one-line error."""
    args = build_parser().parse_args(argv)
    from flashschnet.errors import FlashSchNetError

    try:
        check_output_dir(args.out, "--out")
        if args.from_json is not None:
            from_json(args.from_json, "--from-json", "a quantization.json of this tool",
                      lambda report: render(report, Path(args.out)))
            return 0
        return _measure(args, argv, root)
    except FlashSchNetError as exc:
        _log(f"error: {exc}")
        return 2


def _measure(args, argv, root: Optional[Path]) -> int:
    import mdtraj as md
    import numpy as np
    import openmm

    import flashschnet
    from flashschnet.errors import InputError
    from flashschnet.openmm.benchmark.machine import cpu_model
    from flashschnet.openmm.units import conversion_factors
    from flashschnet.transforms import apply_variant

    from . import accuracy as qa

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.langevin_steps, args.report_interval, args.nve_steps, args.nve_interval = 200, 50, 100, 10
    backends = args.backends
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pdb, model_path = _path(args.pdb, root), _path(args.model, root)
    for what, p in (("--pdb", pdb), ("--model", model_path)):
        if not p.exists():
            raise InputError(f"{what} {p}: no such file")
    if args.oracle is not None and not (args.oracle.strip() and _path(args.oracle, root).is_file()):
        why = "not a file" if _path(args.oracle, root).exists() else "no such file"
        raise InputError(f"--oracle {args.oracle!r}: {why}"
                         "; leave --oracle out to use the bundled one")
    platforms = [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]
    if args.platform not in platforms:
        raise InputError(f"OpenMM platform {args.platform!r} is not available here; available: {', '.join(platforms)}")
    flashschnet.map_pdb(str(pdb))        # a bad --pdb fails now, not after the weight and frame stages
    oracle = _path(args.oracle, root) if args.oracle else next(
        (_path(c, root) for c in ORACLE_CANDIDATES if _path(c, root).exists()), None)
    notes: List[str] = []
    if oracle is None or not oracle.exists():
        notes.append("the mlcg oracle file was not found, so the oracle frames were not evaluated")
        oracle = None

    stages = ["weights", "oracle frames", "langevin", "simulation frames", "nve", "plots"]
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(stages) + len(args.variants) * 2, unit="stage", dynamic_ncols=True)

    def tick(what: str) -> None:
        if bar is not None:
            bar.set_description(what)
            bar.update(1)

    report: Dict[str, Any] = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "torch": torch.__version__,
                    "openmm": openmm.version.version, "threads": torch.get_num_threads()},
        "frame_errors": [], "langevin": [], "nve": {}, "weight_errors": {}, "range_plots": {}, "notes": notes,
    }
    report["settings"].update(pdb=pdb.name, model=model_path.name, oracle=oracle.name if oracle else None,
                              command=f"python {PROG} " + " ".join(argv if argv is not None else sys.argv[1:]))
    # 1. weights -------------------------------------------------------------------------------------------
    models = {model_path.stem: model_path}
    if oracle is not None:
        models[oracle.stem] = oracle
    ranges = {}
    for name, p in models.items():
        m = flashschnet.load_model(p, backend="reference", dtype=torch.float64)
        ranges[name] = qa.channel_ranges(m)
        report["weight_errors"][name] = qa.weight_errors(m)
    report["channel_ranges"] = ranges
    tick("weights")
    variants = ["none"] + list(args.variants)
    # 2. oracle frames -------------------------------------------------------------------------------------
    if oracle is not None:
        fx = torch.load(oracle, weights_only=True)
        report["frame_errors"] += qa.frame_errors(str(oracle), fx["positions_A"].double(), fx["bead_types"],
                                                  variants, backends, dataset=f"mlcg oracle frames ({oracle.stem}, "
                                                  f"{fx['positions_A'].shape[0]} x {fx['positions_A'].shape[1]} beads)")
    tick("oracle frames")
    # 3. Langevin runs (the float32 one also provides the simulation frames) --------------------------------
    work = Path(tempfile.mkdtemp(prefix="flashschnet-qreport-"))
    try:
        for v in variants:
            r = qa.langevin_check(str(pdb), str(model_path), v, args.langevin_steps, str(work / v), seed=args.seed,
                                  report_interval=args.report_interval, threads=args.threads, platform=args.platform)
            report["langevin"].append({k: val for k, val in r.items() if k != "trajectory"})
            if v == "none":
                traj_path = r.get("trajectory")
            tick(f"langevin {v}")
        if not report["langevin"][0]["completed"]:
            raise InputError(f"the float32 Langevin run of {model_path} was not stable: {report['langevin'][0].get('error')}")
        # 4. simulation frames -----------------------------------------------------------------------------------
        model32 = flashschnet.load_model(model_path, dtype=torch.float32)
        length_to_nm, _ = conversion_factors(model32.units)
        traj = md.load(str(traj_path), top=str(work / "none" / "topology.pdb"))
        frames = torch.as_tensor(traj.xyz, dtype=torch.float64) / length_to_nm
        mol = flashschnet.map_pdb(str(pdb), mapping=model32.config.get("cg_mapping") or "5bead")
        types = torch.as_tensor(mol.bead_types)
        report["frame_errors"] += qa.frame_errors(str(model_path), frames, types, variants, backends,
                                                  dataset=f"Langevin frames ({model_path.stem} on {pdb.stem}, "
                                                  f"{frames.shape[0]} x {frames.shape[1]} beads)")
        tick("simulation frames")
        # 5. NVE from the last float32 frame, same velocities for all -----------------------------------------
        rng = np.random.default_rng(args.seed)
        masses = np.asarray(mol.masses, dtype=np.float64)
        kT = 0.0083144626 * 300.0
        vel = rng.normal(size=(mol.n_beads, 3)) * np.sqrt(kT / masses)[:, None]
        vel -= (masses[:, None] * vel).sum(0) / masses.sum()
        start = traj.xyz[-1].astype(np.float64)
        for v in variants:
            m = apply_variant(model32, v)
            report["nve"][v] = qa.nve_drift(mol, m, model32.priors, start, vel, args.nve_dt, args.nve_steps,
                                            args.nve_interval, platform=args.platform)
            tick(f"nve {v}")
    finally:                                   # also when a stage fails: no stray run directories
        if not args.keep_runs:
            shutil.rmtree(work, ignore_errors=True)
    if args.keep_runs:
        report["notes"].append(f"the Langevin runs are kept in {work}")
    render(report, out)
    tick("plots")
    if bar is not None:
        bar.close()
    return 0

