"""A ``device.json`` of ``tools/device_checks.py`` rendered as docs/benchmarks.md's GPU section (the maintainer's
``python tools/device_report.py device.json [--stdout] [--doc FILE]`` writes it).

Only the text between ``<!-- device-report:begin -->`` and ``<!-- device-report:end -->`` (:data:`BEGIN`,
:data:`END`) is replaced; without the markers, a ``## GPU (H200)`` section holding them is appended. The rendered
text names the machine (GPU, driver, library versions from the environment stage), the commit, the stages, the
three targets of issue 26 with PASS / FAIL / NOT MEASURED (:func:`targets`), the correctness rows and the
precision (tf32) check, the energy_forces timings and the OpenMM rows, then every skip and error. A CPU run
(``--device cpu --smoke``) is rendered as what it is: a CPU smoke rehearsal, with the statement that no GPU run
has happened yet.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from .report import record_label

__all__ = ["BEGIN", "END", "SECTION", "TARGET_NS_PER_DAY", "TARGET_SPEEDUP", "TARGET_MEMORY", "HEADLINE_R",
           "headline_r", "targets", "render", "splice"]

#: the markers of the rendered section in the Markdown file
BEGIN, END = "<!-- device-report:begin -->", "<!-- device-report:end -->"
#: the heading of the section appended where the file has no markers
SECTION = "## GPU (H200)"
#: issue 26's targets, at the headline R (64 x BPTI): aggregate ns/day of the kernel backend's tf32 TorchForce
#: on CUDA; its speed-up over the reference backend's TorchForce (the same OpenMM loop); its energy_forces peak
#: memory as a fraction of the reference's
TARGET_NS_PER_DAY, TARGET_SPEEDUP, TARGET_MEMORY = 5000.0, 15.0, 0.10
HEADLINE_R = 64


def _label(r: Dict[str, Any]) -> str:
    return record_label(r)


def _f(x: Optional[float], spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _table(head: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return out + ["| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in row) + " |"
                  for row in rows]


def headline_r(report: Dict[str, Any]) -> int:
    """The R of the targets: 64 if the OpenMM rows were asked at 64, else their largest R."""
    Rs = report["settings"].get("openmm_replicas") or [HEADLINE_R]
    Rs = Rs if isinstance(Rs, list) else [int(x) for x in str(Rs).split(",") if x]
    return HEADLINE_R if HEADLINE_R in Rs else max(Rs)


def _openmm_row(report, backend: str, R: int, force: str = "TorchForce") -> Optional[Dict[str, Any]]:
    for o in report.get("openmm", []):
        if (o.get("status") == "ok" and o.get("kind", "openmm") == "openmm" and o.get("backend") == backend
                and o.get("replicas") == R and o.get("openmm_force") == force
                and o.get("quantize", "none") == "none" and o.get("matmul", "auto") == "auto"
                and o.get("compress", "none") == "none"):
            return o
    return None


def _timing_row(report, name: str, R: int) -> Optional[Dict[str, Any]]:
    return next((r for r in report.get("timings", []) if r.get("status") == "ok" and r["replicas"] == R
                 and _label(r) == name), None)


def targets(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The three targets, computed from the run: ``name``, ``measured`` (text), ``threshold``, ``status``
    PASS | FAIL | NOT MEASURED and ``detail`` (which rows)."""
    k = report["settings"].get("kernel_backend", "triton")
    R = headline_r(report)
    omm = _openmm_row(report, k, R)
    ref = _openmm_row(report, "reference", R)
    out = []

    def add(name, value, ok, threshold, measured, detail, missing):
        out.append({"name": name, "value": value, "threshold": threshold, "detail": detail,
                    "measured": measured if value is not None else "-",
                    "status": "NOT MEASURED" if value is None else ("PASS" if ok else "FAIL"),
                    **({"missing": missing} if value is None else {})})

    v = omm["ns_per_day_aggregate"] if omm else None
    add(f"aggregate ns/day, {R} x the structure, {k} {'tf32' if k == 'triton' else 'float32'} TorchForce "
        f"(OpenMM {omm['platform'] if omm else '-'})",
        v, v is not None and v >= TARGET_NS_PER_DAY, f">= {TARGET_NS_PER_DAY:,.0f}",
        f"{v:,.0f}" if v is not None else "-", f"OpenMM rows: {k} [TorchForce] R={R}",
        f"no ok OpenMM row {k} [TorchForce] R={R}")
    v = omm["ns_per_day_aggregate"] / ref["ns_per_day_aggregate"] if omm and ref else None
    add(f"speed-up over the reference backend (TorchForce, OpenMM, R={R})", v,
        v is not None and v >= TARGET_SPEEDUP, f">= {TARGET_SPEEDUP:g}x", f"{v:.1f}x" if v is not None else "-",
        f"ns/day of {k} [TorchForce] / reference [TorchForce], R={R}",
        f"no ok OpenMM row of {'reference' if omm else k} [TorchForce] R={R}")
    ek, er = _timing_row(report, k, R), _timing_row(report, "reference", R)
    v = (ek["peak_extra_mb"] / er["peak_extra_mb"]
         if ek and er and ek["peak_extra_mb"] > 0 and er["peak_extra_mb"] > 0 else None)
    add(f"peak memory vs the reference backend (energy_forces, R={R})", v,
        v is not None and v <= TARGET_MEMORY, f"<= {TARGET_MEMORY:.0%}", f"{v:.1%}" if v is not None else "-",
        (f"peak extra MB {ek['peak_extra_mb']:.1f} / {er['peak_extra_mb']:.1f}" if ek and er else
         f"energy_forces rows {k} and reference at R={R}"),
        f"no ok energy_forces rows {k} and reference with peaks > 0 at R={R}"
        + (f" (peak extra MB {ek['peak_extra_mb']:.1f} / {er['peak_extra_mb']:.1f})" if ek and er else ""))
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
    lines.append(f"- commit: `{s.get('commit') or 'not recorded'}`; started {s.get('started_utc', '?')}; "
                 f"command `{s.get('command', '?')}`; total {report.get('total_wall_s', '?')} s of a "
                 f"{s.get('budget', '?')} s budget")
    lines.append(f"- structure: {Path(str(s.get('pdb', '?'))).name}; backends "
                 f"{', '.join(s.get('backends', []))} (kernel backend "
                 f"{s.get('kernel_backend', '?')}); energy_forces R = {s.get('replicas')}, OpenMM R = "
                 f"{s.get('openmm_replicas')}, {s.get('openmm_steps')} steps")
    return lines


def render(report: Dict[str, Any]) -> str:
    """The GPU section's text (between the markers) for ``report``."""
    s = report["settings"]
    cpu = s.get("device") != "cuda"
    L: List[str] = []
    if cpu:
        L += ["**No GPU run has happened yet.** What follows is a *CPU smoke rehearsal*, not a GPU measurement: "
              f"`tools/device_checks.py --device {s.get('device')}{' --smoke' if s.get('smoke') else ''}` at tiny "
              "sizes on the OpenMM CPU platform (the same stages and rows as the GPU run), rendered by "
              "`tools/device_report.py`. Its numbers show that every stage runs, not performance; the targets "
              "below are the GPU's, evaluated on these CPU rows only to exercise the logic.", ""]
    else:
        L += [f"GPU run of {s.get('started_utc', '?')} (`tools/device_benchmark.sh`, rendered by "
              "`tools/device_report.py`).", ""]
    passed = report.get("passed", not any(st["errors"] for st in report["stages"].values()))
    L += _machine(report) + [f"- result: **{'passed (no errors)' if passed else 'FAILED (errors below)'}**", ""]

    L += ["Stages:", ""]
    L += _table(["stage", "status", "wall s", "ok", "skipped", "errors"],
                [[n, st["status"], _f(st["wall_s"], ".1f"), len(st["results"]), len(st["skips"]), len(st["errors"])]
                 for n, st in report["stages"].items()])
    R = headline_r(report)
    L += ["", f"Targets (issue 26; R = {R}{', CPU smoke: not the GPU numbers' if cpu else ''}):", ""]
    L += _table(["target", "measured", "threshold", "result", "from"],
                [[t["name"], t["measured"], t["threshold"], f"**{t['status']}**", t.get("missing") or t["detail"]]
                 for t in targets(report)])

    corr = report["stages"].get("correctness", {})
    rows = [r for r in corr.get("results", []) if "energy_rel_err_vs_oracle" in r]
    if rows:
        L += ["", f"Correctness, float32 on the mlcg oracle ({s.get('oracle', 'mlcg_schnet_A.pt')}; max relative "
                  "error vs its float64):", ""]
        L += _table(["configuration", "energy err", "forces err", "bitwise repeatable", "max diff vs other backends"],
                    [[_label(dict(r, cuda_graph=False)), _f(r["energy_rel_err_vs_oracle"], ".2e"),
                      _f(r["forces_rel_err_vs_oracle"], ".2e"), r.get("bitwise_repeatable"),
                      _f(max([v for k, v in r.items() if "_diff_vs_" in k], default=None), ".1e")] for r in rows])
    checks = [r for r in corr.get("results", []) if "check" in r]
    check_skips = [r for r in corr.get("skips", []) if "check" in r]
    check_errors = [r for r in corr.get("errors", []) if "check" in r and "passed" not in r]
    L += ["", "Precision check (measured errors vs the prediction of docs/tf32-accuracy.json):", ""]
    if checks:
        L += _table(["check", "backend, matmul", "energy: predicted / measured / limit",
                     "forces: predicted / measured / limit", "result"],
                    [[c["check"], f"{c['backend']}, {c['matmul']}",
                      f"{c['energy_predicted']:.2e} / {c['energy_measured']:.2e} / {c['energy_limit']:.2e}",
                      f"{c['forces_predicted']:.2e} / {c['forces_measured']:.2e} / {c['forces_limit']:.2e}",
                      f"**{'PASS' if c['passed'] else 'FAIL'}**"] for c in checks])
        L += ["", f"Rule: {checks[0]['rule']}."]
        for c in checks:
            if "within_tf32_rz_rule" in c and not c["passed"]:
                L.append(f"- {c['check']}: within the same rule on the round-to-zero tf32 prediction: "
                         f"{c['within_tf32_rz_rule']} (True: the tensor cores truncate the float32 operands)")
    for c in check_skips:
        L.append(f"- {c['item']}: skipped: {c['reason']}")
    for c in check_errors:
        L.append(f"- {c['item']}: error: {c['error']}")

    timings = report.get("timings", [])
    if timings:
        ratio = {(q["label"], q["replicas"]): q for q in report.get("ratios", [])}
        L += ["", "`energy_forces` (the network alone; median of the timed calls; peak extra memory; ratios vs the "
                  "reference at the same R):", ""]
        trs = []
        for r in timings:
            name = _label(r)
            if r["status"] != "ok":
                trs.append([name, r["replicas"], f"{r['status']}: {r.get('reason') or r.get('error')}",
                            "", "", "", "", ""])
                continue
            q = ratio.get((name, r["replicas"]))
            trs.append([name, r["replicas"], _f(r["median_ms"], ".2f"), _f(r["ns_per_day_per_replica"], ".4g"),
                        _f(r["ns_per_day_aggregate"], ".4g"), _f(r["peak_extra_mb"], ".1f"),
                        "1.00x" if name == "reference" else (f"{q['speedup_vs_reference']:.2f}x" if q else "-"),
                        "100%" if name == "reference" else
                        (f"{q['memory_pct_of_reference']:.1f}%" if q and q["memory_pct_of_reference"] is not None
                         else "-")])
        L += _table(["configuration", "R", "median ms", "ns/day/replica", "ns/day aggregate", "peak extra MB",
                     "speed-up vs ref", "memory % of ref"], trs)

    omm = report.get("openmm", [])
    if omm:
        L += ["", "OpenMM (packed replicas, network only, LangevinMiddle 4 fs; ns/day at 4 fs; `+PT`: the same "
                  "System as parallel-tempering walkers, an exchange every 10 steps; MARTINI 3: BPTI in water, "
                  "20 fs; memory: torch's peak allocation / device memory in use, CUDA only):", ""]
        ors = []
        kinds = {"openmm": 0, "tempering": 1, "martini": 2}
        forces = {"TorchForce": 0, "TorchForce+CUDA graph": 1, "PythonForce": 2}
        omm = sorted(omm, key=lambda o: (kinds.get(o.get("kind", "openmm"), 3), o.get("backend") == "reference",
                                         _label(dict(o, cuda_graph=False)) if "quantize" in o else "",
                                         forces.get(o.get("openmm_force"), 3), o.get("replicas", 0)))
        for o in omm:
            name = (_label(dict(o, cuda_graph=False)) if o.get("kind") != "martini" else o["backend"]) + \
                (" +PT" if o.get("kind") == "tempering" else "")
            force = o.get("openmm_force") or o.get("network_force", "-")
            if o["status"] != "ok":
                ors.append([name, force, o.get("platform", "-"), o.get("replicas", "-"),
                            f"{o['status']}: {o.get('reason') or o.get('error')}", "", "", ""])
                continue
            mem = "-" if o.get("peak_allocated_mb") is None else \
                f"{o['peak_allocated_mb']:.0f} / {o.get('gpu_used_mb', 0):.0f}"
            ors.append([name, force, o["platform"], o["replicas"], _f(o["ms_per_step"], ".2f"),
                        _f(o["ns_per_day_per_replica"], ".4g"), _f(o["ns_per_day_aggregate"], ".4g"), mem])
        L += _table(["configuration", "network force", "platform", "R", "ms/step", "ns/day/replica",
                     "ns/day aggregate", "peak MB (torch / device)"], ors)

    problems = [(n, e) for n, st in report["stages"].items() for e in st["errors"]]
    skips = [(n, e) for n, st in report["stages"].items() for e in st["skips"]]
    L += ["", f"Errors ({len(problems)}):" if problems else "Errors: none."]
    L += [f"- {n}: {e.get('item')}: {e.get('error')}" for n, e in problems]
    if skips:
        L += ["", f"Skips ({len(skips)}, each with its reason):"]
        L += [f"- {n}: {e.get('item')}: {e.get('reason')}" for n, e in skips]
    return "\n".join(L) + "\n"


def splice(doc: str, body: str, begin: str = BEGIN, end: str = END, section: str = SECTION) -> str:
    """``doc`` with the text between the markers ``begin`` and ``end`` (default :data:`BEGIN`, :data:`END`) replaced
    by ``body``; without the markers, a ``section`` heading holding them appended. Other tools that render into a
    doc section (tools/threads_benchmark.py) call this with their own markers."""
    if begin in doc and end in doc and doc.index(begin) < doc.index(end):
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        return f"{head}{begin}\n{body}{end}{tail}"
    return doc.rstrip("\n") + f"\n\n{section}\n\n{begin}\n{body}{end}\n"
