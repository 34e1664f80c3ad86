"""The tables of a device run's report (:mod:`.device_report` renders them into docs/benchmarks.md): which rows
of a ``device.json`` answer which question, and the rows of each Markdown table.

A row's tree (``tree``: current | baseline) and structure (``structure``: bpti | lysozyme) default to the
checkout's BPTI (a report of the first GPU run has neither). "The default network" is the kernel backend with
float32 filter tables, float32 weights and products (``compress`` float32), with or without the model's CUDA graph.
Tables:

* :func:`side_by_side` -- every row the baseline tree ran beside the checkout's same row: ms of each, new/old;
* :func:`energy_forces_rows` -- the checkout's BPTI ``energy_forces`` rows by R (peak memory, vs the reference);
* :func:`lysozyme_rows` -- lysozyme beside BPTI, per call / step and per bead;
* :func:`openmm_rows` -- the checkout's BPTI OpenMM rows;
* :func:`share_rows` -- the do-nothing force's step beside the default network's: OpenMM's share of a step;
* :func:`martini_rows` and :func:`martini_ratios` -- MARTINI 3 as 1 and as several processes, FlashSchNet over it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .report import record_label

__all__ = ["tree", "structure", "force", "ok", "is_default", "ms", "name", "key", "rows", "best", "fmt", "ns", "table",
           "side_by_side", "energy_forces_rows", "lysozyme_rows", "openmm_rows", "share_rows", "martini_rows",
           "martini_ratios", "beads"]


def tree(r: Dict[str, Any]) -> str:
    return r.get("tree", "current")


def structure(r: Dict[str, Any]) -> str:
    return r.get("structure", "bpti")


def force(r: Dict[str, Any]) -> Optional[str]:
    return r.get("openmm_force") or r.get("force")


def ok(r: Dict[str, Any]) -> bool:
    return r.get("status") == "ok"


def is_default(r: Dict[str, Any]) -> bool:
    """The default network: the kernel backend with float32 tables, float32 weights and products."""
    return (r.get("backend") not in ("reference", "none", None) and r.get("compress") == "float32"
            and r.get("quantize", "none") == "none" and r.get("matmul", "auto") == "auto")


def ms(r: Dict[str, Any]) -> Optional[float]:
    """ms per call (energy_forces) or per step (OpenMM)."""
    return r.get("median_ms") if r.get("kind", "energy_forces") == "energy_forces" else r.get("ms_per_step")


def name(r: Dict[str, Any]) -> str:
    """A row's configuration in the tables: its label, the OpenMM force in brackets, +PT for tempering."""
    what = "do-nothing force" if r.get("kind") == "overhead" else record_label(r)
    return what + (f" [{force(r)}]" if force(r) else "") + (" +PT" if r.get("kind") == "tempering" else "")


def key(r: Dict[str, Any], **change) -> tuple:
    """A row's configuration and R without its tree and structure (``change``: fields to replace first)."""
    r = dict(r, **change)
    return (r.get("kind", "energy_forces"), name(r), r.get("replicas"))


def rows(report: Dict[str, Any], kinds=("energy_forces",), tree_: str = "current", structure_: str = "bpti",
         only_ok: bool = False) -> List[Dict[str, Any]]:
    """The report's rows of ``kinds`` (energy_forces: ``timings``; others: ``openmm``) of one tree and structure."""
    pool = report.get("timings", []) + report.get("openmm", [])
    return [r for r in pool if r.get("kind", "energy_forces" if "median_ms" in r or "platform" not in r
                                      else "openmm") in kinds
            and tree(r) == tree_ and structure(r) == structure_ and (ok(r) or not only_ok)]


def best(report: Dict[str, Any], R: int, kind: str = "openmm") -> Optional[Dict[str, Any]]:
    """The fastest ok row of the default network at R (the checkout's BPTI rows of ``kind``), or None."""
    cands = [r for r in rows(report, (kind,), only_ok=True) if is_default(r) and r.get("replicas") == R]
    return min(cands, key=ms) if cands else None


def beads(report: Dict[str, Any], structure_: str) -> Optional[int]:
    """The structure's beads (from its energy_forces rows)."""
    return next((r["n_beads"] for r in report.get("timings", []) if structure(r) == structure_ and r.get("n_beads")),
                None)


def fmt(x: Optional[float], spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def ns(x: Optional[float]) -> str:
    """ns/day: thousands separated from 100 up, else 4 significant digits."""
    return "-" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}")


def table(head: List[str], body: List[List[Any]]) -> List[str]:
    """A Markdown table."""
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return out + ["| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in line) + " |"
                  for line in body]


def _why(r: Optional[Dict[str, Any]]) -> str:
    if r is None:
        return "not run"
    return f"{r['status']}: {r.get('reason') or r.get('error')}"


def _where(r: Dict[str, Any]) -> str:
    return "energy_forces" if r.get("kind", "energy_forces") == "energy_forces" else f"OpenMM {r.get('platform', '-')}"


def side_by_side(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: measurement, configuration, R, current ms, baseline ms, new/old (ns/day: baseline ms / current ms)."""
    out = []
    kinds = ("energy_forces", "openmm")
    current = {key(r): r for r in rows(report, kinds)}
    for b in rows(report, kinds, tree_="baseline"):
        c = current.get(key(b))
        cell = [fmt(ms(x), ".3f") if x is not None and ok(x) else _why(x) for x in (c, b)]
        ratio = (f"**{ms(b) / ms(c):.2f}x**" if c is not None and ok(c) and ok(b) and ms(c) else "-")
        out.append([_where(b), name(b), b["replicas"], *cell, ratio])
    return out


def energy_forces_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: configuration, R, median ms, ns/day per replica and aggregate, peak extra MB, vs the reference (speed,
    memory) -- the checkout's BPTI rows."""
    ratio = {(q["label"], q["replicas"]): q for q in report.get("ratios", [])}
    out = []
    for r in rows(report):
        label = record_label(r)
        if not ok(r):
            out.append([label, r["replicas"], _why(r), "", "", "", "", ""])
            continue
        q = ratio.get((label, r["replicas"]))
        ref = label == "reference"
        out.append([label, r["replicas"], fmt(r["median_ms"], ".3f"), fmt(r["ns_per_day_per_replica"], ".4g"),
                    fmt(r["ns_per_day_aggregate"], ".4g"), fmt(r["peak_extra_mb"], ".1f"),
                    "1.00x" if ref else (f"{q['speedup_vs_reference']:.1f}x" if q else "-"),
                    "100%" if ref else (f"{q['memory_pct_of_reference']:.2f}%"
                                        if q and q["memory_pct_of_reference"] is not None else "-")])
    return out


def lysozyme_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: measurement, configuration, R, BPTI ms, lysozyme ms, lysozyme / BPTI per call or step and per bead."""
    kinds = ("energy_forces", "openmm")
    bpti = {key(r): r for r in rows(report, kinds)}
    nb, nl = beads(report, "bpti"), beads(report, "lysozyme")
    out = []
    for r in rows(report, kinds, structure_="lysozyme"):
        b = bpti.get(key(r))
        cells = [fmt(ms(x), ".3f") if x is not None and ok(x) else _why(x) for x in (b, r)]
        both = b is not None and ok(b) and ok(r) and ms(b)
        per = f"{ms(r) / ms(b):.2f}x" if both else "-"
        per_bead = f"{ms(r) / ms(b) * nb / nl:.2f}x" if both and nb and nl else "-"
        out.append([_where(r), name(r), r["replicas"], *cells, per, per_bead])
    return out


def openmm_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: configuration, platform, R, steps, ms/step, ns/day per replica and aggregate, peak MB (torch /
    device) -- the checkout's BPTI OpenMM and parallel-tempering rows."""
    out = []
    for o in rows(report, ("openmm", "tempering")):
        if not ok(o):
            out.append([name(o), o.get("platform", "-"), o.get("replicas", "-"), o.get("steps", "-"), _why(o),
                        "", "", ""])
            continue
        mem = "-" if o.get("peak_allocated_mb") is None else \
            f"{o['peak_allocated_mb']:.0f} / {o.get('gpu_used_mb', 0):.0f}"
        out.append([name(o), o["platform"], o["replicas"], o.get("steps", "-"), fmt(o["ms_per_step"], ".3f"),
                    fmt(o["ns_per_day_per_replica"], ".4g"), fmt(o["ns_per_day_aggregate"], ".4g"), mem])
    return out


def share_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: OpenMM force, R, do-nothing ms/step, default network ms/step (float32 tables, no model graph), the
    network's part (their difference) and OpenMM's share (do-nothing / network row)."""
    nets = {(force(r), r["replicas"]): r for r in rows(report, ("openmm",))
            if is_default(r) and not r.get("cuda_graph")}
    out = []
    for o in rows(report, ("overhead",)):
        n = nets.get((force(o), o["replicas"]))
        both = n is not None and ok(n) and ok(o)
        out.append([force(o), o["replicas"], fmt(ms(o), ".3f") if ok(o) else _why(o),
                    fmt(ms(n), ".3f") if n is not None and ok(n) else _why(n),
                    fmt(ms(n) - ms(o), ".3f") if both else "-",
                    f"{100 * ms(o) / ms(n):.0f}%" if both and ms(n) else "-"])
    return out


def martini_rows(report: Dict[str, Any]) -> List[List[str]]:
    """Rows: processes, platform, ms/step (mean), ns/day of each process, their sum, the timed loops' overlap."""
    out = []
    for m in report.get("martini", []):
        if not ok(m):
            out.append([m.get("processes", 1), m.get("platform", "-"), _why(m), "", "", ""])
            continue
        each = " / ".join(ns(p.get("ns_per_day_per_replica")) if ok(p) else "error"
                          for p in m.get("per_process", [m]))
        out.append([m.get("processes", 1), m["platform"], fmt(m["ms_per_step"], ".3f"), each,
                    ns(m["ns_per_day_aggregate"]), fmt(m.get("overlap_s"), ".2f")])
    return out


def martini_ratios(report: Dict[str, Any], low: int) -> List[List[str]]:
    """Rows: comparison, FlashSchNet ns/day (which row), MARTINI ns/day (which), FlashSchNet / MARTINI -- per
    replica (the default network's fastest OpenMM row at R = ``low`` vs one MARTINI process) and aggregate (its
    best aggregate at any R vs each MARTINI run's sum)."""
    ms_ = [m for m in report.get("martini", []) if ok(m)]
    if not ms_:
        return []
    one = next((m for m in ms_ if m.get("processes", 1) == 1), None)
    out = []
    fs1 = best(report, low)
    if fs1 and one:
        out.append(["per replica", f"{fs1['ns_per_day_per_replica']:,.0f} ({name(fs1)}, R={low})",
                    f"{one['ns_per_day_per_replica']:,.0f} (1 process)",
                    f"**{fs1['ns_per_day_per_replica'] / one['ns_per_day_per_replica']:.2f}x**"])
    agg = [r for r in rows(report, ("openmm",), only_ok=True) if is_default(r)]
    top = max(agg, key=lambda r: r["ns_per_day_aggregate"]) if agg else None
    for m in ms_ if top else []:
        n = m.get("processes", 1)
        out.append([f"aggregate vs {n} process{'es' if n > 1 else ''}",
                    f"{top['ns_per_day_aggregate']:,.0f} ({name(top)}, R={top['replicas']})",
                    f"{m['ns_per_day_aggregate']:,.0f} ({n} process{'es' if n > 1 else ''})",
                    f"**{top['ns_per_day_aggregate'] / m['ns_per_day_aggregate']:.2f}x**"])
    return out
