"""Does a compiled kernel fit an H100/H200 (sm_90) or A100 (sm_80)? The criteria, and the file of recorded fits.

``python tools/gpu_fit.py`` compiles every launch a step can make (:func:`flashschnet.fused.launches.step_launches`,
``table_step_launches``) with Triton for an NVIDIA target, without a GPU, and measures each binary (registers,
spills, shared memory, compile time, tensor-core instructions): a *row*. :func:`problems` says why a row does not
fit; :func:`load` and :func:`merge_into` read and write ``docs/gpu-fit.json``, which holds one run of rows per
Triton version. Limits of an H200 (sm_90): 232,448 B shared memory per block, 255 registers per thread; the
shared-memory limit here is 200 KB, a margin below it.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List

__all__ = ["MAX_SHARED", "MAX_COMPILE_S", "REGISTER_FILE", "FILTER_KERNELS", "TABLE_KERNELS", "DEFAULT_TAG",
           "problems", "default_variant", "load", "merge_into"]

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


def problems(row: Dict[str, Any]) -> List[str]:
    """Why ``row`` fails the fit criteria (empty: it fits): any spill, shared memory over 200 KB, a compile over
    120 s, a filter-network kernel without tensor-core instructions (not the table kernels: they have no
    matrix products), or a block whose registers (per thread x threads) exceed the register file (it could not
    launch at all)."""
    out = []
    if row["regs"] * row["num_warps"] * 32 > REGISTER_FILE:
        out.append(f"{row['regs']} regs x {row['num_warps'] * 32} threads > {REGISTER_FILE} registers per SM")
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
    data = {"about": "tools/gpu_fit.py rows, one run per Triton version (regenerate one with its triton: "
                     "python tools/gpu_fit.py --arch 90 --arch 80 --all-bases --merge-into docs/gpu-fit.json "
                     "--check)",
            "triton_versions": versions, "runs": {v: runs[v] for v in versions}}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    return data
