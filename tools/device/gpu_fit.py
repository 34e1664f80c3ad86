r"""Offline GPU-fit check of the triton backend's kernels: compile, on a machine without a GPU, every kernel
variant a float32 step can launch (and a compressed model's float64 step: its table kernels), for NVIDIA
targets, and report whether each fits.

    python tools/device/gpu_fit.py --arch 90 [--arch 80] [--json OUT.json] [--merge-into FILE.json [--update-doc MD]]
        [--all-bases] [--check]

For each kernel and variant the engine's own launches are compiled
(:func:`flashschnet.fused.launches.step_launches` and ``table_step_launches``: the kernel itself, the arguments'
dtypes, the constexprs and ``KERNEL_CONFIGS``' num_warps/num_stages, not a copy) with ``triton.compile`` for
``GPUTarget("cuda", arch, 32)``, and the PTX is assembled by the ``ptxas`` inside the triton wheel (``ptxas -v``,
the flags Triton itself uses). Printed and written (``--json``: a list of objects with keys ``kernel, variant, arch, regs, spill_bytes,
shared_bytes, compile_s, tensor_cores, triton`` and a few more; ``same_binary_as`` names an earlier variant
that compiled to the very same kernel, whose compile time Triton's cache then answers): registers per thread,
spill bytes (stores + loads), static shared memory per block, compile seconds, and whether the PTX has
tensor-core instructions (``mma`` / ``wgmma``). ``--check`` exits 1 when a row breaks the limits of
:func:`~flashschnet.kernels.gpu_fit.problems` (the CI test's criteria).

``docs/gpu-fit.json`` holds one section per Triton version (:func:`flashschnet.kernels.gpu_fit.load`; ``{"triton_versions": [...],
"runs": {version: {"triton", "torch", "archs", "all_bases", "rows"}}}``): the device image's Triton (3.6.0,
with torch 2.11: the project's venv) and the one before it (3.5.1). ``--merge-into FILE`` replaces only the
running Triton's section of FILE and keeps the others. Regenerate both sections (each ~5-10 min on 2 cores):

    $(bash tools/maintenance/venv.sh)/bin/python tools/device/gpu_fit.py --arch 90 --arch 80 --all-bases \
        --merge-into docs/gpu-fit.json --check                                  # triton 3.6.0 (+ --update-doc)
    python3.11 -m venv /tmp/venv-triton351 && /tmp/venv-triton351/bin/pip install torch==2.13.0 triton==3.5.1 \
        'numpy<2.4' && /tmp/venv-triton351/bin/pip install --no-deps -e .      # CPU torch + triton 3.5.1
    /tmp/venv-triton351/bin/python tools/device/gpu_fit.py --arch 90 --arch 80 --all-bases \
        --merge-into docs/gpu-fit.json --check                                  # triton 3.5.1

(only triton and torch's dtypes are used: a CPU torch wheel beside any triton wheel compiles the same).

The recipe follows ``../shared/tools/triton_aot_fit.py``. Limits of an H200 (sm_90): 232,448 B shared memory
per block, 255 registers per thread. The check's shared-memory limit is 200 KB, a margin below the H200's
(Triton 3.5.1 and 3.6.0 give these kernels the same shared memory; a later Triton's layouts may need more).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

from flashschnet.kernels.gpu_fit import DEFAULT_TAG, FILTER_KERNELS, merge_into, problems

_TYPES = {torch.float32: "fp32", torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16",
          torch.int8: "i8", torch.int32: "i32", torch.int64: "i64"}


def _signature(kernel, args, meta):
    """Triton's ``ASTSource`` signature of a launch: pointer types from the tensors' dtypes, i32 / fp32 for
    Python ints / floats (as Triton's launcher specialises them), ``constexpr`` for the meta-parameters."""
    sig, attrs = {}, {}
    for i, (name, a) in enumerate(zip(kernel.arg_names, list(args) + [None] * len(meta))):
        if name in meta:
            sig[name] = "constexpr"
        elif isinstance(a, torch.Tensor):
            sig[name] = "*" + _TYPES[a.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]             # torch allocations are 16-byte aligned
        elif isinstance(a, bool):
            sig[name] = "i1"
        elif isinstance(a, int):
            sig[name] = "i32"
        elif isinstance(a, float):
            sig[name] = "fp32"
        else:
            raise TypeError(f"{kernel.__name__}: argument {name} of type {type(a).__name__}")
    return sig, attrs


def _ptxas(ptx: str, arch: int) -> str:
    import triton

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        return subprocess.run([ptxas, f"--gpu-name={gpu}", "-v", path, "-o", os.devnull], capture_output=True,
                              text=True, check=True).stderr


def fit(launch, variant: str, arch: int) -> dict:
    """Compile one launch for sm_<arch> and measure it (see the module docstring)."""
    import triton
    from triton.backends.compiler import GPUTarget

    from flashschnet.kernels.gpu_fit import ctas_per_sm

    name, kernel, args, meta, opts = launch.name, launch.kernel, launch.args, launch.meta, launch.options
    sig, attrs = _signature(kernel, args, meta)
    t0 = time.time()
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=dict(meta), attrs=attrs)
    ck = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(opts))
    compile_s = time.time() - t0
    ptx = ck.asm["ptx"]
    info = _ptxas(ptx, arch)
    total = lambda pat: sum(int(x) for x in re.findall(pat, info))   # noqa: E731
    row = {
        "kernel": name, "variant": variant, "arch": arch, "triton": triton.__version__,
        "regs": total(r"Used (\d+) registers"),
        "spill_bytes": total(r"(\d+) bytes spill stores") + total(r"(\d+) bytes spill loads"),
        "shared_bytes": int(ck.metadata.shared),
        "compile_s": round(compile_s, 2),
        "tensor_cores": bool(re.search(r"\b(mma\.sync|wgmma)", ptx)),
        "wgmma": bool(re.search(r"\bwgmma\.mma_async", ptx)),
        "cp_async": bool(re.search(r"\bcp\.async", ptx)),
        "stack_bytes": total(r"(\d+) bytes stack frame"),
        "num_warps": opts["num_warps"], "num_stages": opts["num_stages"], "maxnreg": opts.get("maxnreg"),
        "ctas_per_sm_configured": launch.config.get("ctas_per_sm"),
        "constexprs": {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in meta.items()},
    }
    row["ctas_per_sm"] = ctas_per_sm(row)
    return row


def launches(all_bases: bool):
    from flashschnet.fused.launches import node_step_launches, step_launches, table_step_launches

    if not all_bases:
        return node_step_launches() + step_launches() + table_step_launches()
    out = node_step_launches() + table_step_launches()     # tables: no basis, no envelopes (both are in the table)
    for basis in ("gaussian", "expnormal"):
        for rbf_env in (True, False):
            for filt_env in (True, False):
                tag = f"{basis},rbf_env={int(rbf_env)},filt_env={int(filt_env)}"
                out += [(f"{v} {tag}".strip(), l) for v, l in step_launches(basis=basis, rbf_env=rbf_env,
                                                                             filt_env=filt_env)
                        if l.name in FILTER_KERNELS or tag == DEFAULT_TAG]
    return out


def table(rows) -> str:
    head = (f"| {'kernel':<24} | {'variant':<16} | arch | regs | spill B | shared B | CTAs/SM | compile s | "
            f"tensor cores | wgmma | cp.async | fits |")
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    yes = lambda b: "yes" if b else "no"                              # noqa: E731
    for r in rows:
        bad = problems(r)
        lines.append(f"| {r['kernel']:<24} | {r['variant']:<16} | {r['arch']:>4} | {r['regs']:>4} | "
                     f"{r['spill_bytes']:>7} | {r['shared_bytes']:>8} | {r['ctas_per_sm']:>7} | {r['compile_s']:>9} | "
                     f"{yes(r['tensor_cores']):>12} | {yes(r['wgmma']):>5} | {yes(r['cp_async']):>8} | "
                     f"{'yes' if not bad else 'NO: ' + '; '.join(bad)} |")
    return "\n".join(lines)


def _compile_environment() -> None:
    """Compile for the GPU, never interpret (Triton reads TRITON_INTERPRET when the kernels are defined: call
    before they are imported), with a fresh cache, so compile times are real and not cache hits."""
    if "triton" in sys.modules and "flashschnet.kernels.cfconv" in sys.modules:
        raise RuntimeError("gpu_fit: the kernels were imported before the compile environment was set")
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="gpu_fit_cache_"))


def main(argv=None) -> int:
    _compile_environment()
    p = argparse.ArgumentParser(prog="gpu_fit.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, action="append", choices=[80, 86, 89, 90],
                   help="compute capability, repeatable (default 90: H100/H200)")
    p.add_argument("--json", help="write the rows here (a list)")
    p.add_argument("--merge-into", metavar="FILE",
                   help="replace this Triton version's run in FILE (docs/gpu-fit.json: one run per version)")
    p.add_argument("--all-bases", action="store_true", help="also every basis / envelope combination")
    p.add_argument("--check", action="store_true", help="exit 1 if a row does not fit (problems())")
    p.add_argument("--update-doc", metavar="MD", help="after --merge-into, render that file's runs into this Markdown "
                                                      "file's gpu-fit markers (docs/benchmarks.md)")
    a = p.parse_args(argv)
    import triton

    rows, seen = [], {}
    for arch in a.arch or [90]:
        for variant, launch in launches(a.all_bases):
            rows.append(fit(launch, variant, arch))
            sig, _ = _signature(launch.kernel, launch.args, launch.meta)
            key = (arch, launch.name, json.dumps(rows[-1]["constexprs"], sort_keys=True), json.dumps(sig))
            if key in seen:          # the very same binary (Triton's cache answered: compile_s ~ 0)
                rows[-1]["same_binary_as"] = seen[key]
            seen.setdefault(key, variant)
            print(f"compiled {rows[-1]['kernel']} {variant} sm_{arch}: {rows[-1]['compile_s']} s", file=sys.stderr)
    print(f"triton {triton.__version__}, torch {torch.__version__}")
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.merge_into:
        merge_into(a.merge_into, {"triton": triton.__version__, "torch": torch.__version__,
                                  "archs": a.arch or [90], "all_bases": a.all_bases, "rows": rows})
        if a.update_doc:
            from flashschnet.kernels.gpu_fit import load, update_doc

            with open(a.update_doc) as f:
                text = update_doc(f.read(), load(a.merge_into))
            with open(a.update_doc, "w") as f:
                f.write(text)
    return 1 if a.check and any(problems(r) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
