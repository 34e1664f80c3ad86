"""The compression report's Markdown, rendered from its JSON (every number and every verdict comes from the
measured report; nothing is typed by hand). Part of the maintainer's tool
``python tools/benchmarks/compression_report.py``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

DTYPE_ORDER = ("float64", "float32", "float16", "bfloat16")


def _e(x: Optional[float], digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}e}"


def _f(x: Optional[float], digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _pm(m: Dict[str, float], fmt=_e) -> str:
    return f"{fmt(m['mean'])} ± {fmt(m['se'])}"


def _kib(b: int) -> str:
    return f"{b / 1024:g}"


def _find(rows: List[Dict[str, Any]], system: str, kind: str, knots: int, dtype: str) -> Optional[Dict[str, Any]]:
    return next((r for r in rows if (r["system"], r["kind"], r["knots"], r["dtype"]) == (system, kind, knots, dtype)),
                None)


def _table(header: List[str], body: List[List[str]]) -> List[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + \
           ["| " + " | ".join(r) + " |" for r in body]


# ------------------------------------------------------------------------------------------------ sections
def _measured(rep: Dict[str, Any]) -> List[str]:
    sw, d = rep["sweep"], rep["defaults"]
    info = sw["systems"]
    grid = sw["grid_points"]
    check = max(s["backend_check"] for s in info)
    out = ["## What was measured", "",
           "`flashschnet.compress(model, knots, dtype, kind)` replaces every interaction block's filter network "
           "W(r) (the MLP of the radial basis times the cosine envelope) by a piecewise Hermite table of the pair "
           "distance on [0, r_end], knots uniform (format: `flashschnet.nn.table`). *Cubic* stores W and dW/dr at "
           "each knot (C1), *quintic* also d²W/dr² (C2). Table bytes per block = knots × Q × F × itemsize "
           "(Q = 2 cubic, 3 quintic; 16-bit tables add one float32 scale per channel and order, not counted).",
           "",
           f"* **Error sweep**: interpolants {', '.join(sw['kinds'])} × knots {', '.join(map(str, sw['knots']))} × "
           f"table dtypes {', '.join(sw['dtypes'])}, plus cubic tables with 1.5× the knots of each quintic one (the "
           "same bytes), each built with the error check switched off (`tolerance=inf`). Truth: the exact network "
           "in float64 through the `reference` backend (mlcg's autograd path). Compressed models: float64 weights "
           "and arithmetic through the fused CPU path (`torch` backend), so only the table error (interpolation and "
           f"storage rounding) is measured; the two paths agree on the default table to {_e(check)} (force max "
           "relative difference).",
           f"* **W**: the worst block (all channels) of W and of dW/dr, on a grid of {grid} points uniform on "
           "[0, r_end) (interval midpoints, not aligned with the knots), and on the pair distances below r_end "
           "that occur in the frames (where the model is evaluated: the grid also covers distances no frame "
           "samples, e.g. below bonded lengths; a random subset of "
           f"{sw['max_frame_pairs']} where there are more).",
           "* **Relative errors**: max = max |error| / max |exact|, RMS = RMS(error) / RMS(exact), over all frames, "
           "beads and components (energies: over frames; also the largest absolute energy error, kcal/mol).",
           f"* **Dynamics**: NVE energy drift and Langevin stability of the exact model and of the default "
           f"compression ({d['kind']}, {d['knots']} knots); see their sections.", ""]
    body = [[s["label"], f"`{s['model']}`", s["frames"], str(s["beads"]), _f(s["r_end"], 2),
             f"{s['blocks']} × {s['filters']}", str(s["frame_pairs"]) + ("" if s["frame_pairs_used"] == s["frame_pairs"] else
             f" ({s['frame_pairs_used']} used)"), _kib(s["filter_network_bytes"])] for s in info]
    out += _table(["system", "model", "frames", "beads", "r_end (Å)", "blocks × filters", "frame pairs < r_end",
                   "exact filter network, float32 (KiB/block)"], body)
    return out + [""]


def _run(rep: Dict[str, Any]) -> List[str]:
    m, sec = rep["machine"], rep["seconds"]
    return ["## How it was run", "", "```", rep["command"], "```", "",
            f"{m['date']}: {m['cpu']} ({m['cores']} cores available, PyTorch on {m['torch_threads']} thread(s)), "
            f"{m['os']}, Python {m['python']}, torch {m['torch']}, OpenMM {m['openmm']}. No GPU used. Run time: "
            f"sweep {sec['sweep']:.0f} s, dynamics {sec['dynamics']:.0f} s, total {sec['total']:.0f} s.", ""]


def _sweep(rep: Dict[str, Any]) -> List[str]:
    rows = rep["sweep"]["rows"]
    out = ["## Error sweep", "",
           "Relative errors against the exact float64 network (definitions above). KiB: the tables of the whole "
           "model (all blocks).", ""]
    header = ["interpolant", "knots", "table", "KiB", "W max", "W RMS", "dW/dr RMS", "W RMS (frame r)", "E max",
              "E RMS", "max abs ΔE (kcal/mol)", "F max", "F RMS"]
    for s in rep["sweep"]["systems"]:
        mine = sorted((r for r in rows if r["system"] == s["name"]),
                      key=lambda r: (DTYPE_ORDER.index(r["dtype"]), r["kind"], r["knots"]))
        body = [[r["kind"], str(r["knots"]), r["dtype"], _kib(r["model_bytes"]), _e(r["W"]["grid"]["W_max"]),
                 _e(r["W"]["grid"]["W_rms"]), _e(r["W"]["grid"]["dW_rms"]), _e(r["W"]["frames"]["W_rms"]),
                 _e(r["energy_max"]), _e(r["energy_rms"]), _e(r["energy_max_abs"]), _e(r["force_max"]),
                 _e(r["force_rms"])] for r in mine]
        out += [f"### {s['label']}", ""] + _table(header, body) + [""]
    return out


def _equal_bytes(rep: Dict[str, Any]) -> List[List[Any]]:
    """``[system, dtype, block bytes, quintic row, cubic row]`` for every quintic table with a cubic one of the
    same bytes."""
    rows, pairs = rep["sweep"]["rows"], []
    for s in rep["sweep"]["systems"]:
        for q in rows:
            if q["system"] == s["name"] and q["kind"] == "quintic":
                c = _find(rows, s["name"], "cubic", q["knots"] * 3 // 2, q["dtype"])
                if c is not None and c["block_bytes"] == q["block_bytes"]:
                    pairs.append([s, q["dtype"], q["block_bytes"], q, c])
    return pairs


def _interpolant(rep: Dict[str, Any]) -> List[str]:
    body = [[s["label"], dt, _kib(b), str(q["knots"]), _e(q["force_rms"]), _e(q["W"]["grid"]["W_rms"]),
             str(c["knots"]), _e(c["force_rms"]), _e(c["W"]["grid"]["W_rms"]), f"{c['force_rms'] / q['force_rms']:.3g}"]
            for s, dt, b, q, c in _equal_bytes(rep)]
    return ["## Cubic vs quintic at equal table bytes", ""] + _table(
        ["system", "table", "KiB/block", "quintic knots", "quintic F RMS", "quintic W RMS", "cubic knots",
         "cubic F RMS", "cubic W RMS", "cubic/quintic F RMS"], body) + [""]


def _sixteen(rep: Dict[str, Any]) -> List[str]:
    d, rows = rep["defaults"], rep["sweep"]["rows"]
    body = []
    for s in rep["sweep"]["systems"]:
        for dt in rep["sweep"]["dtypes"]:
            r = _find(rows, s["name"], d["kind"], d["knots"], dt)
            if r is not None:
                body.append([s["label"], dt, _kib(r["model_bytes"]), _e(r["W"]["grid"]["W_rms"]),
                             _e(r["energy_rms"]), _e(r["force_max"]), _e(r["force_rms"])])
    if not body:
        return []
    return [f"## Table dtypes at the default ({d['kind']}, {d['knots']} knots)", ""] + _table(
        ["system", "table", "KiB/model", "W RMS", "E RMS", "F max", "F RMS"], body) + [""]


def _nve(dyn: Dict[str, Any]) -> List[str]:
    s = dyn["settings"]
    names = list(dyn["nve"])
    out = ["## NVE energy drift", "",
           f"System: {dyn['system']} (`{dyn['model']}`, {dyn['dof']} degrees of freedom). The network runs as an "
           f"openmm-torch TorchForce with {dyn['network_dtype']} weights (`{dyn['backend']}` backend) on OpenMM's "
           f"{dyn['platform']} platform (double precision), the priors as native OpenMM forces. Start: the exact "
           f"model after {s['equil_steps']} Langevin steps ({s['langevin_dt']:g} fs, 300 K, 1/ps, seed {s['seed']}) "
           f"from the first oracle frame, the same for every run. {s['nve_runs']} velocity-Verlet runs per model, "
           f"{s['nve_steps']} steps of {s['nve_dt']:g} fs ({s['nve_steps'] * s['nve_dt'] / 1000:g} ps), Maxwell-"
           f"Boltzmann velocities at 300 K from seeds {', '.join(map(str, dyn['nve_seeds']))} (the same seeds for "
           f"every model); total energy every {s['nve_interval']} steps. Drift: slope of a straight-line fit per "
           "run; fluctuation: RMS of the residuals about it; mean ± standard error over the runs. The paired "
           "difference is the per-seed drift minus the exact model's.", ""]
    body = []
    for n in names:
        r = dyn["nve"][n]
        body.append([n, _pm(r["drift"]), _pm(r["drift_kT_per_dof_ns"]),
                     _pm(r["diff_vs_reference"]) if "diff_vs_reference" in r else "—",
                     _pm(r["fluctuation_kJ_mol"]), f"{r['ms_per_step']:.2f}",
                     "yes" if all(x["completed"] for x in r["runs"]) else "no"])
    out += _table(["model", "drift (kJ/mol/ns)", "drift (kT/ns per DOF)", "paired difference (kJ/mol/ns)",
                   "fluctuation (kJ/mol)", "ms/step", "all runs completed"], body) + ["", "Per run (kJ/mol/ns):", ""]
    per = [[str(seed)] + [_e(dyn["nve"][n]["runs"][k]["drift_kJ_mol_ns"]) for n in names]
           for k, seed in enumerate(dyn["nve_seeds"])]
    return out + _table(["seed"] + names, per) + [""]


def _langevin(dyn: Dict[str, Any]) -> List[str]:
    s = dyn["settings"]
    body = [[n, f"{r['steps_done']} / {r['steps']}", "yes" if r["finished"] else f"no ({r['error']})",
             f"{_f(r['potential_mean_kJ_mol'], 2)} ± {_f(r['potential_std_kJ_mol'], 2)}",
             f"{_f(r['temperature_mean_K'])} ± {_f(r['temperature_std_K'])}", _f(r["force_max_kcal_mol_A"], 2),
             f"{r['ms_per_step']:.2f}"] for n, r in dyn["langevin"].items()]
    return ["## Langevin stability", "",
            f"Same system and platform; LangevinMiddleIntegrator, 300 K, 1/ps, {s['langevin_dt']:g} fs, "
            f"{s['langevin_steps']} steps from the first oracle frame, velocities and random numbers from seed "
            f"{s['seed']} for both models; sampled every {s['langevin_interval']} steps (means and standard "
            "deviations over the samples after the first tenth; largest force over all samples).", ""] + _table(
        ["model", "steps", "finished, no NaN", "potential energy (kJ/mol)", "temperature (K)",
         "max \\|F\\| (kcal/mol/Å)", "ms/step"], body) + [""]


def _reading(rep: Dict[str, Any]) -> List[str]:
    d, rows, dyn = rep["defaults"], rep["sweep"]["rows"], rep["dynamics"]
    systems = rep["sweep"]["systems"]
    out = ["## Reading", ""]
    # interpolant
    pairs = _equal_bytes(rep)
    if pairs:
        ratios = [c["force_rms"] / q["force_rms"] for _, _, _, q, c in pairs]
        best = "quintic" if min(ratios) > 1 else "cubic" if max(ratios) < 1 else None
        verdict = (f"so **{best}** is the more accurate interpolant per byte at every size measured" if best else
                   "so neither interpolant wins at every size")
        per_dtype = []
        for dt in DTYPE_ORDER:
            r = [c["force_rms"] / q["force_rms"] for _, t, _, q, c in pairs if t == dt]
            if r:
                per_dtype.append(f"{min(r):.3g}–{max(r):.3g} × with {dt} tables")
        out.append(f"* **Interpolant.** At equal table bytes the cubic table's force RMS error is "
                   f"{'; '.join(per_dtype)} ({len(pairs)} comparisons, {len(systems)} system(s), "
                   f"{min(q['knots'] for *_, q, _ in pairs)}–{max(q['knots'] for *_, q, _ in pairs)} quintic knots), "
                   f"{verdict}. The default interpolant is {d['kind']}"
                   + ("." if best in (None, d["kind"]) else " — **not** the one this measurement favours."))
    # default knots
    q32 = {s["name"]: {r["knots"]: r["force_rms"] for r in rows if r["system"] == s["name"] and r["kind"] == d["kind"]
                       and r["dtype"] == "float32"} for s in systems}
    knots = sorted(set.intersection(*(set(v) for v in q32.values())))
    meets = [n for n in knots if all(q32[s][n] <= d["force_bound"] for s in q32)]
    if d["knots"] in knots:
        per = "; ".join(f"{s['label']} {_e(q32[s['name']][d['knots']])}" for s in systems)
        worst = max(q32[s][d["knots"]] for s in q32)
        r0 = _find(rows, systems[0]["name"], d["kind"], d["knots"], "float32")
        text = (f"* **Default knots.** With the default {d['kind']} float32 table of {d['knots']} knots "
                f"({_kib(r0['model_bytes'])} KiB per model; the float32 weights of `{systems[0]['model']}`'s exact filter "
                f"networks: {_kib(systems[0]['filter_network_bytes'] * systems[0]['blocks'])} KiB) the force relative "
                "RMS error "
                f"is {per}: at worst {_e(worst)}, "
                f"{'%.3g' % (d['force_bound'] / worst)} × below the {d['force_bound']:g} bound.")
    else:
        text = f"* **Default knots.** The default {d['knots']} knots were not in this sweep."
    if meets:
        w = max(q32[s][meets[0]] for s in q32)
        text += (f" The fewest knots in the sweep that meet the bound on every system: {meets[0]} (worst {_e(w)}, a "
                 f"margin of {d['force_bound'] / w:.3g} ×).")
    else:
        text += " No knot count in the sweep meets the bound on every system."
    out.append(text)
    # where the W error sits: the whole grid vs the distances the frames sample
    dt_w = "float64" if "float64" in rep["sweep"]["dtypes"] else rep["sweep"]["dtypes"][0]
    kn = min(rep["sweep"]["knots"])
    bits = []
    for s in systems:
        r = _find(rows, s["name"], d["kind"], kn, dt_w)
        if r is not None and r["W"]["grid"]["W_max_at"] is not None:
            g, f = r["W"]["grid"], r["W"]["frames"]
            bits.append(f"{s['label']}: W RMS {_e(g['W_rms'])} on the grid, {_e(f['W_rms'])} on the frame distances "
                        f"({s['frame_r_min']:.2f}–{s['frame_r_max']:.2f} Å); the largest grid error at r = "
                        f"{g['W_max_at']:.2f} Å" + (" (no frame samples it)" if g["W_max_at"] < s["frame_r_min"] else ""))
    if bits:
        out.append(f"* **Where W's error sits** ({d['kind']} {dt_w}, {kn} knots): " + "; ".join(bits) + ". The force "
                   "and energy errors follow the error at the distances the frames sample.")
    # 16-bit
    parts = []
    for dt in ("float16", "bfloat16"):
        err = [r for r in rows if r["kind"] == d["kind"] and r["dtype"] == dt]
        if not err:
            continue
        at = [r for r in err if r["knots"] == d["knots"]] or err
        ref = [_find(rows, r["system"], r["kind"], r["knots"], "float32") for r in at]
        worst = max(r["force_rms"] for r in at)
        by_knots: Dict[int, float] = {}
        for r in err:
            by_knots[r["knots"]] = max(by_knots.get(r["knots"], 0.0), r["force_rms"])
        ks = sorted(by_knots)
        trend = by_knots[ks[-1]] / by_knots[ks[0]]
        how = "grows" if trend > 1.5 else "falls" if trend < 1 / 1.5 else "stays about the same"
        f32 = max(x["force_rms"] for x in ref if x)
        parts.append(f"{dt} at {at[0]['knots']} knots: force RMS error up to {_e(worst)} ({worst / f32:.3g} × "
                     f"float32's {_e(f32)}), E RMS up to {_e(max(r['energy_rms'] for r in at))}; with the knots it "
                     f"{how} ({', '.join(_e(by_knots[n]) for n in ks)} at {', '.join(map(str, ks))} knots, worst "
                     f"system), the best {dt} table in the sweep being {ks[min(range(len(ks)), key=lambda i: by_knots[ks[i]])]} "
                     "knots" + (": the storage rounding, not the interpolation, limits it (rounding noise in the "
                                "stored values turns into a derivative error of order eps·|W|/h)" if how == "grows" else ""))
    if parts:
        out.append("* **16-bit tables** halve the table bytes. Their cost is accuracy: " + "; ".join(parts) +
                   f". `compress` accepts them with its per-dtype tolerances ({', '.join(f'{k} {v:g}' for k, v in d['tolerance'].items())} "
                   "relative RMS of W and dW/dr).")
    # drift
    nv = dyn["nve"]
    names = list(nv)
    ex = nv[names[0]]["drift"]
    bits = []
    def largest(n):
        return max(abs(r["drift_kJ_mol_ns"]) for r in nv[n]["runs"])

    for n in names[1:]:
        diff = nv[n]["diff_vs_reference"]
        same = abs(diff["mean"]) <= 2 * diff["se"]
        bits.append(f"{n}: {_pm(nv[n]['drift'])} kJ/mol/ns, paired difference {_pm(diff)} "
                    + ("(within 2 standard errors of zero over these runs)" if same else
                       "(more than 2 standard errors from zero: a measurable difference)")
                    + f", largest per-run |drift| {_e(largest(n))} (exact: {_e(largest(names[0]))})")
    zero = abs(ex["mean"]) <= 2 * ex["se"]
    out.append(f"* **NVE drift** ({dyn['settings']['nve_runs']} × {dyn['settings']['nve_steps'] * dyn['settings']['nve_dt'] / 1000:g} ps, "
               f"{dyn['settings']['nve_dt']:g} fs): exact {_pm(ex)} kJ/mol/ns "
               f"({'consistent with zero' if zero else 'not consistent with zero'} at 2 standard errors); "
               + "; ".join(bits) + ".")
    # stability
    lg = dyn["langevin"]
    ln = list(lg)
    fin = all(r["finished"] for r in lg.values())
    desc = "; ".join(f"{n}: potential {_f(r['potential_mean_kJ_mol'], 2)} ± {_f(r['potential_std_kJ_mol'], 2)} "
                     f"kJ/mol, {_f(r['temperature_mean_K'])} K, max |F| {_f(r['force_max_kcal_mol_A'], 2)} kcal/mol/Å"
                     for n, r in lg.items())
    out.append(f"* **Stability.** {lg[ln[-1]]['steps']}-step Langevin runs ({dyn['settings']['langevin_dt']:g} fs): "
               + ("every run finished without NaN" if fin else "**not every run finished**") + f" ({desc}).")
    return out + [""]


def _default(rep: Dict[str, Any]) -> List[str]:
    """What runs by default (``compress="auto"``, :func:`flashschnet.options.resolve_compression`) and what it costs,
    from this report's numbers for the default table (float32)."""
    d, rows, systems = rep["defaults"], rep["sweep"]["rows"], rep["sweep"]["systems"]
    at = [r for r in (_find(rows, s["name"], d["kind"], d["knots"], "float32") for s in systems) if r]
    if not at:
        return []
    worst = lambda key: max(r[key] for r in at)                  # noqa: E731
    out = ["## The default: float32 tables", "",
           f"`flashschnet-simulate`, `flashschnet-compare`, OpenMM-ML (`MLPotential(\"flashschnet\", ...)`) and "
           "`flashschnet.openmm.build_system` compute with **float32 filter tables** by default (`--compress auto`, "
           f"{d['kind']}, {d['knots']} knots) wherever the fused path runs in float32 (the `torch` backend on CPUs, "
           "`triton` on CUDA); `--backend reference`, `--precision double`, `--quantize` and `--matmul` keep the "
           "exact filter network (`flashschnet.options.resolve_compression`). What it costs, measured below against "
           f"the exact network in float64: force relative RMS error at most {_e(worst('force_rms'))} and largest "
           f"force error at most {_e(worst('force_max'))} of the largest force, energy relative RMS error at most "
           f"{_e(worst('energy_rms'))} ({len(at)} systems; table arithmetic in float64, so the table's own error) -- "
           "well below the rounding of the exact network computed in float32 (2.2e-5 of the largest force on the "
           "mlcg oracle's frames: the correctness table of benchmarks.md)."]
    nv = rep["dynamics"]["nve"]
    name = next((n for n in nv if "float32" in n), None)
    if name is not None:
        diff = nv[name]["diff_vs_reference"]
        out[-1] += (f" NVE drift: {_pm(nv[name]['drift'])} kJ/mol/ns against the exact network's "
                    f"{_pm(nv[next(iter(nv))]['drift'])} (paired difference {_pm(diff)}).")
    out += ["", "The tables are built once per model file (about 0.1 s, 1-2 s in a fresh process) and cached by the "
            "file's sha256 in `$FLASHSCHNET_CACHE_DIR/tables/` (default `~/.cache/flashschnet/tables/`; "
            "`flashschnet.tablecache`); a run's `note:` line says so, `run.json` records `compress`, "
            "`compress_knots` and `compress_default`. `--compress none` (`compress=\"none\"` in Python) runs the "
            "exact filter network; run directories written before this default resume exact.", ""]
    return out


def render(rep: Dict[str, Any]) -> str:
    """The Markdown report of a measured report dict (see :func:`compression_report.measure`)."""
    lines = ["# Filter compression: accuracy, energy drift and stability", "",
             "Generated by `tools/benchmarks/compression_report.py` (rendered from its JSON, `compression.json`); "
             "do not edit by hand: rerun the command below.", ""]
    if rep.get("quick"):
        lines += ["> **Quick mode**: a tiny sweep and a few dozen dynamics steps, for tests; the dynamics numbers "
                  "are not meaningful.", ""]
    lines += _default(rep) + _measured(rep) + _run(rep) + _reading(rep) + _sweep(rep) + _interpolant(rep) + _sixteen(rep)
    lines += _nve(rep["dynamics"]) + _langevin(rep["dynamics"])
    if rep.get("notes"):
        lines += ["## Notes", ""] + [f"* {n}" for n in rep["notes"]] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"
