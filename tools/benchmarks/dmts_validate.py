"""Distilled multiple time stepping against single stepping: stability and the same equilibrium
(:mod:`flashschnet.openmm.benchmark.dmts`), on one protein, with real runs of flashschnet-simulate.

    python tools/benchmarks/dmts_validate.py --model examples/trpcage_trained.pt --pdb examples/1L2Y_trpcage.pdb \\
        --inner inner.pt --candidates 5:2.5,6:2 --ns 1 --replicas 4 --out /tmp/dmts --json docs/dmts-trpcage.json

Runs two single-stepping references at 4 fs (seeds 1 and 2: their difference is the noise floor) and each
candidate: OUTER:INNER (fs) with the inner model, or DT alone (single stepping at DT fs), ``--replicas`` packed
replicas each, ``--jobs`` runs at a time (each with ``--threads``); then prints, per candidate, the kinetic
temperature check and the Jensen-Shannon divergences next to the references' own, and writes everything to
``--json`` and the overlap figure beside it (``--json`` with ``.png``: the histograms of every run). Run again
with the same arguments to continue interrupted runs (each resumes bitwise from its checkpoint).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def simulate(args, out, seed, extra):
    steps_dt = extra.get("outer", extra.get("dt", 4.0))
    steps = int(round(args.ns * 1e6 / steps_dt))
    interval = max(steps // args.frames, 1)
    cmd = [sys.executable, "-m", "flashschnet.scripts.simulate", args.pdb, "--model", args.model, "--out", out,
           "--replicas", str(args.replicas), "--threads", str(args.threads), "--seed", str(seed), "--quiet",
           "--steps", str(interval * args.frames), "--report-interval", str(interval), "--compress", args.compress]
    if "outer" in extra:
        cmd += ["--mts", args.inner, "--outer-dt", f"{extra['outer']:g}", "--dt", f"{extra['inner']:g}"]
    elif "dt" in extra:
        cmd += ["--dt", f"{extra['dt']:g}"]
    if os.path.exists(os.path.join(out, "run.json")):
        cmd.append("--resume")      # an interrupted run goes on (bitwise); a finished one is left as it is
    r = subprocess.run(cmd, capture_output=True, text=True)
    return out, r.returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--pdb", required=True)
    p.add_argument("--inner", required=True, help="inner model (flashschnet-distill)")
    p.add_argument("--candidates", default="6:2",
                   help="comma-separated: OUTER:INNER (fs) for DMTS with the inner model, or DT (fs) alone for "
                        "single stepping at DT")
    p.add_argument("--ns", type=float, default=1.0, help="simulated ns per replica of every run")
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--frames", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--compress", default="float32")
    p.add_argument("--out", required=True)
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    from flashschnet.openmm.benchmark.dmts import compare_runs, summary_lines

    os.makedirs(args.out, exist_ok=True)
    jobs = [(os.path.join(args.out, "reference_a"), 1, {}), (os.path.join(args.out, "reference_b"), 2, {})]
    for c in args.candidates.split(","):
        if ":" not in c:            # single stepping at a longer step, judged like the MTS candidates
            jobs.append((os.path.join(args.out, f"single_{float(c):g}"), 1, {"dt": float(c)}))
            continue
        outer, inner = (float(x) for x in c.split(":"))
        jobs.append((os.path.join(args.out, f"mts_{outer:g}_{inner:g}"), 1, {"outer": outer, "inner": inner}))
    # reference A and the candidates first, reference B (the noise floor) last: on two cores with --jobs 2 the
    # first comparison is ready one run earlier
    order = [jobs[0], *jobs[2:], jobs[1]]
    with ThreadPoolExecutor(args.jobs) as pool:
        rcs = dict(pool.map(lambda j: simulate(args, *j), order))
    done = [(o, rcs[o]) for o, _, _ in jobs]
    report = {"settings": vars(args), "runs": {os.path.basename(o): rc for o, rc in done}, "candidates": {}}
    ref_a, ref_b = jobs[0][0], jobs[1][0]
    for out, rc in done[2:]:
        name = os.path.basename(out)
        if rc not in (0, 3) or not os.path.exists(os.path.join(out, "log.csv")):
            report["candidates"][name] = {"exit_status": rc}
            continue
        rep = compare_runs(out, ref_a, ref_b)
        rep["exit_status"] = rc
        report["candidates"][name] = rep
        st = rep["stability"]
        print(f"\n== {name} (exit {rc}): kinetic T per replica {['%.1f' % t for t in st.get('per_replica_mean_K', [])]}"
              f"; stable within 2 %: {st['stable']}")
        print("\n".join(summary_lines(rep)))
    from flashschnet.openmm.benchmark.dmts import overlap_figure

    ok = {os.path.basename(o): o for o, rc in done if rc == 0}
    if ok:
        report["figure"] = overlap_figure(ok, os.path.splitext(args.json)[0] + ".png")
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    if any("overlap" in c for c in report["candidates"].values()):
        from flashschnet.openmm.benchmark.dmts import table

        print("\n" + table(report))           # docs/sampling.md's table of this JSON
    print(f"\nwrote {args.json}" + (f" and {report['figure']}" if ok else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
