"""``flashschnet-quantization-report``: the accuracy cost of channel-wise 16-bit weights, measured.

    flashschnet-quantization-report [--out docs] [--variants fp16,bf16,fp16-cast,bf16-cast]
                                    [--langevin-steps 10000] [--nve-steps 5000] [--nve-dt 2] [--quick]

Writes ``OUT/quantization.md`` (tables and verdicts), ``OUT/quantization.json`` (every number) and PNGs
``OUT/quantization_ranges_<model>.png`` (per-channel weight ranges), ``OUT/quantization_errors.png`` and
``OUT/quantization_nve.png``. What is measured (see :mod:`flashschnet.openmm.quant_accuracy`):

1. per output channel of every filter- and output-network matrix: largest and smallest non-zero |w|, with
   the float16 limits, and the round-trip error of each variant;
2. energies and forces of every variant in float32, through the fused CPU path and the reference backend,
   against the unquantized model in float64 (and in float32): on the mlcg oracle frames (fixture A,
   chignolin) and on frames of a Langevin run of the bundled example (trp-cage);
3. a Langevin run of ``--langevin-steps`` steps per variant (4 fs, 300 K): stable or not;
4. an NVE run per variant from one shared starting state: total-energy drift.

The issue's target -- force relative RMSE <= 1 % versus float32 for fp16 with per-channel scales, and a
stable 10,000-step run -- is checked for every variant and the report says which ones miss it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from ._cli import SEED, THREADS, check_output_dir, float_type, int_type, name_list

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PDB = "examples/1L2Y_trpcage.pdb"
DEFAULT_MODEL = "examples/trpcage_placeholder.pt"
ORACLE_CANDIDATES = ("tests/data/oracles/mlcg_schnet_A.pt", "../shared/oracles/mlcg/mlcg_schnet_A.pt")
VARIANT_NAMES = ("fp16", "bf16", "fp16-cast", "bf16-cast")
TARGET_REL_RMSE = 0.01
FP16_MIN_NORMAL = 2.0 ** -14
FP16_MAX = 65504.0


def _log(msg: str) -> None:
    print(f"flashschnet-quantization-report: {msg}", file=sys.stderr, flush=True)


def _path(p: str) -> Path:
    q = Path(p)
    return q if q.exists() or q.is_absolute() else (REPO_ROOT / q if (REPO_ROOT / q).exists() else q)


def _variants(text: str) -> List[str]:
    return name_list(text, VARIANT_NAMES, "variants")


def _backends(text: str) -> List[str]:
    return name_list(text, ("torch", "reference", "triton"), "backends")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="flashschnet-quantization-report",
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
    p.add_argument("--backends", type=_backends, default=["torch", "reference"],
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


# ------------------------------------------------------------------------------------------------- plots
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")          # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def _plot_ranges(ranges: List[Dict[str, Any]], title: str, path: Path) -> None:
    import numpy as np

    plt = _pyplot()

    n = len(ranges)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, r in zip(axes.flat, ranges):
        amax, amin = np.array(r["amax"]), np.array(r["amin_nonzero"])
        ch = np.arange(len(amax))
        ax.vlines(ch, np.where(np.isfinite(amin), amin, amax), amax, color="tab:blue", lw=1.0)
        ax.plot(ch, amax, ".", color="tab:blue", ms=3, label="max |w|")
        ax.plot(ch, np.where(np.isfinite(amin), amin, np.nan), ".", color="tab:orange", ms=3,
                label="min non-zero |w|")
        ax.axhline(FP16_MIN_NORMAL, color="tab:red", ls="--", lw=0.8, label="fp16 smallest normal")
        ax.set_yscale("log")
        ax.set_title(f"{r['name']} {tuple(r['shape'])}", fontsize=8)
        ax.set_xlabel("output channel", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6, loc="lower left")
    fig.suptitle(f"Per-output-channel weight range: {title}", fontsize=10)
    _save(fig, path)


def _plot_errors(rows: List[Dict[str, Any]], path: Path) -> None:
    import numpy as np

    plt = _pyplot()

    sel = [r for r in rows if r["backend"] == "torch" and r["variant"] != "none"]
    datasets = list(dict.fromkeys(r["dataset"] for r in sel))
    variants = list(dict.fromkeys(r["variant"] for r in sel))
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    w = 0.8 / max(len(datasets), 1)
    for k, ds in enumerate(datasets):
        vals = [next((r["force_rel_rmse_vs_fp32"] for r in sel if r["dataset"] == ds and r["variant"] == v), np.nan)
                for v in variants]
        ax.bar(np.arange(len(variants)) + k * w, vals, w, label=ds)
    ax.axhline(TARGET_REL_RMSE, color="tab:red", ls="--", lw=1, label="target 1 % (fp16)")
    ax.set_xticks(np.arange(len(variants)) + w * (len(datasets) - 1) / 2)
    ax.set_xticklabels(variants)
    ax.set_yscale("log")
    ax.set_ylabel("force relative RMSE vs float32")
    ax.legend(fontsize=7)
    ax.set_title("Force error of the 16-bit variants (fused CPU path, float32 arithmetic)", fontsize=9)
    _save(fig, path)


def _plot_nve(nve: Dict[str, Dict[str, Any]], path: Path) -> None:
    import numpy as np

    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    for variant, r in nve.items():
        e = np.array(r["total_energy_kJ_mol"])
        if len(e):
            ax.plot(r["time_ps"], e - e[0], lw=0.9,
                    label=f"{variant} ({r['drift_kJ_mol_ns']:+.3g} ± {r['drift_stderr_kJ_mol_ns']:.2g} kJ/mol/ns)")
    ax.set_xlabel("time (ps)")
    ax.set_ylabel("E_total - E_total(0) (kJ/mol)")
    ax.legend(fontsize=7)
    ax.set_title("NVE total energy, same starting state for every variant", fontsize=9)
    _save(fig, path)


# ---------------------------------------------------------------------------------------------- markdown
def _g(x: Optional[float], spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def format_markdown(report: Dict[str, Any]) -> str:
    s, m = report["settings"], report["machine"]
    L: List[str] = []
    L.append("# Channel-wise 16-bit weights: measured accuracy")
    L.append("")
    L.append(f"Generated by `{s['command']}` on {m['date']} ({m['cpu']}, torch {m['torch']}, openmm {m['openmm']}, "
             f"{m['threads']} threads). Every number below is in `quantization.json` beside this file.")
    L.append("")
    L.append("What is quantized: the filter networks (`A1` [F, K], `A2` [F, F] of each interaction block) and every "
             "Linear of the output network; biases, embedding, `lin1`/`lin2`/`lin` stay float32. Each weight "
             "matrix is stored as 16-bit values with one float32 scale per output channel "
             "(`s_c = max|W_c| / 2^14` for fp16, `max|W_c|` for bf16); `-cast` variants are the plain cast "
             "(scale 1). Arithmetic and accumulation stay float32 in every backend "
             "(`flashschnet.quantize`, `flashschnet-simulate --quantize`).")
    L.append("")
    L.append("## Verdict")
    L.append("")
    for v in report["verdicts"]:
        L.append(f"- {v}")
    L.append("")
    L.append("## Energy and force errors")
    L.append("")
    L.append("Float32 arithmetic. *vs fp32*: against the unquantized model in float32 through the same backend; "
             "*vs truth*: against the unquantized model in float64 (reference backend). Energies in kcal/mol, "
             "forces in kcal/mol/Å (the models' units). `none` is the unquantized float32 model; `fp16-all` / "
             "`bf16-all` run the whole reference network in 16-bit PyTorch (activations too), for context.")
    L.append("")
    L.append("The last column divides a backend's force error (vs truth) by the plain-PyTorch reference backend's "
             "on the same 16-bit weights: our standard asks for at most 2.")
    L.append("")
    L.append("| dataset | variant | backend | force rel. RMSE vs fp32 | force max abs vs fp32 | energy MAE vs fp32 "
             "| force rel. RMSE vs truth | energy MAE vs truth | energy max vs truth | error / reference's |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    plain = {(r["dataset"], r["variant"]): r["force_rel_rmse"] for r in report["frame_errors"]
             if r["backend"] == "reference"}
    for r in report["frame_errors"]:
        p = plain.get((r["dataset"], r["variant"]))
        ratio = r["force_rel_rmse"] / p if p else None
        L.append(f"| {r['dataset']} | {r['variant']} | {r['backend']} | {_g(r.get('force_rel_rmse_vs_fp32'))} | "
                 f"{_g(r.get('force_max_abs_vs_fp32'))} | {_g(r.get('energy_mae_vs_fp32'))} | "
                 f"{_g(r['force_rel_rmse'])} | {_g(r['energy_mae'])} | {_g(r['energy_max'])} | {_g(ratio, '.4f')} |")
    L.append("")
    L.append("![force errors](quantization_errors.png)")
    L.append("")
    L.append("## Langevin stability")
    L.append("")
    L.append(f"`flashschnet-simulate` settings: {s['pdb']} with {s['model']}, 4 fs, 300 K, 1/ps, seed {s['seed']}, "
             f"{s['langevin_steps']} steps, platform {s['platform']}. Stable = completed, every CG bond within 25 % "
             "of its PDB length in every frame, mean temperature (after the first fifth) within 240-360 K. ns/day is "
             "that run's wall clock (whatever else the machine was doing), not a benchmark: speed is measured by "
             "`flashschnet-benchmark --quantize`.")
    L.append("")
    L.append("| variant | steps | stable | max bond deviation | mean T (K) | ns/day |")
    L.append("|---|---|---|---|---|---|")
    for r in report["langevin"]:
        L.append(f"| {r['variant']} | {r['steps']} | {'yes' if r['stable'] else 'NO'} | "
                 f"{_g(r.get('max_bond_deviation'), '.1%')} | {_g(r.get('mean_temperature_K'), '.1f')} | "
                 f"{_g(r.get('ns_per_day'), '.3g')} |")
    L.append("")
    L.append("## NVE energy drift")
    L.append("")
    L.append(f"Velocity Verlet, {s['nve_dt']} fs, {s['nve_steps']} steps, platform {s['platform']}; every variant "
             "starts from the same positions (last frame of the float32 Langevin run) and the same velocities "
             "(300 K, seeded). Forces are the exact gradient of each variant's own energy, so quantization "
             "changes the potential, not energy conservation.")
    L.append("")
    L.append("Drift = least-squares slope of the total energy ± its standard error; a slope within two standard "
             "errors of zero is no measurable drift at this run length (the total energy fluctuates by the "
             "integrator's shadow-Hamiltonian error, the same for every variant).")
    L.append("")
    L.append("| variant | drift ± SE (kJ/mol/ns) | measurable drift? | total-energy fluctuation, std (kJ/mol) | "
             "completed |")
    L.append("|---|---|---|---|---|")
    for variant, r in report["nve"].items():
        sig = abs(r["drift_kJ_mol_ns"]) > 2 * r["drift_stderr_kJ_mol_ns"]
        L.append(f"| {variant} | {r['drift_kJ_mol_ns']:+.3g} ± {r['drift_stderr_kJ_mol_ns']:.2g} | "
                 f"{'yes' if sig else 'no'} | {_g(r['fluctuation_kJ_mol'])} | {'yes' if r['completed'] else 'NO'} |")
    L.append("")
    L.append("![NVE](quantization_nve.png)")
    L.append("")
    L.append("## Per-channel weight ranges and round-trip error")
    L.append("")
    L.append("Round-trip relative error of each matrix (max over elements and RMS), per variant.")
    L.append("")
    L.append("| model | matrix | variant | max rel. error | RMS rel. error |")
    L.append("|---|---|---|---|---|")
    same = report.get("same_weights", {})
    for model_name, rows in report["weight_errors"].items():
        if model_name in same:
            continue
        for r in rows:
            if "error" in r:
                L.append(f"| {model_name} | {r['matrix']} | {r['variant']} | {r['error']} | |")
            else:
                L.append(f"| {model_name} | {r['matrix']} | {r['variant']} | {_g(r['max_rel'])} | {_g(r['rms_rel'])} |")
    L.append("")
    for later, earlier in same.items():
        L.append(f"`{later}` has the same filter- and output-network weights as `{earlier}` (its rows and plot "
                 "are not repeated).")
        L.append("")
    for model_name, png in report["range_plots"].items():
        L.append(f"![{model_name}]({png})")
        L.append("")
    for note in report["notes"]:
        L.append(f"Note: {note}")
        L.append("")
    return "\n".join(L)


# -------------------------------------------------------------------------------------------------- main
def _verdicts(report: Dict[str, Any]) -> List[str]:
    out = []
    stab = {r["variant"]: r for r in report["langevin"]}
    for v in report["settings"]["variants"]:
        worst = max((r["force_rel_rmse_vs_fp32"] for r in report["frame_errors"]
                     if r["variant"] == v and "force_rel_rmse_vs_fp32" in r), default=None)
        ok_err = worst is not None and worst <= TARGET_REL_RMSE
        st = stab.get(v)
        ok_stab = bool(st and st["stable"])
        steps = st["steps"] if st else 0
        nve = report["nve"].get(v)
        drift = "" if nve is None else (
            f"; NVE drift {nve['drift_kJ_mol_ns']:+.3g} ± {nve['drift_stderr_kJ_mol_ns']:.2g} kJ/mol/ns "
            f"({'MEASURABLE' if abs(nve['drift_kJ_mol_ns']) > 2 * nve['drift_stderr_kJ_mol_ns'] else 'not measurable'}"
            f" over {nve['steps']} steps)")
        out.append(f"**{v}**: worst force relative RMSE vs float32 {_g(worst)} "
                   f"({'within' if ok_err else 'MISSES'} the 1 % target); {steps}-step Langevin run "
                   f"{'stable' if ok_stab else 'NOT stable'}{drift}.")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from flashschnet.errors import FlashSchNetError, InputError

    try:
        check_output_dir(args.out, "--out")
        if args.from_json is not None:
            src = Path(args.from_json)
            if not src.is_file():
                raise InputError(f"--from-json {src}: {'not a file' if src.exists() else 'no such file'}")
            try:
                report = json.loads(src.read_text())
                render(report, Path(args.out))
            except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
                raise InputError(f"--from-json {src}: not a quantization.json of this tool ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
            return 0
        return _measure(args, argv)
    except FlashSchNetError as exc:
        _log(f"error: {exc}")
        return 2


def _measure(args, argv) -> int:
    import mdtraj as md
    import numpy as np
    import openmm
    import torch

    import flashschnet
    from flashschnet.errors import InputError
    from flashschnet.nn.quant import apply_variant
    from flashschnet.openmm import quant_accuracy as qa
    from flashschnet.scripts._cli import cpu_model
    from flashschnet.openmm.units import conversion_factors

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.langevin_steps, args.report_interval, args.nve_steps, args.nve_interval = 200, 50, 100, 10
    backends = args.backends
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pdb, model_path = _path(args.pdb), _path(args.model)
    for what, p in (("--pdb", pdb), ("--model", model_path)):
        if not p.exists():
            raise InputError(f"{what} {p}: no such file")
    if args.oracle is not None and not (args.oracle.strip() and _path(args.oracle).is_file()):
        raise InputError(f"--oracle {args.oracle!r}: {'not a file' if _path(args.oracle).exists() else 'no such file'}"
                         "; leave --oracle out to use the bundled one")
    platforms = [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]
    if args.platform not in platforms:
        raise InputError(f"OpenMM platform {args.platform!r} is not available here; available: {', '.join(platforms)}")
    flashschnet.map_pdb(str(pdb))        # a bad --pdb fails now, not after the weight and frame stages
    oracle = _path(args.oracle) if args.oracle else next((_path(c) for c in ORACLE_CANDIDATES if _path(c).exists()), None)
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
                              command="flashschnet-quantization-report " + " ".join(argv if argv is not None
                                                                                    else sys.argv[1:]))
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


def _same_weights(report: Dict[str, Any]) -> Dict[str, str]:
    """Models whose quantized matrices are identical to an earlier model's: {later: earlier}."""
    seen: Dict[str, str] = {}
    same: Dict[str, str] = {}
    for name, rg in report["channel_ranges"].items():
        key = json.dumps(rg, sort_keys=True)
        if key in seen:
            same[name] = seen[key]
        else:
            seen[key] = name
    return same


def render(report: Dict[str, Any], out: Path) -> None:
    """Plots, verdicts, ``quantization.md`` and ``quantization.json`` in ``out`` from a measured report."""
    from flashschnet.openmm.quant_accuracy import drift_fit

    out.mkdir(parents=True, exist_ok=True)
    for r in report["nve"].values():          # reports written before the fit's standard error existed
        if "drift_stderr_kJ_mol_ns" not in r:
            fit = drift_fit(r["time_ps"], r["total_energy_kJ_mol"])
            r["drift_kJ_mol_ns"], r["drift_stderr_kJ_mol_ns"] = fit["slope"], fit["stderr"]
    same = _same_weights(report)
    report["same_weights"] = same
    report["range_plots"] = {}
    for name, rg in report["channel_ranges"].items():
        if name in same:
            continue
        png = f"quantization_ranges_{name}.png"
        _plot_ranges(rg, name, out / png)
        report["range_plots"][name] = png
    _plot_errors(report["frame_errors"], out / "quantization_errors.png")
    _plot_nve(report["nve"], out / "quantization_nve.png")
    report["verdicts"] = _verdicts(report)
    (out / "quantization.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "quantization.md").write_text(format_markdown(report) + "\n")
    for v in report["verdicts"]:
        print(v.replace("**", ""))
    print(f"wrote {out / 'quantization.md'}, {out / 'quantization.json'} and the PNGs")


if __name__ == "__main__":
    sys.exit(main())
