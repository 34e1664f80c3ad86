"""tools/device/gpu_fit.py (run as a program; its criteria and file format: flashschnet.kernels.gpu_fit, tested in
tests/model/kernels/test_gpu_fit.py): the triton backend's per-step kernels, compiled ahead of time for an
H100/H200 (sm_90) by Triton's own compiler and the ptxas in its wheel, must fit -- no spill, shared memory
<= 200 KB, a block's registers within the register file, compiled in < 120 s each, the filter network on tensor
cores (the tabulated-filter kernels of compressed models have no matrix products: every criterion but that one),
every kernel a step launches compiled with the launcher's own options, a persistent kernel's configured blocks per
multiprocessor within what fits; the installed Triton's recorded sm_90 rows (docs/gpu-fit.json) are what it
compiles now."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from flashschnet.fused.launches import KERNEL_CONFIGS, TABLE_VARIANTS, config
from flashschnet.kernels import gpu_fit

ROOT = Path(__file__).resolve().parents[3]

#: what a row measures (compile_s and same_binary_as vary from run to run)
MEASURED = ("regs", "spill_bytes", "shared_bytes", "stack_bytes", "tensor_cores", "wgmma", "cp_async", "num_warps",
            "num_stages", "maxnreg", "ctas_per_sm", "ctas_per_sm_configured", "constexprs")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "fit.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "device" / "gpu_fit.py"), "--arch", "90", "--json",
                           str(out), "--check"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(proc.stdout)
    return json.loads(out.read_text())


def test_every_per_step_kernel_fits_sm90(rows):
    kernels = {r["kernel"] for r in rows}
    assert kernels == set(KERNEL_CONFIGS)                       # every kernel a step launches was compiled
    variants = {(r["kernel"], r["variant"]) for r in rows}
    for dot in ("tf32", "bf16", "fp16", "bf16-weights", "fp16-weights"):
        assert ("_cfconv_fwd_kernel", dot) in variants and ("_cfconv_bwd_kernel", dot) in variants
    for name, *_ in TABLE_VARIANTS:           # cubic/quintic x float32/float16/bfloat16 tables, float32 and float64
        assert ("_cfconv_table_fwd_kernel", name) in variants and ("_cfconv_table_bwd_kernel", name) in variants
    for r in rows:
        assert set(r) >= {"kernel", "variant", "arch", "regs", "spill_bytes", "shared_bytes", "compile_s",
                          "tensor_cores"}
        assert r["arch"] == 90 and 0 < r["regs"] <= 255
        assert r["triton"] == triton.__version__
        assert gpu_fit.problems(r) == [], (r["kernel"], r["variant"], gpu_fit.problems(r))
        # compiled with the launcher's own options, not a copy
        c = config(r["kernel"], torch.float64 if r["variant"].endswith("/f64") else torch.float32,
                   sixteen=r["kernel"] in gpu_fit.TABLE_KERNELS and ("-f16" in r["variant"] or "-bf16" in r["variant"]))
        assert r["num_warps"] == c["num_warps"] and r["num_stages"] == c["num_stages"]
        assert r["maxnreg"] == c.get("maxnreg") and r["ctas_per_sm_configured"] == c.get("ctas_per_sm")
        if c.get("ctas_per_sm"):
            assert r["ctas_per_sm"] >= c["ctas_per_sm"]         # the persistent grid's programs all fit at once
        if r["kernel"] in gpu_fit.FILTER_KERNELS:
            assert r["tensor_cores"]
        if r["kernel"] in gpu_fit.TABLE_KERNELS:
            assert not r["tensor_cores"]                        # a lookup: gathers and FMAs


def test_installed_tritons_recorded_rows_are_what_it_compiles(rows):
    runs = gpu_fit.load(ROOT / "docs" / "gpu-fit.json")
    assert triton.__version__ in runs, f"no rows for triton {triton.__version__} in docs/gpu-fit.json (merge them: " \
                                       "tools/device/gpu_fit.py --merge-into)"
    recorded = {(r["kernel"], gpu_fit.default_variant(r["variant"]), r["arch"]): r
                for r in runs[triton.__version__]["rows"]}
    for r in rows:
        rec = recorded[(r["kernel"], r["variant"], r["arch"])]
        assert {k: rec.get(k) for k in MEASURED} == {k: r.get(k) for k in MEASURED}, (r["kernel"], r["variant"])
