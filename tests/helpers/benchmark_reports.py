"""Made-up benchmark reports: a threads benchmark's, a device run's device.json and a precision prediction."""
from __future__ import annotations


#: (load, model, R) -> config -> ns/day of rounds 0, 1, 2
SPEEDS = {
    ("idle", "exact", 1): {"default": [30, 31, 29], "threads1": [20, 21, 22], "before": [32, 33, 90]},
    ("idle", "exact", 8): {"default": [40, 40, 40], "threads1": [30, 30, 30], "before": [41, 42, 43]},
    ("loaded", "exact", 1): {"default": [17, 18, 19], "threads1": [19, 20, 21], "before": [3, 2, 4]},
    ("loaded", "exact", 8): {"default": [10, 10, 10], "threads1": [15, 15, 15], "before": [1, 1, 1]},
}


def threads_report(speeds=SPEEDS, background=0.05, errors=()):
    """A threads benchmark report (tools/benchmarks/threads_benchmark.py's JSON) of the ns/day ``speeds``, with the
    errors ``errors`` ((load, model, R, config, round) tuples) and ``background`` cores busy in the idle rounds."""
    records = []
    for (load, model, R), by_config in speeds.items():
        for config, values in by_config.items():
            for rnd, v in enumerate(values):
                rec = {"model": model, "replicas": R, "steps": 300 // R, "config": config, "load": load,
                       "round": rnd,
                       "torch_threads": 1 if config == "threads1" or (config == "default" and load == "loaded") else 2,
                       "background_cores": background if load == "idle" else 1.0}
                if (load, model, R, config, rnd) in errors:
                    rec["error"] = "RuntimeError: boom"
                else:
                    rec["ns_per_day"] = float(v)
                records.append(rec)
    return {"machine": {"cpu_model": "AMD EPYC", "cores": 2, "cores_available": 2, "python": "3.11.7",
                        "platform": "Linux", "torch_version": "2.11", "openmm_version": "8.5",
                        "torch_default_threads": 2},
            "settings": {"pdb": "examples/1L2Y_trpcage.pdb", "model": "examples/trpcage_trained.pt", "steps": 300,
                         "warmup": 5, "cell_seconds": 6.0, "rounds": 3, "replicas": [1, 8], "models": ["exact"],
                         "configs": ["default", "threads1", "before"], "loads": ["idle", "loaded"], "dt_fs": 4.0,
                         "quick": False,
                         "command": "python tools/benchmarks/threads_benchmark.py --rounds 3 --steps 300"},
            "loads": [{"round": r, "load": k, "loadavg_before": [0.1, 0.2, 0.3], "loadavg_after": [0.4, 0.5, 0.6],
                       "busiest_after": []} for r in range(3) for k in ("idle", "loaded")],
            "records": records, "wall_s": 600.0}


def ef_row(backend, R, ms, peak, **kw):
    """A device.json timing row of the energy-and-forces call (``backend``, ``R`` replicas, ``ms`` per call)."""
    return dict(dict(backend=backend, quantize="none", matmul="auto", cuda_graph=False, compress="none"), **kw,
                replicas=R, status="ok", seq=0, median_ms=ms, min_ms=ms, ns_per_day_per_replica=345.6 / ms,
                ns_per_day_aggregate=345.6 / ms * R, peak_extra_mb=peak, weights_kb=957.0, n_beads=290)


def omm_row(backend, R, ms, force="TorchForce", **kw):
    """A device.json OpenMM row (``backend``, ``R`` replicas, ``ms`` per step through ``force``)."""
    return dict(dict(platform="CUDA", kind="openmm", variant="tf32" if backend != "reference" else "exact",
                     backend=backend, quantize="none", matmul="auto", compress="none", cuda_graph=False,
                     replicas=R, steps=50, openmm_force=force, network_force=force), **kw,
                status="ok", seq=0, ms_per_step=ms, ns_per_day_per_replica=345.6 / ms,
                ns_per_day_aggregate=345.6 / ms * R, peak_allocated_mb=120.0, gpu_used_mb=2000.0)


def synthetic():
    """A GPU device.json that meets every target: 64 x BPTI at 3 ms/step (7,373 ns/day), 20x the reference,
    5 % of its memory; a tf32 check that passes."""
    timings = [ef_row("reference", 64, 40.0, 1000.0), ef_row("triton", 64, 2.0, 50.0)]
    openmm = [omm_row("triton", 64, 3.0), omm_row("reference", 64, 60.0),
              omm_row("triton", 64, 2.5, "TorchForce+CUDA graph"),
              dict(omm_row("triton", 128, 1.0), status="skipped", reason="predicted 300 s > the 20 s left")]
    check = {"check": "tf32", "backend": "triton", "matmul": "auto", "rule": "measured <= 2 x predicted + 1e-06",
             "energy_predicted": 3e-4, "energy_measured": 4e-4, "energy_limit": 6.01e-4,
             "forces_predicted": 1e-3, "forces_measured": 1.5e-3, "forces_limit": 2.001e-3, "passed": True,
             "item": "tf32 check vs tf32-accuracy.json", "status": "ok", "seq": 1}
    corr = dict(backend="triton", quantize="none", matmul="auto", compress="none", item="triton+none", status="ok",
                seq=0, energy_rel_err_vs_oracle=4e-4, forces_rel_err_vs_oracle=1.5e-3, bitwise_repeatable=True,
                finite=True, energy_rel_diff_vs_reference=4e-4)
    def stage(results, skips=(), errors=()):
        return dict(status="error" if errors else "partial" if skips else "ok", wall_s=12.0, results=list(results),
                    skips=list(skips), errors=list(errors))
    return {"settings": {"device": "cuda", "smoke": False, "kernel_backend": "triton", "budget": 450.0,
                         "backends": ["reference", "torch", "triton"], "replicas": [1, 8, 64, 128],
                         "openmm_replicas": [1, 8, 64, 128], "openmm_steps": 50, "commit": "abc123" * 6 + "abcd",
                         "started_utc": "2026-12-03 06:00:00 UTC", "pdb": "flashschnet/data/4PTI_bpti.pdb (packaged)",
                         "oracle": "tests/data/oracles/mlcg_schnet_A.pt",
                         "command": "python tools/device/device_checks.py"},
            "machine": {"gpus": ["NVIDIA H200, 580.65.06, 143771 MiB"], "python": "3.12.3", "torch": "2.11.0",
                        "torch_cuda": "13.0", "triton": "3.6.0", "numpy": "2.5.0", "openmm": "8.6.1",
                        "openmmtorch": "acellera-openmmtorch-cu13 1.10", "platforms": ["Reference", "CPU", "CUDA"],
                        "plugin_load_failures": []},
            "stages": {"environment": stage([{"item": "versions"}]), "compile": stage([{"item": "x"}]),
                       "correctness": stage([corr, check]), "timings": stage(timings),
                       "openmm": stage(openmm[:3], skips=[openmm[3]])},
            "timings": timings, "ratios": [], "openmm": openmm, "total_wall_s": 431.0, "passed": True}


#: a generous prediction (the float32 errors on the oracle are ~6e-6 / ~2e-5): the ieee check passes on a CPU
PREDICTION = {"prediction": {"oracle": "tests/data/oracles/mlcg_schnet_A.pt",
                             "tf32": {"energy_rel_err_vs_float64": 3e-4, "forces_rel_err_vs_float64": 1e-3},
                             "ieee": {"energy_rel_err_vs_float64": 1e-5, "forces_rel_err_vs_float64": 3e-5},
                             "rule": "measured <= 2 x predicted + 1e-6"}}
