"""Does a compiled kernel fit an H100/H200 (sm_90) or A100 (sm_80)? The criteria, and the file of recorded fits.

``python tools/device/gpu_fit.py`` compiles every launch a step can make
(:func:`flashschnet.fused.launches.step_launches`, ``table_step_launches``, ``node_step_launches``) with Triton for
an NVIDIA target, without a GPU, and measures each binary (registers, spills, shared memory, compile time, which
instructions it holds: tensor-core ``mma`` / ``wgmma``, asynchronous copies ``cp.async``): a *row*.
:func:`ctas_per_sm` says how many of its blocks one multiprocessor holds at once (registers, shared memory, warps,
blocks); :func:`problems` says why a row does not fit -- also when a persistent kernel's configured programs per
multiprocessor (``ctas_per_sm`` of :func:`flashschnet.fused.launches.config`) exceed what fits, which would
serialise its grid; :func:`load` and :func:`merge_into` read and write ``docs/gpu-fit.json``, which holds one run of
rows per Triton version. Limits of an H200 (sm_90): 232,448 B shared memory per block, 255 registers per thread; the
shared-memory limit here is 200 KB, a margin below it.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List

__all__ = ["MAX_SHARED", "MAX_COMPILE_S", "REGISTER_FILE", "FILTER_KERNELS", "TABLE_KERNELS", "DEFAULT_TAG",
           "SM", "MARKERS", "ctas_per_sm", "problems", "default_variant", "load", "merge_into", "markdown",
           "update_doc"]

#: a row fails the check above these (the issue's criteria)
MAX_SHARED = 200 * 1024
MAX_COMPILE_S = 120.0
REGISTER_FILE = 65536          # 32-bit registers per SM (sm_80 / sm_90): regs x threads of a block must fit
#: kernels whose matrix products are the filter network (must use tensor cores)
FILTER_KERNELS = ("_cfconv_fwd_kernel", "_cfconv_bwd_kernel")
#: the tabulated-filter kernels (filter compression): no matrix products, so no tensor-core criterion; variants
#: are the table order and storage dtype, not the basis (compiled once even with --all-bases)
TABLE_KERNELS = ("_cfconv_table_fwd_kernel", "_cfconv_table_bwd_kernel")
#: the default model's basis and envelopes: ``--all-bases`` variants carry this tag for the default step's launches
DEFAULT_TAG = "gaussian,rbf_env=1,filt_env=1"
#: per-multiprocessor resources of sm_80 / sm_90 (CUDA's occupancy rules): 32-bit registers, shared memory
#: usable by blocks (and what the driver reserves per block), resident warps and blocks; registers are allocated
#: per warp in units of 256
SM = {80: dict(registers=65536, shared=167936, reserved=1024, warps=64, blocks=32),
      90: dict(registers=65536, shared=233472, reserved=1024, warps=64, blocks=32)}


def ctas_per_sm(row: Dict[str, Any]) -> int:
    """Blocks of ``row``'s kernel one multiprocessor of its arch holds at once: the least of what its registers
    (per thread, rounded up to 8, a warp's to 256), shared memory (plus the driver's per-block reserve), warps
    and the block limit allow (0: it cannot launch)."""
    sm = SM[int(row["arch"])]
    warps = int(row["num_warps"])
    regs = -(-int(row["regs"]) // 8) * 8
    per_warp = -(-regs * 32 // 256) * 256
    by_regs = sm["registers"] // (per_warp * warps)
    by_shared = sm["shared"] // (int(row["shared_bytes"]) + sm["reserved"])
    return int(max(0, min(by_regs, by_shared, sm["warps"] // warps, sm["blocks"])))


def problems(row: Dict[str, Any]) -> List[str]:
    """Why ``row`` fails the fit criteria (empty: it fits): any spill, shared memory over 200 KB, a compile over
    120 s, a filter-network kernel without tensor-core instructions (not the table kernels: they have no
    matrix products), a block whose registers (per thread x threads) exceed the register file (it could not
    launch at all), or a persistent kernel configured for more programs per multiprocessor (``ctas_per_sm`` in
    the row, from the launcher's configuration) than fit at once (:func:`ctas_per_sm`)."""
    out = []
    if row["regs"] * row["num_warps"] * 32 > REGISTER_FILE:
        out.append(f"{row['regs']} regs x {row['num_warps'] * 32} threads > {REGISTER_FILE} registers per SM")
    wanted = row.get("ctas_per_sm_configured")
    if wanted and "arch" in row and ctas_per_sm(row) < wanted:
        out.append(f"configured for {wanted} blocks per SM, {ctas_per_sm(row)} fit")
    if row["spill_bytes"]:
        out.append(f"{row['spill_bytes']} spill bytes")
    if row["shared_bytes"] > MAX_SHARED:
        out.append(f"{row['shared_bytes']} B shared > {MAX_SHARED}")
    if row["compile_s"] > MAX_COMPILE_S:
        out.append(f"compile {row['compile_s']} s > {MAX_COMPILE_S}")
    if row["kernel"] in FILTER_KERNELS and not row["tensor_cores"]:
        out.append("no tensor-core instructions")
    return out


def default_variant(variant: str) -> str:
    """The name a ``--all-bases`` row's variant has in a default run (its :data:`DEFAULT_TAG` dropped); other
    bases' and envelopes' variants keep their tag."""
    return variant[:-len(DEFAULT_TAG)].strip() if variant.endswith(DEFAULT_TAG) else variant


def load(path) -> Dict[str, Any]:
    """The runs a fit file records, ``{triton version: {"triton", "torch", "archs", "all_bases", "rows"}}``
    (``docs/gpu-fit.json``). A plain list of rows (``--json``) is one run, keyed by its rows' ``triton``
    (``"unknown"`` for rows written before they carried it)."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, list):
        versions = {r.get("triton", "unknown") for r in data} or {"unknown"}
        return {v: {"triton": v, "rows": [r for r in data if r.get("triton", "unknown") == v]} for v in versions}
    return dict(data["runs"])


def _version_key(v: str):
    """A Triton version's sort key (``"3.6.0"`` -> (3, 6, 0); a non-numeric part sorts first)."""
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.+-]", v))


def merge_into(path, run: Dict[str, Any]) -> Dict[str, Any]:
    """Write ``run`` (one Triton version's rows) into the fit file at ``path``, replacing that version's section
    and keeping the others (a missing file starts empty); returns the file's content."""
    runs = load(path) if os.path.exists(path) else {}
    runs.pop("unknown", None)              # rows without a version cannot be told apart: regenerate them
    runs[run["triton"]] = run
    versions = sorted(runs, key=_version_key)
    data = {"about": "tools/device/gpu_fit.py rows, one run per Triton version (regenerate one with its triton: "
                     "python tools/device/gpu_fit.py --arch 90 --arch 80 --all-bases --merge-into docs/gpu-fit.json "
                     "--check)",
            "triton_versions": versions, "runs": {v: runs[v] for v in versions}}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    return data


#: the markers of docs/benchmarks.md's table of recorded fits (:func:`markdown`)
MARKERS = ("<!-- gpu-fit:begin -->", "<!-- gpu-fit:end -->")


def _default_rows(run: Dict[str, Any], arch: int) -> List[Dict[str, Any]]:
    """A run's rows of ``arch`` for the default model's basis and envelopes (and the kernels without a basis)."""
    return [r for r in run["rows"] if r["arch"] == arch and (DEFAULT_TAG in r["variant"] or "," not in r["variant"])]


def markdown(runs: Dict[str, Any], arch: int = 90) -> str:
    """docs/benchmarks.md's table of the recorded fits (between :data:`MARKERS`): per kernel and variant of the
    default model on ``arch``, registers under each Triton version, and the newest version's spills, shared memory,
    blocks per multiprocessor, launch options and instructions; then, per version and arch, the whole run (every
    basis and envelope variant) summed up."""
    versions = sorted(runs, key=_version_key)
    newest = runs[versions[-1]]
    by = {v: {(r["kernel"], default_variant(r["variant"])): r for r in _default_rows(runs[v], arch)} for v in versions}
    yes = lambda b: "yes" if b else "no"                      # noqa: E731
    lines = [f"Recorded by `tools/device/gpu_fit.py` (Triton {', '.join(versions)}), sm_{arch}, the default model's "
             f"shapes (F = 128, K = 50 padded to 64, tiles of 16 beads); regs as {' / '.join(versions)}, the other "
             f"columns {versions[-1]}'s; CTAs/SM: blocks of the kernel one multiprocessor holds at once (registers, "
             f"shared memory, warps), and what the launcher's persistent grid asks for:", "",
             "| kernel | variant | regs | spill B | shared B | CTAs/SM (asked) | warps / stages / maxnreg | "
             "tensor cores | wgmma | cp.async |", "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in _default_rows(newest, arch):
        key = (r["kernel"], default_variant(r["variant"]))
        regs = " / ".join(str(by[v][key]["regs"]) if key in by[v] else "-" for v in versions)
        asked = r.get("ctas_per_sm_configured")
        lines.append(f"| `{r['kernel']}` | {key[1] or '-'} | {regs} | {r['spill_bytes']} | {r['shared_bytes']:,} | "
                     f"{r.get('ctas_per_sm', '-')}{f' ({asked})' if asked else ''} | {r['num_warps']} / "
                     f"{r['num_stages']} / {r.get('maxnreg') or '-'} | {yes(r['tensor_cores'])} | "
                     f"{yes(r.get('wgmma'))} | {yes(r.get('cp_async'))} |")
    lines += ["", "Every variant (`--all-bases`: both bases x both envelopes on/off for the exact filter, every "
              "table order and storage type, float32 and float64):", "",
              "| Triton | arch | rows | fit | most regs | spill B | most shared B | fewest CTAs/SM | "
              "longest compile s |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for v in versions:
        for a in sorted({r["arch"] for r in runs[v]["rows"]}):
            rows = [r for r in runs[v]["rows"] if r["arch"] == a]
            lines.append(f"| {v} | sm_{a} | {len(rows)} | {sum(not problems(r) for r in rows)} | "
                         f"{max(r['regs'] for r in rows)} | {sum(r['spill_bytes'] for r in rows)} | "
                         f"{max(r['shared_bytes'] for r in rows):,} | "
                         f"{min((r['ctas_per_sm'] for r in rows if 'ctas_per_sm' in r), default='-')} | "
                         f"{max(r['compile_s'] for r in rows)} |")
    return "\n".join(lines) + "\n"


def update_doc(doc: str, runs: Dict[str, Any]) -> str:
    """``doc`` (docs/benchmarks.md's text) with the text between :data:`MARKERS` replaced by :func:`markdown`."""
    begin, end = MARKERS
    if begin not in doc or end not in doc:
        raise ValueError(f"the document has no {begin} ... {end} markers")
    head, rest = doc.split(begin, 1)
    return f"{head}{begin}\n{markdown(runs)}{end}{rest.split(end, 1)[1]}"
