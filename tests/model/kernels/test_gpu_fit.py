"""flashschnet.kernels.gpu_fit: the fit criteria, each problem caught (registers within the register file, no
spill, shared memory <= 200 KB, compiled in < 120 s, the filter network on tensor cores -- not for the
tabulated-filter kernels, which have no matrix products), the recorded rows (docs/gpu-fit.json: a full run, sm_90
and sm_80, every basis, for each Triton the project has met -- 3.5.1 and the device's 3.6.0 -- all fitting), and
the fit file's two formats and merging. Compiling the kernels (tools/device/gpu_fit.py as a program):
tests/tools/device/test_gpu_fit.py."""
from __future__ import annotations

import json

from tests.conftest import ROOT
from flashschnet.fused.launches import KERNEL_CONFIGS
from flashschnet.kernels import gpu_fit

#: the Triton versions whose full runs docs/gpu-fit.json must hold
RECORDED_TRITONS = ("3.5.1", "3.6.0")


def test_the_criteria_catch_each_problem():
    good = dict(kernel="_cfconv_bwd_kernel", variant="bf16", arch=90, regs=200, spill_bytes=0, shared_bytes=57344,
                compile_s=1.0, tensor_cores=True, num_warps=8)
    assert gpu_fit.problems(good) == []
    for change, word in ((dict(spill_bytes=8), "spill"), (dict(shared_bytes=210 * 1024), "shared"),
                         (dict(compile_s=130.0), "compile"), (dict(tensor_cores=False), "tensor-core"),
                         (dict(num_warps=16), "register")):
        assert any(word in p for p in gpu_fit.problems(dict(good, **change))), change
    table = dict(good, kernel="_cfconv_table_bwd_kernel", variant="quintic-bf16", tensor_cores=False)
    assert gpu_fit.problems(table) == []                        # no matrix products: no tensor-core criterion
    for change, word in ((dict(spill_bytes=8), "spill"), (dict(shared_bytes=210 * 1024), "shared"),
                         (dict(compile_s=130.0), "compile"), (dict(num_warps=16), "register")):
        assert any(word in p for p in gpu_fit.problems(dict(table, **change))), change


def test_recorded_rows_cover_both_tritons_and_fit():
    runs = gpu_fit.load(ROOT / "docs" / "gpu-fit.json")
    assert set(runs) >= set(RECORDED_TRITONS), sorted(runs)
    keys = {}
    for version in RECORDED_TRITONS:
        run = runs[version]
        assert run["triton"] == version and run["all_bases"] and sorted(run["archs"]) == [80, 90]
        rows = run["rows"]
        assert {r["kernel"] for r in rows} == set(KERNEL_CONFIGS)
        for r in rows:
            assert r["triton"] == version and r["arch"] in (80, 90) and 0 < r["regs"] <= 255
            assert gpu_fit.problems(r) == [], (version, r["kernel"], r["variant"], r["arch"], gpu_fit.problems(r))
            if r["kernel"] in gpu_fit.FILTER_KERNELS:
                assert r["tensor_cores"]
        keys[version] = sorted((r["kernel"], r["variant"], r["arch"]) for r in rows)
        assert len(set(keys[version])) == len(rows)                # one row per kernel, variant and arch
    assert keys[RECORDED_TRITONS[0]] == keys[RECORDED_TRITONS[1]]   # the same variants under both


def test_blocks_per_multiprocessor_from_registers_shared_memory_and_warps():
    """ctas_per_sm: registers rounded up per thread (8) and per warp (256), shared memory with the driver's 1 KB
    per block, at most 64 warps and 32 blocks; a block that cannot launch gives 0; the check catches a persistent
    kernel asking for more."""
    row = dict(kernel="_cfconv_table_fwd_kernel", variant="x", arch=90, regs=128, spill_bytes=0, shared_bytes=4096,
               compile_s=1.0, tensor_cores=False, num_warps=2)
    assert gpu_fit.ctas_per_sm(row) == 8                       # 65536 / (128 x 64)
    assert gpu_fit.ctas_per_sm(dict(row, regs=121)) == 8 and gpu_fit.ctas_per_sm(dict(row, regs=129)) == 7
    assert gpu_fit.ctas_per_sm(dict(row, regs=32, num_warps=1)) == 32            # the block limit
    assert gpu_fit.ctas_per_sm(dict(row, regs=16, num_warps=4)) == 16            # 64 warps
    assert gpu_fit.ctas_per_sm(dict(row, regs=32, shared_bytes=100_000)) == 2    # shared memory
    assert gpu_fit.ctas_per_sm(dict(row, regs=255, num_warps=16)) == 0           # 130,560 registers: never
    assert gpu_fit.ctas_per_sm(dict(row, arch=80, regs=32, shared_bytes=100_000)) == 1
    assert gpu_fit.problems(dict(row, ctas_per_sm_configured=8)) == []
    assert any("blocks per SM" in p for p in gpu_fit.problems(dict(row, regs=160, ctas_per_sm_configured=8)))


def test_the_docs_table_is_rendered_from_the_recorded_fits():
    """docs/benchmarks.md's table of fits is gpu_fit.markdown of docs/gpu-fit.json (regenerated together:
    tools/device/gpu_fit.py --merge-into docs/gpu-fit.json --update-doc docs/benchmarks.md)."""
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    begin, end = gpu_fit.MARKERS
    body = doc.split(begin, 1)[1].split(end, 1)[0]
    assert body == "\n" + gpu_fit.markdown(gpu_fit.load(ROOT / "docs" / "gpu-fit.json"))
    assert gpu_fit.update_doc(doc, gpu_fit.load(ROOT / "docs" / "gpu-fit.json")) == doc


def test_the_fit_file_merges_one_run_per_triton_and_loads_both_formats(tmp_path):
    """A plain list of rows (``--json``) is one run per rows' ``triton`` ("unknown" without one); merging a run
    replaces that version's section, keeps the others in version order (3.10 after 3.6) and drops "unknown"."""
    row = dict(kernel="_tile_reduce_kernel", variant="", arch=90, regs=40, spill_bytes=0, shared_bytes=0,
               compile_s=0.5, tensor_cores=False, num_warps=4)
    path = tmp_path / "fit.json"
    path.write_text(json.dumps([dict(row, triton="3.6.0"), dict(row, triton="3.5.1", regs=41), row]))
    runs = gpu_fit.load(path)
    assert set(runs) == {"3.5.1", "3.6.0", "unknown"}
    assert runs["3.5.1"] == {"triton": "3.5.1", "rows": [dict(row, triton="3.5.1", regs=41)]}
    assert runs["unknown"]["rows"] == [row]
    data = gpu_fit.merge_into(path, {"triton": "3.10.0", "rows": [dict(row, triton="3.10.0")]})
    assert data["triton_versions"] == ["3.5.1", "3.6.0", "3.10.0"]
    assert json.loads(path.read_text()) == data
    new = dict(row, triton="3.6.0", regs=64)
    gpu_fit.merge_into(path, {"triton": "3.6.0", "rows": [new]})
    again = gpu_fit.load(path)
    assert list(again) == ["3.5.1", "3.6.0", "3.10.0"]
    assert again["3.6.0"]["rows"] == [new] and again["3.5.1"] == runs["3.5.1"]
    fresh = gpu_fit.merge_into(tmp_path / "none.json", {"triton": "3.5.1", "rows": []})   # no file yet
    assert fresh["triton_versions"] == ["3.5.1"] and gpu_fit.load(tmp_path / "none.json") == fresh["runs"]
    assert gpu_fit.default_variant("bf16 " + gpu_fit.DEFAULT_TAG) == "bf16"
    assert gpu_fit.default_variant("bf16 expnormal,rbf_env=1,filt_env=1") == "bf16 expnormal,rbf_env=1,filt_env=1"
