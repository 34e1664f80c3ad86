"""A benchmark report: configuration labels, ratios, memory predictions, the printed table and the JSON file.

A report is a dict: ``machine`` (:func:`.machine.machine_info`), ``settings``, ``results`` (one entry per
energy_forces configuration: ``backend``, ``compress`` (filter-table dtype or "none") and ``compress_knots``,
``quantize``, ``replicas``, ``status`` ok|skipped|error and the measurement of :func:`.measure.energy_forces` or
the ``reason``/``error``), ``ratios`` (:func:`compute_ratios`), ``openmm`` (one entry per OpenMM run) and
``total_wall_s``.

Ratios (speed-up vs reference, memory as % of reference) are given only for R where the plain reference (no
filter tables, no 16-bit weights) and the other configuration were both measured in the same invocation;
predictions are never shown as measurements.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


#: the label suffix of each filter-table dtype (:data:`flashschnet.transforms.COMPRESSIONS`)
TABLE_SUFFIX = {"float32": "tab-f32", "float16": "tab-f16", "bfloat16": "tab-bf16"}


def label(backend: str, quantize: str = "none", matmul: str = "auto", cuda_graph: bool = False,
          compress: str = "none") -> str:
    """A configuration's name in tables and ratios: the backend, with ``+tab-f32`` / ``+tab-f16`` /
    ``+tab-bf16`` for filter tables (:data:`TABLE_SUFFIX`), then ``+VARIANT`` for 16-bit weights (e.g.
    ``torch+tab-f32+fp16``), ``/mm=NAME`` for a matmul precision other than auto and ``/graph`` for CUDA-graph
    replay."""
    name = backend
    if compress not in (None, "none"):
        name += f"+{TABLE_SUFFIX.get(compress, compress)}"
    if quantize not in (None, "none"):
        name += f"+{quantize}"
    if matmul not in (None, "auto"):
        name += f"/mm={matmul}"
    return name + ("/graph" if cuda_graph else "")


def configurations(backends: List[str], compress: List[str], quantize: List[str], precision: str = "single",
                   matmul: str = "auto") -> List[Tuple[str, str, str, bool]]:
    """The configurations of a benchmark, ``(backend, compress, quantize, default)``, compress x quantize x
    backends in that order. A named table dtype (or "none") runs with every backend; "auto" is what
    ``flashschnet-simulate`` runs by default for that backend (:func:`flashschnet.options.resolve_compression`:
    float32 tables on the fused backends, the exact filters on the reference), a row once (a configuration already
    listed is not repeated). ``default``: the row is the default network of its backend (compress "auto"; quantize
    "none")."""
    from ...options import ModelOptions, resolve_compression

    rows: List[Tuple[str, str, str, bool]] = []
    for comp in compress:
        for quant in quantize:
            for backend in backends:
                options = ModelOptions(backend=backend, precision=precision, quantize=quant, compress=comp,
                                       matmul=matmul)
                made = resolve_compression(options)
                default = resolve_compression(dataclasses.replace(options, compress="auto")) == made \
                    and quant == "none"
                if all((b, c, q) != (backend, made, quant) for b, c, q, _ in rows):
                    rows.append((backend, made, quant, default))
    return rows


def record_label(r: Dict[str, Any]) -> str:
    """The :func:`label` of a result record."""
    return label(r["backend"], r.get("quantize", "none"), r.get("matmul", "auto"), r.get("cuda_graph", False),
                 r.get("compress", "none"))


def compute_ratios(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Speed-up vs the plain reference (no filter tables, no 16-bit weights: label ``reference``) and memory as
    % of it, for every measured configuration whose R the plain reference was measured at too."""
    ok = {(record_label(r), r["replicas"]): r for r in results if r["status"] == "ok"}
    ratios = []
    for (name, R), r in sorted(ok.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ref = ok.get(("reference", R))
        if name == "reference" or ref is None:
            continue
        mem_pct = (100.0 * r["peak_extra_mb"] / ref["peak_extra_mb"]) if ref["peak_extra_mb"] > 0 else None
        ratios.append({
            "backend": r["backend"], "compress": r.get("compress", "none"), "quantize": r.get("quantize", "none"),
            "label": name, "replicas": R,
            "speedup_vs_reference": ref["median_ms"] / r["median_ms"],
            "memory_pct_of_reference": mem_pct,
        })
    return ratios


def predict_mb(results: List[Dict[str, Any]], name: str, R: int, strict: bool = True) -> Optional[Dict[str, Any]]:
    """Peak extra memory of configuration ``name`` (see :func:`label`) at R, predicted linearly in R from the
    largest smaller R measured (``strict=False``: smaller or equal): ``{predicted_mb, from_replicas}``, or None
    when there is no such measurement."""
    done = [r for r in results if record_label(r) == name and r["status"] == "ok"
            and (r["replicas"] < R if strict else r["replicas"] <= R)]
    if not done:
        return None
    base = max(done, key=lambda r: r["replicas"])
    return {"predicted_mb": base["peak_extra_mb"] * R / base["replicas"], "from_replicas": base["replicas"]}


def _fmt(x: Optional[float], spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_table(report: Dict[str, Any]) -> str:
    """The report as the plain-text table ``flashschnet-benchmark`` prints."""
    ratio = {(q.get("label", q["backend"]), q["replicas"]): q for q in report["ratios"]}
    head = ["backend", "R", "median ms", "min ms", "ns/day/rep", "ns/day aggr", "peak extra MB", "weights KB",
            "speed-up vs ref", "mem % of ref"]
    rows = []
    for r in report["results"]:
        name = record_label(r)
        if r["status"] != "ok":
            rows.append([name, str(r["replicas"]), f"{r['status']}: {r.get('reason') or r.get('error')}"])
            continue
        q = ratio.get((name, r["replicas"]))
        rows.append([
            name, str(r["replicas"]), _fmt(r["median_ms"], ".1f"), _fmt(r["min_ms"], ".1f"),
            _fmt(r["ns_per_day_per_replica"], ".4g"), _fmt(r["ns_per_day_aggregate"], ".4g"),
            _fmt(r["peak_extra_mb"], ".1f"), _fmt(r.get("weights_kb"), ".1f"),
            ("1.00x" if name == "reference" else
             (f"{q['speedup_vs_reference']:.2f}x" if q else "-")),
            ("100%" if name == "reference" else
             (_fmt(q["memory_pct_of_reference"], ".1f") + "%" if q and q["memory_pct_of_reference"] is not None
              else "-")),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows if len(row) > 3)) if any(len(row) > 3 for row in rows)
              else len(h) for i, h in enumerate(head)]
    lines = []
    m, s = report["machine"], report["settings"]
    lines.append(f"flashschnet-benchmark: {s['pdb_name']} ({s['n_beads']} beads), device {m['device']} "
                 f"({m['device_name']}), dtype {s['dtype']}, threads {m['threads']}, "
                 f"repeats {s['repeats']}, warmup {s['warmup']}")
    if s.get("default_rows"):
        lines.append(f"default network (flashschnet-simulate without --compress): {', '.join(s['default_rows'])}")
    lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        if len(row) == 3:
            lines.append("  ".join(c.rjust(w) for c, w in zip(row[:2], widths[:2])) + "  " + row[2])
        else:
            lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    if report["openmm"]:
        lines.append("")
        lines.append("OpenMM (packed replicas, network only, LangevinMiddle 4 fs; +PT: the same as parallel-tempering "
                     "walkers, an exchange every 10 steps; MARTINI 3: a protein in water, 20 fs, same platform):")
        label = lambda o: (record_label(o) + (f" [{o['openmm_force']}]" if o.get("openmm_force") else "")  # noqa: E731
                           + (" +PT" if o.get("kind") == "tempering" else ""))
        lw = max([14] + [len(label(o)) for o in report["openmm"]])
        lines.append(f"{'backend':>{lw}}  {'platform':>8}  {'R':>3}  {'steps':>5}  {'ms/step':>10}  "
                     f"{'ns/day/rep':>10}  {'ns/day aggr':>11}")
        for o in report["openmm"]:
            if o["status"] != "ok":
                lines.append(f"{label(o):>{lw}}  {o.get('platform', '-'):>8}  {o.get('replicas', '-'):>3}  "
                             f"{o.get('steps', '-'):>5}  {o['status']}: {o.get('error') or o.get('reason')}")
            else:
                lines.append(f"{label(o):>{lw}}  {o['platform']:>8}  {o['replicas']:>3}  {o['steps']:>5}  "
                             f"{o['ms_per_step']:>10.1f}  {o['ns_per_day_per_replica']:>10.4g}  "
                             f"{o['ns_per_day_aggregate']:>11.4g}")
    return "\n".join(lines)


def markdown(report: Dict[str, Any]) -> str:
    """The report as the Markdown tables of docs/benchmarks.md: one row per configuration and R (a skipped or
    failed one says why), then the OpenMM runs, if any. The docs carry this rendering of their JSON files verbatim
    (a test checks it), so a number in them is never typed by hand."""
    ratio = {(q.get("label", q["backend"]), q["replicas"]): q for q in report["ratios"]}
    default = set(report["settings"].get("default_rows") or ())
    lines = ["| configuration | R | median ms/call | min ms/call | ns/day per replica | ns/day aggregate "
             "| peak extra MB | weights KB | speed-up vs reference | memory vs reference |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in report["results"]:
        name = record_label(r)
        shown = f"{name} (default)" if name in default else name
        if r["status"] != "ok":
            why = r.get("reason") or r.get("error")
            lines.append(f"| {shown} | {r['replicas']} | {r['status']}: {why} | | | | | | | |")
            continue
        q = ratio.get((name, r["replicas"]))
        speed = "1.00×" if name == "reference" else (f"{q['speedup_vs_reference']:.2f}×" if q else "–")
        memory = "100%" if name == "reference" else (
            f"{q['memory_pct_of_reference']:.1f}%" if q and q["memory_pct_of_reference"] is not None else "–")
        lines.append(f"| {shown} | {r['replicas']} | {_fmt(r['median_ms'], '.1f')} | {_fmt(r['min_ms'], '.1f')} "
                     f"| {_fmt(r['ns_per_day_per_replica'], '.4g')} | {_fmt(r['ns_per_day_aggregate'], '.4g')} "
                     f"| {_fmt(r['peak_extra_mb'], '.1f')} | {_fmt(r.get('weights_kb'), '.1f')} | {speed} "
                     f"| {memory} |")
    if report["openmm"]:
        lines += ["", "| OpenMM, network as a force | platform | R | timed steps | ms/step | ns/day per replica "
                  "| ns/day aggregate |", "|---|---|--:|--:|--:|--:|--:|"]
        for o in report["openmm"]:
            name = record_label(o) + (" +PT" if o.get("kind") == "tempering" else "")
            if o["status"] != "ok":
                why = o.get("error") or o.get("reason")
                lines.append(f"| {name} | {o.get('platform', '-')} | {o.get('replicas', '-')} "
                             f"| {o.get('steps', '-')} | {o['status']}: {why} | | |")
            else:
                lines.append(f"| {name} | {o['platform']} | {o['replicas']} | {o['steps']} "
                             f"| {o['ms_per_step']:.1f} | {o['ns_per_day_per_replica']:.4g} "
                             f"| {o['ns_per_day_aggregate']:.4g} |")
    return "\n".join(lines)


def write_json(report: Dict[str, Any], path) -> Path:
    """Write the report atomically (:func:`flashschnet.atomic.atomic_write`: temporary file, fsync, rename): a JSON
    file at ``path`` is always complete; a write that fails raises :class:`~flashschnet.errors.OutputError`."""
    from ...atomic import atomic_write

    out = Path(path)
    with atomic_write(out, "w", what="writing the benchmark report") as f:
        f.write(json.dumps(report, indent=2) + "\n")
    return out
