"""The triton engine's launches (flashschnet.fused.launches): each names its ``@triton.jit`` kernel directly (no
lookup by name) with the launch options of its configuration, and step_launches / table_step_launches /
node_step_launches -- what tools/device/gpu_fit.py compiles -- cover every kernel a step launches, with arguments the
kernel takes. The test-only standalone ops live in tests/helpers, not in the package."""
from __future__ import annotations

import subprocess
import sys
from unittest import mock

import torch

from flashschnet.fused import launches
from flashschnet.fused.launches import (INTERPRETER_PROGRAMS, KERNEL_CONFIGS, TABLE_VARIANTS, Launch, config, kernels,
                                        node_step_launches, persistent_programs, step_launches, table_step_launches)


def test_step_launches_reference_their_kernels_with_their_options():
    cfconv, tiles, nodes = kernels()
    launches = (step_launches(F=16, K=5, N=20) + table_step_launches(F=16, N=20, knots=4)
                + node_step_launches(F=16, H=16, widths=(16, 8), blocks=2, N=20))
    assert {l.name for _, l in launches} == set(KERNEL_CONFIGS)          # every kernel a step launches
    assert {v for v, l in launches if l.name == "_cfconv_table_bwd_kernel"} == {n for n, *_ in TABLE_VARIANTS}
    for variant, launch in launches:
        assert isinstance(launch, Launch)
        assert launch.kernel in [getattr(m, launch.name, None) for m in (cfconv, tiles, nodes)], variant
        c = config(launch.name, launch.args[0].dtype)
        assert launch.options == {k: c[k] for k in ("num_warps", "num_stages", "maxnreg") if c.get(k) is not None}
        # the arguments in the kernel's order, then its constexprs: nothing missing, nothing extra
        assert list(launch.kernel.arg_names) == list(launch.kernel.arg_names[:len(launch.args)]) + list(launch.meta)
        if "JB" in launch.meta:
            assert launch.meta["JB"] == c["JB"] and 16 % c["JB"] == 0


def test_configurations():
    """The launch configurations: float64 and 16-bit tables change only what their registers need; the
    interpreter's run whole tile pairs unless a test asks for the GPU's; the persistent grids keep a program on one
    channel group."""
    assert config("_cfconv_table_fwd_kernel", torch.float64)["num_warps"] == 8
    bwd = "_cfconv_table_bwd_kernel"
    assert config(bwd, sixteen=True)["ctas_per_sm"] < config(bwd)["ctas_per_sm"]
    assert config("_node_fwd_kernel", torch.float64) == config("_node_fwd_kernel", torch.float32)
    assert config("_cfconv_fwd_kernel")["JB"] == 16                        # this test runs interpreted
    with mock.patch.object(launches, "GPU_CONFIGS_IN_INTERPRETER", True):
        assert config("_cfconv_fwd_kernel") == KERNEL_CONFIGS["_cfconv_fwd_kernel"]
    for items, groups in ((1, 1), (2, 2), (7, 4), (100, 4)):
        g = persistent_programs("cpu", items, "_cfconv_table_fwd_kernel", torch.float32, groups)
        assert g % groups == 0 and groups <= g <= max(groups, min(items, INTERPRETER_PROGRAMS))


def test_the_package_registers_no_test_only_ops():
    code = ("import torch, flashschnet, flashschnet.fused.triton_engine; "
            "print([n for n in ('energy_forces', 'energy_forces_scaled', 'cfconv_fwd', 'cfconv_bwd', "
            "'cfconv_table_fwd', 'cfconv_table_bwd') if hasattr(torch.ops.flashschnet, n)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['energy_forces', 'energy_forces_scaled']"
