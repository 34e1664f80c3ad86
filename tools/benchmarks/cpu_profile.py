"""Where a CPU step's time goes: ``torch.profiler`` over one ``energy_forces`` call of the built-in benchmark
model on BPTI (:mod:`flashschnet.openmm.benchmark`), per configuration, side by side in one process.

    python tools/benchmarks/cpu_profile.py [--replicas 8] [--threads 2] [--configs torch,torch+tab-f32,...] [--top 8]
                                           [--json OUT]

A configuration is ``torch`` or ``reference``, optionally ``+tab-f32`` (float32 filter tables,
:func:`flashschnet.compress`) and ``+ops`` (the torch backend's pair loops as PyTorch ops instead of the fused C
kernels of :mod:`flashschnet.kernels.cpu_pairs`). Prints, per configuration, the wall time of the profiled
call and its top operators by self CPU time; ``--json`` writes the same.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch


def _model(config: str):
    from flashschnet import compress
    from flashschnet.openmm.benchmark.defaults import default_model

    parts = config.split("+")
    model = default_model(backend=parts[0]).network
    if "tab-f32" in parts:
        model = compress(model, dtype="float32")
    return model, "ops" in parts


def profile(config: str, pos, types, top: int):
    from torch.profiler import profile as torch_profile

    import flashschnet.fused.torch_engine as te
    from flashschnet.fused import clear_engine_cache

    model, ops = _model(config)
    original = te.TorchPairEngine.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **dict(kwargs, fused_loops=False if ops else kwargs.get("fused_loops")))

    te.TorchPairEngine.__init__ = init
    try:
        clear_engine_cache()
        model.energy_forces(pos, types)               # warm-up: engine, pair list, compiled kernels
        with torch_profile() as prof:
            t0 = time.perf_counter()
            model.energy_forces(pos, types)
            wall = time.perf_counter() - t0
    finally:
        te.TorchPairEngine.__init__ = original
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return {"config": config, "wall_ms": wall * 1e3,
            "top": [{"op": e.key, "self_ms": e.self_cpu_time_total / 1e3, "calls": e.count} for e in rows]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--configs", default="torch+ops,torch,torch+tab-f32+ops,torch+tab-f32")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from flashschnet import map_pdb
    from flashschnet.openmm.benchmark.defaults import default_pdb
    from flashschnet.openmm.benchmark.measure import positions

    with default_pdb() as path:
        mol = map_pdb(str(path))
    pos = positions(mol, args.replicas, torch.float32, "cpu")
    types = torch.as_tensor(mol.bead_types)
    out = {"machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
           "replicas": args.replicas, "beads": int(pos.shape[1]), "results": []}
    for config in args.configs.split(","):
        r = profile(config, pos, types, args.top)
        out["results"].append(r)
        print(f"\n{config}: {r['wall_ms']:.1f} ms (profiled call, R = {args.replicas}, {args.threads} threads)")
        for row in r["top"]:
            print(f"  {row['op']:<40s} {row['self_ms']:9.1f} ms  {row['calls']:6d} calls")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
