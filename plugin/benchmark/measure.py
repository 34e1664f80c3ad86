"""One benchmark configuration, measured in the current process (run it in a fresh one: see :mod:`.worker`).

A configuration is a plain dict (it travels as JSON): ``pdb``, ``model`` (a file, or None for the built-in
model of :mod:`.defaults`), ``backend``, ``compress`` (a filter-table dtype of
:data:`flashschnet.transforms.COMPRESSIONS`, optional) and ``compress_knots`` (optional; None: the library's
default), ``quantize`` (a variant of :data:`flashschnet.names.VARIANTS`),
``device``, ``dtype``, ``threads``, ``replicas``, ``warmup`` and ``repeats`` (energy_forces) or ``steps`` and
``network_force`` (OpenMM).

* :func:`energy_forces` -- ``model.energy_forces`` on R copies of the structure, each displaced by
  :data:`DISPLACEMENT_A` Gaussian noise (seed :data:`SEED`): ``warmup`` untimed calls, then ``repeats``
  timed ones (``time.perf_counter``; CUDA: synchronised before and after). Peak memory, CPU: ``ru_maxrss``
  after the timed calls minus the RSS (``/proc/self/statm``) right before the first call, the kernel's RSS
  high-water mark reset first (``/proc/self/clear_refs``) where allowed, so that loading does not count.
  CUDA: ``max_memory_allocated`` minus the memory allocated before the first call.
* :func:`openmm_loop` -- R packed replicas in one System (network only, no priors), LangevinMiddle 4 fs,
  300 K; ``max(1, warmup)`` steps, then ``steps`` timed ``Simulation.step`` steps on the CPU platform (CUDA
  for a CUDA device; ``platform`` in the configuration names another, e.g. OpenCL).

ns/day at a 4 fs time step: per replica ``4e-6 ns * 86400 s / (s per call)``, aggregate ``R *`` that.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Dict

TIMESTEP_NS = 4e-6  # 4 fs
SECONDS_PER_DAY = 86400.0
DISPLACEMENT_A = 0.1
SEED = 1234


def ns_per_day(seconds_per_step: float) -> float:
    """Simulated ns per day of one replica at a 4 fs time step."""
    return TIMESTEP_NS * SECONDS_PER_DAY / seconds_per_step


# ------------------------------------------------------------------------------------------ memory (Linux)
def rss_bytes() -> int:
    """This process's resident set size now."""
    with open("/proc/self/statm") as fh:
        resident_pages = int(fh.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def maxrss_bytes() -> int:
    """This process's peak resident set size (since the last high-water mark reset)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def reset_hwm() -> bool:
    """Reset the kernel's RSS high-water mark (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------ inputs
def _setup_torch(cfg: Dict[str, Any]):
    import torch

    torch.set_num_threads(int(cfg["threads"]))
    return torch


def positions(mol, replicas: int, dtype, device):
    """``[R, N, 3]``: R copies of ``mol``'s positions, each displaced by Gaussian noise of
    :data:`DISPLACEMENT_A` (fixed seed)."""
    import torch

    g = torch.Generator().manual_seed(SEED)
    base = torch.as_tensor(mol.positions, dtype=torch.float64)
    pos = base.unsqueeze(0).repeat(replicas, 1, 1)
    pos = pos + DISPLACEMENT_A * torch.randn(pos.shape, generator=g, dtype=torch.float64)
    return pos.to(dtype=dtype, device=device).contiguous()


def load(cfg: Dict[str, Any], dtype, device):
    """The configuration's model (its file, or the built-in one) with its backend, filter tables and 16-bit
    variant (tables first, as everywhere; and the optional ``matmul`` precision and ``cuda_graph`` switch of the
    fused backends)."""
    import flashschnet
    from flashschnet.transforms import apply_compression, apply_variant

    from .defaults import default_model

    opts = dict(matmul=cfg.get("matmul") or "auto", cuda_graph=bool(cfg.get("cuda_graph", False)))
    if cfg.get("model"):
        model = flashschnet.load_model(cfg["model"], backend=cfg["backend"], dtype=dtype, device=device, **opts)
    else:
        model = default_model(backend=cfg["backend"], dtype=dtype, device=device, **opts)
    model = apply_compression(model, cfg.get("compress") or "none", cfg.get("compress_knots"))
    return apply_variant(model, cfg.get("quantize", "none"))


def weights_kb(model) -> float:
    """Size of the network's parameters and buffers, KiB (what 16-bit storage shrinks)."""
    return sum(t.numel() * t.element_size() for t in model.network.state_dict().values()) / 1024.0


# ------------------------------------------------------------------------------------------ measurements
def energy_forces(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Time ``model.energy_forces`` and its peak extra memory for one configuration (see the module docstring)."""
    torch = _setup_torch(cfg)
    import flashschnet

    device, R = cfg["device"], int(cfg["replicas"])
    dtype = getattr(torch, cfg["dtype"])
    cuda = device.startswith("cuda")
    model = load(cfg, dtype, device)
    mol = flashschnet.map_pdb(cfg["pdb"])
    pos = positions(mol, R, dtype, device)
    types = torch.as_tensor(mol.bead_types, dtype=torch.long, device=device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
        mem_before = torch.cuda.memory_allocated()
        hwm_reset = True
    else:
        hwm_reset = reset_hwm()
        mem_before = rss_bytes()
    maxrss_before = None if cuda else maxrss_bytes()

    energy = None
    for _ in range(int(cfg["warmup"])):
        energy, forces = model.energy_forces(pos, types)
        sync()
    times = []
    for _ in range(int(cfg["repeats"])):
        sync()
        t0 = time.perf_counter()
        energy, forces = model.energy_forces(pos, types)
        sync()
        times.append(time.perf_counter() - t0)
    if cuda:
        peak_extra = torch.cuda.max_memory_allocated() - mem_before
    else:
        peak_extra = maxrss_bytes() - mem_before
    finite = bool(torch.isfinite(energy).all()) and bool(torch.isfinite(forces).all())
    med = statistics.median(times)
    per_replica = ns_per_day(med)
    return {
        "n_beads": int(mol.n_beads),
        "weights_kb": weights_kb(model),
        "times_ms": [t * 1e3 for t in times],
        "median_ms": med * 1e3,
        "min_ms": min(times) * 1e3,
        "ns_per_day_per_replica": per_replica,
        "ns_per_day_aggregate": per_replica * R,
        "peak_extra_mb": peak_extra / 2**20,
        "memory_before_mb": mem_before / 2**20,
        "memory_method": ("cuda max_memory_allocated - memory_allocated before" if cuda else
                          "ru_maxrss after - RSS (statm) before first call"
                          + (", high-water mark reset before" if hwm_reset else
                             f", high-water mark NOT reset (ru_maxrss before: {maxrss_before / 2**20:.0f} MB)")),
        "outputs_finite": finite,
    }


def openmm_loop(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Time ``Simulation.step`` for R packed replicas (network only) for one configuration."""
    torch = _setup_torch(cfg)
    import flashschnet
    import numpy as np
    import openmm
    import openmm.app
    from openmm import unit

    from flashschnet.openmm import build_system, cg_topology, replica_positions_nm

    device, R = cfg["device"], int(cfg["replicas"])
    dtype = getattr(torch, cfg["dtype"])
    model = load(cfg, dtype, device)
    mol = flashschnet.map_pdb(cfg["pdb"])
    system = build_system(mol, model, replicas=R, priors=None, network_force=cfg.get("network_force", "torch"))
    integrator = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond, 4 * unit.femtosecond)
    integrator.setRandomNumberSeed(SEED)
    name = cfg.get("platform") or ("CUDA" if device.startswith("cuda") else "CPU")
    plat = openmm.Platform.getPlatformByName(name)
    props = {"Threads": str(cfg["threads"])} if name == "CPU" else {}
    sim = openmm.app.Simulation(cg_topology(mol, R), system, integrator, plat, props)
    sim.context.setPositions(replica_positions_nm(mol, R))
    sim.context.setVelocitiesToTemperature(300 * unit.kelvin, SEED)

    def finish():  # make sure queued work is done (asynchronous platforms)
        return sim.context.getState(getPositions=True)

    warm = max(1, int(cfg["warmup"]))
    sim.step(warm)
    finish()
    n = int(cfg["steps"])
    t0 = time.perf_counter()
    sim.step(n)
    state = finish()
    wall = time.perf_counter() - t0
    finite = bool(np.isfinite(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)).all())
    per_replica = ns_per_day(wall / n)
    return {
        "platform": name,
        "warmup_steps": warm,
        "seconds": wall,
        "ms_per_step": wall * 1e3 / n,
        "ns_per_day_per_replica": per_replica,
        "ns_per_day_aggregate": per_replica * R,
        "positions_finite": finite,
    }


#: configuration kind -> the function that measures it
KINDS = {"energy_forces": energy_forces, "openmm": openmm_loop}
