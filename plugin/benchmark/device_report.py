"""A ``device.json`` of ``tools/device/device_checks.py`` rendered as docs/benchmarks.md's GPU section (the maintainer's
``python tools/device/device_report.py device.json [--stdout] [--doc FILE]`` writes it).

Only the text between ``<!-- device-report-2:begin -->`` and ``<!-- device-report-2:end -->`` (:data:`BEGIN`,
:data:`END`: the run after the kernel rewrite) is replaced; without the markers, a :data:`SECTION` heading holding
them is appended. The first GPU run's section (2026-12-04, between :data:`FIRST_BEGIN` and :data:`FIRST_END`) is
the historical record and is never rewritten. The rendered text names the machine, the commit and the baseline
commit, the stages, the targets (:func:`targets`: PASS / FAIL / NOT MEASURED), the old and new trees side by side,
the ``energy_forces`` rows by R, lysozyme beside BPTI, the OpenMM rows, OpenMM's share of a step (the do-nothing
force), MARTINI 3 as 1 and several processes with FlashSchNet's ratios over it, the correctness rows and the
precision (tf32) check, then every skip and error (:mod:`.device_tables` chooses the rows). A CPU run (``--device
cpu --smoke``) is rendered as what it is: a CPU smoke rehearsal, not a GPU measurement.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from . import device_tables as T
from .report import record_label

__all__ = ["BEGIN", "END", "FIRST_BEGIN", "FIRST_END", "SECTION", "TARGET_STEP_MS", "TARGET_NS_PER_DAY",
           "TARGET_SPEEDUP", "TARGET_MEMORY", "HEADLINE_R", "headline_r", "targets", "render", "short", "splice"]

#: the markers of the rendered section in the Markdown file (the run after the kernel rewrite)
BEGIN, END = "<!-- device-report-2:begin -->", "<!-- device-report-2:end -->"
#: the first GPU run's markers (2026-12-04): its section stays as rendered then
FIRST_BEGIN, FIRST_END = "<!-- device-report:begin -->", "<!-- device-report:end -->"
#: the heading of the section appended where the file has no markers
SECTION = "## GPU (H200), after the kernel rewrite: old and new side by side"
#: the goals of the kernel rewrite, BPTI: the default network's OpenMM step at R = 1 (0.3 ms: >= 1,150 ns/day per
#: replica at 4 fs), its aggregate ns/day at R = 64, its speed-up over the reference backend at R = 64 (OpenMM loop
#: and energy_forces), its energy_forces peak memory as a fraction of the reference's at R = 64
TARGET_STEP_MS, TARGET_NS_PER_DAY, TARGET_SPEEDUP, TARGET_MEMORY = 0.3, 10000.0, 40.0, 0.01
HEADLINE_R = 64


def _rs(report: Dict[str, Any], key: str) -> List[int]:
    Rs = report["settings"].get(key) or [HEADLINE_R]
    return Rs if isinstance(Rs, list) else [int(x) for x in str(Rs).split(",") if x]


def headline_r(report: Dict[str, Any]) -> int:
    """The R of the targets: 64 if the OpenMM rows were asked at 64, else their largest R."""
    Rs = _rs(report, "openmm_replicas")
    return HEADLINE_R if HEADLINE_R in Rs else max(Rs)


def _low_r(report: Dict[str, Any]) -> int:
    return min(_rs(report, "openmm_replicas"))


def targets(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The targets, computed from the run: ``name``, ``value``, ``measured`` (text), ``threshold``, ``status`` PASS
    | FAIL | NOT MEASURED, ``detail`` (which rows) and, when not measured, ``missing``."""
    R, low = headline_r(report), _low_r(report)
    out: List[Dict[str, Any]] = []

    def add(name, value, ok, threshold, measured, detail, missing):
        out.append({"name": name, "value": value, "threshold": threshold, "detail": detail,
                    "measured": measured if value is not None else "-",
                    "status": "NOT MEASURED" if value is None else ("PASS" if ok else "FAIL"),
                    **({"missing": missing} if value is None else {})})

    step = T.best(report, low)
    v = step["ms_per_step"] if step else None
    add(f"R = {low}: ms per OpenMM step, default network (float32 tables)", v, v is not None and v <= TARGET_STEP_MS,
        f"<= {TARGET_STEP_MS:g} ms (>= {4e-6 * 86400 / (TARGET_STEP_MS / 1e3):,.0f} ns/day per replica)",
        f"{v:.3f} ms ({step['ns_per_day_per_replica']:,.0f} ns/day)" if step else "-",
        f"fastest of the default network's OpenMM rows: {T.name(step)}" if step else "",
        f"no ok OpenMM row of the default network at R={low}")
    top = T.best(report, R)
    v = top["ns_per_day_aggregate"] if top else None
    add(f"R = {R}: aggregate ns/day, default network", v, v is not None and v >= TARGET_NS_PER_DAY,
        f">= {TARGET_NS_PER_DAY:,.0f}", f"{v:,.0f}" if v is not None else "-",
        f"fastest of the default network's OpenMM rows: {T.name(top)}" if top else "",
        f"no ok OpenMM row of the default network at R={R}")
    ref = next((o for o in T.rows(report, ("openmm",), only_ok=True) if o.get("backend") == "reference"
                and o.get("replicas") == R and T.force(o) in ("TorchForce", None)), None)
    v = top["ns_per_day_aggregate"] / ref["ns_per_day_aggregate"] if top and ref else None
    add(f"R = {R}: speed-up over the reference backend (OpenMM loop)", v, v is not None and v >= TARGET_SPEEDUP,
        f">= {TARGET_SPEEDUP:g}x", f"{v:.1f}x" if v is not None else "-",
        f"ns/day of {T.name(top)} / reference [TorchForce]" if top and ref else "",
        f"no ok OpenMM row of {'the default network' if not top else 'the reference [TorchForce]'} at R={R}")
    ef = T.best(report, R, kind="energy_forces")
    eref = next((r for r in T.rows(report, only_ok=True) if T.name(r) == "reference" and r["replicas"] == R), None)
    v = eref["median_ms"] / ef["median_ms"] if ef and eref else None
    add(f"R = {R}: speed-up over the reference backend (energy_forces)", v, v is not None and v >= TARGET_SPEEDUP,
        f">= {TARGET_SPEEDUP:g}x", f"{v:.1f}x" if v is not None else "-",
        f"median ms of reference / {T.name(ef)}" if ef and eref else "",
        f"no ok energy_forces rows of the default network and the reference at R={R}")
    mem = [r for r in T.rows(report, only_ok=True) if T.is_default(r) and r["replicas"] == R]
    worst = max(mem, key=lambda r: r["peak_extra_mb"]) if mem else None
    v = (worst["peak_extra_mb"] / eref["peak_extra_mb"] if worst and eref and eref["peak_extra_mb"] > 0 else None)
    add(f"R = {R}: peak memory vs the reference backend (energy_forces)", v, v is not None and v <= TARGET_MEMORY,
        f"<= {TARGET_MEMORY:.0%}", f"{v:.2%}" if v is not None else "-",
        (f"peak extra MB {worst['peak_extra_mb']:.1f} ({T.name(worst)}, the larger of the default network's rows) "
         f"/ {eref['peak_extra_mb']:.1f}") if worst and eref else "",
        f"no ok energy_forces rows of the default network and the reference (peak > 0) at R={R}")
    return out


def _machine(report: Dict[str, Any]) -> List[str]:
    m, s = report.get("machine", {}), report["settings"]
    gpus = m.get("gpus") or []
    lines = []
    if gpus:
        lines.append(f"- GPU (nvidia-smi: name, driver, memory): {'; '.join(gpus)}")
    elif m.get("gpu"):
        lines.append(f"- GPU: {m['gpu']}")
    else:
        lines.append(f"- CPU: {m.get('cpu_model', m.get('device_name', '?'))}, {m.get('cores', '?')} cores, "
                     f"threads {m.get('threads', '?')}")
    lines.append(f"- Python {m.get('python', '?')}, torch {m.get('torch', m.get('torch_version', '?'))} "
                 f"(CUDA {m.get('torch_cuda', '-')}), triton {m.get('triton', '?')}, numpy {m.get('numpy', '?')}, "
                 f"OpenMM {m.get('openmm', m.get('openmm_version', '?'))}, openmmtorch {m.get('openmmtorch', '?')}")
    fails = m.get("plugin_load_failures") or []
    lines.append(f"- OpenMM platforms: {', '.join(m.get('platforms', [])) or '?'}; plugin load failures: "
                 + (str(len(fails)) + " (" + "; ".join(f.split("/")[-1][:120] for f in fails) + ")" if fails
                    else "none"))
    lines.append(f"- commit: `{s.get('commit') or 'not recorded'}`; baseline (the last commit before the kernel "
                 f"rewrite): `{s.get('baseline_commit') or m.get('baseline_commit') or 'none'}`; started "
                 f"{s.get('started_utc', '?')}; command `{s.get('command', '?')}`; total "
                 f"{report.get('total_wall_s', '?')} s of a {s.get('budget', '?')} s budget")
    lines.append(f"- structure: {Path(str(s.get('pdb', '?'))).name} (and lysozyme, 1HEL); backends "
                 f"{', '.join(s.get('backends', []))} (kernel backend {s.get('kernel_backend', '?')}); "
                 f"energy_forces R = {s.get('replicas')}, OpenMM R = {s.get('openmm_replicas')}, "
                 f"{s.get('openmm_steps')} steps (at least {s.get('openmm_steps_r1', '-')} / R)")
    return lines


def _section(title: str, head: List[str], body: List[List[Any]], note: str = "") -> List[str]:
    if not body:
        return []
    return ["", title, ""] + T.table(head, body) + (["", note] if note else [])


def _comparisons(report: Dict[str, Any]) -> List[str]:
    """The targets, the side-by-side rows, OpenMM's share and MARTINI: what :func:`short` prints too."""
    R, cpu = headline_r(report), report["settings"].get("device") != "cuda"
    L = ["", f"Targets (the kernel rewrite's goals, BPTI; R = {_low_r(report)} and {R}"
             f"{', CPU smoke: not the GPU numbers' if cpu else ''}):", ""]
    L += T.table(["target", "measured", "threshold", "result", "from"],
                 [[t["name"], t["measured"], t["threshold"], f"**{t['status']}**", t.get("missing") or t["detail"]]
                  for t in targets(report)])
    L += _section("Old and new side by side (the same rows of the baseline tree, the last commit before the kernel "
                  "rewrite, run in the same call; ms per call or per OpenMM step; new/old: baseline ms / current "
                  "ms, the speed-up in ns/day):",
                  ["measurement", "configuration", "R", "current ms", "baseline ms", "new/old"],
                  T.side_by_side(report))
    L += _section("OpenMM's share of a step (the do-nothing TorchForce: zero energy and forces for the same "
                  "particles, in the same loop; the network row: float32 tables without the model's graph, the same "
                  "force):", ["OpenMM force", "R", "do-nothing ms/step", "network ms/step", "network's part ms",
                              "OpenMM + openmm-torch share"], T.share_rows(report))
    L += _section("MARTINI 3 BPTI in water (20 fs), as one process and as several processes at once on the same "
                  "device (their loops released together):",
                  ["processes", "platform", "ms/step (mean)", "ns/day of each process", "ns/day aggregate",
                   "loops overlapped s"], T.martini_rows(report))
    L += _section("FlashSchNet over MARTINI 3 (the default network's fastest OpenMM rows, 4 fs):",
                  ["comparison", "FlashSchNet ns/day", "MARTINI 3 ns/day", "FlashSchNet / MARTINI"],
                  T.martini_ratios(report, _low_r(report)))
    return L


def short(report: Dict[str, Any]) -> str:
    """The targets and comparisons of :func:`render`, for the end of the device log."""
    return "\n".join(_comparisons(report)).strip("\n") + "\n"


def render(report: Dict[str, Any]) -> str:
    """The GPU section's text (between the markers) for ``report``."""
    s = report["settings"]
    cpu = s.get("device") != "cuda"
    L: List[str] = []
    if cpu:
        L += ["**Not a GPU run.** What follows is a *CPU smoke rehearsal*, not a GPU measurement: "
              f"`tools/device/device_checks.py --device {s.get('device')}"
              f"{' --smoke' if s.get('smoke') else ''}` at tiny "
              "sizes on the OpenMM CPU platform (the same stages and rows as the GPU run, the CUDA-only rows "
              "skipped), rendered by `tools/device/device_report.py`. Its numbers show that every stage runs, not "
              "performance; the targets below are the GPU's, evaluated on these CPU rows only to exercise the "
              "logic.", ""]
    else:
        L += [f"GPU run of {s.get('started_utc', '?')} (`tools/device/device_benchmark.sh`, rendered by "
              "`tools/device/device_report.py`).", ""]
    passed = report.get("passed", not any(st["errors"] for st in report["stages"].values()))
    L += _machine(report) + [f"- result: **{'passed (no errors)' if passed else 'FAILED (errors below)'}**", ""]
    L += ["Stages:", ""]
    L += T.table(["stage", "status", "wall s", "ok", "skipped", "errors"],
                 [[n, st["status"], T.fmt(st["wall_s"], ".1f"), len(st["results"]), len(st["skips"]),
                   len(st["errors"])] for n, st in report["stages"].items()])
    L += _comparisons(report)
    L += _section("`energy_forces` of BPTI (the network alone; median of the timed calls; peak extra GPU memory; "
                  "`/graph`: the model's own CUDA graph; ratios vs the reference at the same R):",
                  ["configuration", "R", "median ms", "ns/day/replica", "ns/day aggregate", "peak extra MB",
                   "speed-up vs ref", "memory % of ref"], T.energy_forces_rows(report))
    nb, nl = T.beads(report, "bpti"), T.beads(report, "lysozyme")
    L += _section(f"Lysozyme ({nl or '?'} beads) beside BPTI ({nb or '?'} beads): how the cost grows with size:",
                  ["measurement", "configuration", "R", "BPTI ms", "lysozyme ms", "lysozyme / BPTI",
                   "per bead"], T.lysozyme_rows(report))
    L += _section("OpenMM (BPTI, packed replicas, network only, LangevinMiddle 4 fs; ns/day at 4 fs; `[TorchForce+CUDA "
                  "graph]`: openmm-torch's CUDA graph; `/graph`: the model's own; `+PT`: parallel-tempering "
                  "walkers, an exchange every 10 steps; memory: torch's peak / device memory in use, CUDA only):",
                  ["configuration", "platform", "R", "steps", "ms/step", "ns/day/replica", "ns/day aggregate",
                   "peak MB (torch / device)"], T.openmm_rows(report))
    L += _correctness(report)
    problems = [(n, e) for n, st in report["stages"].items() for e in st["errors"]]
    skips = [(n, e) for n, st in report["stages"].items() for e in st["skips"]]
    L += ["", f"Errors ({len(problems)}):" if problems else "Errors: none."]
    L += [f"- {n}: {e.get('item')}: {e.get('error')}" for n, e in problems]
    if skips:
        L += ["", f"Skips ({len(skips)}, each with its reason):"]
        L += [f"- {n}: {e.get('item')}: {e.get('reason')}" for n, e in skips]
    return "\n".join(L) + "\n"


def _correctness(report: Dict[str, Any]) -> List[str]:
    s, corr = report["settings"], report["stages"].get("correctness", {})
    rows = [r for r in corr.get("results", []) if "energy_rel_err_vs_oracle" in r]
    L = _section(f"Correctness, float32 on the mlcg oracle ({s.get('oracle', 'mlcg_schnet_A.pt')}; max relative "
                 "error vs its float64):",
                 ["configuration", "energy err", "forces err", "bitwise repeatable", "max diff vs other backends"],
                 [[record_label(r), T.fmt(r["energy_rel_err_vs_oracle"], ".2e"),
                   T.fmt(r["forces_rel_err_vs_oracle"], ".2e"), r.get("bitwise_repeatable"),
                   T.fmt(max([v for k, v in r.items() if "_diff_" in k], default=None), ".1e")] for r in rows])
    checks = [r for r in corr.get("results", []) if "check" in r]
    L += ["", "Precision check (measured errors vs the prediction of docs/tf32-accuracy.json):", ""]
    if checks:
        L += T.table(["check", "backend, matmul", "energy: predicted / measured / limit",
                      "forces: predicted / measured / limit", "result"],
                     [[c["check"], f"{c['backend']}, {c['matmul']}",
                       f"{c['energy_predicted']:.2e} / {c['energy_measured']:.2e} / {c['energy_limit']:.2e}",
                       f"{c['forces_predicted']:.2e} / {c['forces_measured']:.2e} / {c['forces_limit']:.2e}",
                       f"**{'PASS' if c['passed'] else 'FAIL'}**"] for c in checks])
        L += ["", f"Rule: {checks[0]['rule']}."]
        L += [f"- {c['check']}: within the same rule on the round-to-zero tf32 prediction: "
              f"{c['within_tf32_rz_rule']} (True: the tensor cores truncate the float32 operands)"
              for c in checks if "within_tf32_rz_rule" in c and not c["passed"]]
    L += [f"- {c['item']}: skipped: {c['reason']}" for c in corr.get("skips", []) if "check" in c]
    L += [f"- {c['item']}: error: {c['error']}" for c in corr.get("errors", []) if "check" in c and "passed" not in c]
    return L


def splice(doc: str, body: str, begin: str = BEGIN, end: str = END, section: str = SECTION) -> str:
    """``doc`` with the text between the markers ``begin`` and ``end`` (default :data:`BEGIN`, :data:`END`) replaced
    by ``body``; without the markers, a ``section`` heading holding them appended. Other tools that render into a
    doc section (tools/benchmarks/threads_benchmark.py) call this with their own markers."""
    if begin in doc and end in doc and doc.index(begin) < doc.index(end):
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        return f"{head}{begin}\n{body}{end}{tail}"
    return doc.rstrip("\n") + f"\n\n{section}\n\n{begin}\n{body}{end}\n"
