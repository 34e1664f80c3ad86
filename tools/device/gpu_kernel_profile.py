"""Where one ``energy_forces`` call of the triton backend spends its GPU time, kernel by kernel (torch.profiler),
for the benchmark model on BPTI at a few replica counts: the data behind the latency floor of the first GPU run
(one replica costs nearly what eight do; docs/benchmarks.md, GPU section).

    python tools/device/gpu_kernel_profile.py [--replicas 1,64] [--compress none,float32] [--out DIR]

Prints, per configuration, the wall time of a call (median of 20, after warm-up), the summed device time of its
kernels, the number of launches and the top kernels by device time; writes ``DIR/gpu_kernel_profile.json``.
Needs a CUDA GPU (the device machine: run after tools/device/device_install.sh).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", default="1,64")
    p.add_argument("--compress", default="none,float32")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from flashschnet.cg.mapping import map_pdb
    from flashschnet.openmm.benchmark.defaults import default_model, default_pdb
    from flashschnet.transforms import apply_compression

    if not torch.cuda.is_available():
        print("gpu_kernel_profile: no CUDA device", file=sys.stderr)
        return 2
    with default_pdb() as path:
        mol = map_pdb(str(path))
    types = torch.as_tensor(mol.bead_types, device="cuda")
    rows = []
    for comp in args.compress.split(","):
        model = apply_compression(default_model(backend="triton", device="cuda"), comp, None).network
        for R in [int(r) for r in args.replicas.split(",")]:
            pos = torch.as_tensor(mol.positions, dtype=torch.float32, device="cuda")[None].repeat(R, 1, 1)
            pos = pos + 0.01 * torch.randn_like(pos)
            for _ in range(5):
                model.energy_forces(pos, types)
            torch.cuda.synchronize()
            walls = []
            for _ in range(20):
                t0 = time.perf_counter()
                model.energy_forces(pos, types)
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - t0) * 1e3)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    model.energy_forces(pos, types)
                torch.cuda.synchronize()
            kernels = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA
                       or getattr(e, "self_device_time_total", 0) > 0]
            per = sorted(((e.key, getattr(e, "self_device_time_total", 0) / 5e3, e.count / 5) for e in kernels),
                         key=lambda t: -t[1])
            device_ms = sum(t[1] for t in per)
            row = {"compress": comp, "replicas": R, "beads": mol.n_beads, "wall_ms_median": statistics.median(walls),
                   "device_ms": device_ms, "launches": sum(t[2] for t in per),
                   "top": [{"kernel": k[:80], "ms": ms, "calls": n} for k, ms, n in per[:args.top]]}
            rows.append(row)
            print(f"\n== compress {comp}, R = {R} x {mol.n_beads} beads: wall {row['wall_ms_median']:.2f} ms/call, "
                  f"kernels {device_ms:.2f} ms in {row['launches']:.0f} launches")
            for t in row["top"]:
                print(f"   {t['ms']:8.3f} ms  {t['calls']:5.0f} x  {t['kernel']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_kernel_profile.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
