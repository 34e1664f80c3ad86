"""flashschnet.openmm.benchmark.perf_model (the performance model tools/perf_model.py prints): the FLOP/byte model
of a triton step is computed from the real structure and the kernels' arithmetic (docs/benchmarks.md quotes it),
and it scales with the replica count."""
from __future__ import annotations

from flashschnet.openmm.benchmark import perf_model


def test_model_counts_bpti_and_scales_with_replicas():
    m64, m8 = perf_model.model(64), perf_model.model(8)
    assert m64["N"] == 284 and m64["T"] == 18 and m64["slots"] == 171
    assert 0 < m64["active_tile_pairs"] <= m64["slots"]
    fwd = [r for r in m64["rows"] if r["kernel"] == "_cfconv_fwd_kernel" and r["dot"] == "bf16"][0]
    # 3 blocks x R x active tile pairs x 256 bead pairs x 2 (64*128 + 128*128) FLOPs
    assert fwd["flops"] == 3 * 64 * m64["active_tile_pairs"] * 256 * 2 * (64 * 128 + 128 * 128)
    bwd = [r for r in m64["rows"] if r["kernel"] == "_cfconv_bwd_kernel" and r["dot"] == "bf16"][0]
    assert bwd["flops"] == 2 * fwd["flops"]
    f8 = [r for r in m8["rows"] if r["kernel"] == "_cfconv_fwd_kernel" and r["dot"] == "bf16"][0]
    assert f8["flops"] * 8 == fwd["flops"]
    assert all(r["ms_at_30pct"] >= r["ms_at_peak"] > 0 for r in m64["rows"])
