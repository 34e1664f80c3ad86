"""The triton engine's launches (flashschnet.fused.launches): each names its ``@triton.jit`` kernel directly (no
lookup by name) with the launch options of KERNEL_CONFIGS, and step_launches / table_step_launches -- what
tools/gpu_fit.py compiles -- cover every kernel a step launches, with arguments the kernel takes. The test-only
standalone ops live in tests/helpers, not in the package."""
from __future__ import annotations

import subprocess
import sys

from flashschnet.fused.launches import (KERNEL_CONFIGS, TABLE_VARIANTS, Launch, kernels, step_launches,
                                        table_step_launches)


def test_step_launches_reference_their_kernels_with_their_options():
    cfconv, tiles = kernels()
    launches = step_launches(F=16, K=5, N=20) + table_step_launches(F=16, N=20, knots=4)
    assert {l.name for _, l in launches} == set(KERNEL_CONFIGS)          # every kernel a step launches
    assert {v for v, l in launches if l.name == "_cfconv_table_bwd_kernel"} == {n for n, *_ in TABLE_VARIANTS}
    for variant, launch in launches:
        assert isinstance(launch, Launch)
        assert launch.kernel in (getattr(cfconv, launch.name, None), getattr(tiles, launch.name, None)), variant
        assert launch.options is KERNEL_CONFIGS[launch.name]
        # the arguments in the kernel's order, then its constexprs: nothing missing, nothing extra
        assert list(launch.kernel.arg_names) == list(launch.kernel.arg_names[:len(launch.args)]) + list(launch.meta)


def test_the_package_registers_no_test_only_ops():
    code = ("import torch, flashschnet, flashschnet.fused.triton_engine; "
            "print([n for n in ('energy_forces', 'cfconv_fwd', 'cfconv_bwd', 'cfconv_table_fwd', 'cfconv_table_bwd') "
            "if hasattr(torch.ops.flashschnet, n)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['energy_forces']"
