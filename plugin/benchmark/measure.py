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
  for a CUDA device; ``platform`` in the configuration names another, e.g. OpenCL). ``torch_cuda_graph``
  (optional, default False): the TorchForce with openmm-torch's CUDA-graph properties
  (:data:`flashschnet.openmm.force.CUDA_GRAPH_PROPERTIES`; the warm-up then covers the capture). CUDA: peak
  memory of torch's allocator (the TorchForce's) from before the model is loaded.
* :func:`tempering_loop` -- the same System as R walkers of a parallel-tempering run (the ensemble driver in
  this process, one block), with an exchange every ``exchange_interval`` steps.

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


def model_options(cfg: Dict[str, Any]):
    """The :class:`~flashschnet.options.ModelOptions` of a configuration (its ``dtype``, "float32" or "float64",
    is the precision; ``compress``, ``compress_knots``, ``quantize``, ``matmul`` and ``cuda_graph`` are optional)."""
    from flashschnet.names import PRECISIONS
    from flashschnet.options import ModelOptions

    precision = {dtype: name for name, dtype in PRECISIONS.items()}.get(cfg["dtype"], cfg["dtype"])
    return ModelOptions(backend=cfg["backend"], precision=precision, quantize=cfg.get("quantize", "none"),
                        compress=cfg.get("compress") or "none", compress_knots=cfg.get("compress_knots"),
                        matmul=cfg.get("matmul") or "auto", cuda_graph=bool(cfg.get("cuda_graph", False)))


def load(cfg: Dict[str, Any], device):
    """The configuration's model (its file, or the built-in one of :mod:`.defaults`) as its options make it
    (:func:`flashschnet.options.prepare_model`: backend, precision, filter tables, then 16-bit weights)."""
    from flashschnet.options import prepare_model

    from .defaults import default_model

    return prepare_model(cfg.get("model") or default_model(), model_options(cfg), device)


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
    model = load(cfg, device)
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


def openmm_loop(cfg: Dict[str, Any], module=None) -> Dict[str, Any]:
    """Time ``Simulation.step`` for R packed replicas (network only) for one configuration. ``module``: a ready
    network module to run in place of the configuration's model (TorchScript for a TorchForce, eager for a
    PythonForce; :func:`flashschnet.openmm.build_system`'s ``module``), e.g. the do-nothing force of
    :mod:`.overhead`; the model is still loaded (the System's checks)."""
    torch = _setup_torch(cfg)
    import flashschnet
    import numpy as np
    import openmm
    import openmm.app
    from openmm import unit

    from flashschnet.openmm import build_system, cg_topology, replica_positions_nm

    from flashschnet.openmm.force import CUDA_GRAPH_PROPERTIES

    device, R = cfg["device"], int(cfg["replicas"])
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    model = load(cfg, device)
    mol = flashschnet.map_pdb(cfg["pdb"])
    graph = bool(cfg.get("torch_cuda_graph", False))
    system = build_system(mol, model, replicas=R, priors=None, network_force=cfg.get("network_force", "torch"),
                          torch_properties=CUDA_GRAPH_PROPERTIES if graph else None,
                          compress="none",        # the configuration's model as prepared (its tables or none)
                          module=module)
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
    if graph:  # the eager calls before openmm-torch captures the graph, then two replays, all untimed
        warm = max(warm, int(CUDA_GRAPH_PROPERTIES["CUDAGraphWarmupSteps"]) + 2)
    sim.step(warm)
    finish()
    n = int(cfg["steps"])
    t0 = time.perf_counter()
    sim.step(n)
    state = finish()
    wall = time.perf_counter() - t0
    finite = bool(np.isfinite(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)).all())
    energy = sim.context.getState(getEnergy=True).getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    per_replica = ns_per_day(wall / n)
    out = {
        "platform": name,
        "warmup_steps": warm,
        "seconds": wall,
        "ms_per_step": wall * 1e3 / n,
        "ns_per_day_per_replica": per_replica,
        "ns_per_day_aggregate": per_replica * R,
        "positions_finite": finite,
        "final_potential_kJ_mol": energy,
        "torch_cuda_graph": graph,
    }
    if cuda:  # torch's allocator serves the TorchForce (libtorch in this process); the device total adds OpenMM's
        free, total = torch.cuda.mem_get_info()
        out.update(peak_allocated_mb=torch.cuda.max_memory_allocated() / 2**20,
                   gpu_used_mb=(total - free) / 2**20,
                   memory_method="torch.cuda.max_memory_allocated since before the model was loaded "
                                 "(peak_allocated_mb); device memory in use after the loop, all processes "
                                 "(gpu_used_mb)")
    return out


class _BenchBuilder:
    """The ensemble builder of :func:`tempering_loop`: R packed replicas of the configuration's structure with its
    model (network only, no priors), the network force of the configuration, energies from the same module."""

    def __init__(self, cfg: Dict[str, Any]):
        self.cfg = cfg

    def __call__(self, replicas: int):
        import flashschnet
        import numpy as np
        import torch

        from flashschnet.openmm import build_system, cg_topology, replica_positions_nm
        from flashschnet.openmm.energies import ReplicaEnergies
        from flashschnet.openmm.ensemble.block import BlockSystem
        from flashschnet.openmm.force import OpenMMNetwork, network_module

        cfg = self.cfg
        model = load(cfg, cfg["device"])
        mol = flashschnet.map_pdb(cfg["pdb"])
        types = torch.as_tensor(mol.bead_types, dtype=torch.long)
        python = cfg.get("network_force", "torch") == "python"
        module = OpenMMNetwork(model, types, replicas) if python else network_module(model, types, replicas)
        system = build_system(mol, model, replicas=replicas, priors=None, module=module,
                              network_force="python" if python else "torch")
        return BlockSystem(system=system, topology=cg_topology(mol, replicas), trajectory_topology=cg_topology(mol, 1),
                           particles=mol.n_beads, masses_amu=np.asarray(mol.masses, dtype=float),
                           positions_nm=replica_positions_nm(mol, replicas),
                           energies=ReplicaEnergies(module, mol, None, replicas, cfg.get("platform") or "CPU"))


def tempering_loop(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Parallel tempering of R walkers (a geometric ladder 300-450 K) in one packed Context: the ensemble driver
    (:func:`flashschnet.openmm.ensemble.drive`, in this process) for ``steps`` steps with an exchange every
    ``exchange_interval`` steps (default 10), after a first, untimed run of ``warmup`` steps (rounded up to an
    exchange) that the timed one resumes; the same integrator, energies and files as flashschnet-simulate
    --temperatures."""
    _setup_torch(cfg)
    import tempfile

    from flashschnet.openmm.ensemble import EnsemblePlan, LocalBlocks, block_specs, drive, geometric_ladder

    R, n = int(cfg["replicas"]), int(cfg["steps"])
    every = int(cfg.get("exchange_interval") or min(10, n))
    name = cfg.get("platform") or ("CUDA" if cfg["device"].startswith("cuda") else "CPU")
    cfg = dict(cfg, platform=name)
    warm = every * max(1, -(-int(cfg["warmup"]) // every))
    timed = every * max(1, n // every)
    with tempfile.TemporaryDirectory() as work:
        def plan(steps):
            return EnsemblePlan(out=work, steps=steps, temperatures_K=geometric_ladder(300.0, 450.0, R),
                                exchange_interval=every, report_interval=every, checkpoint_interval=warm,
                                dt_fs=4.0, friction_per_ps=1.0, seed=SEED, blocks=1, platform=name,
                                threads=int(cfg["threads"]) if name == "CPU" else None)

        specs = block_specs(plan(warm))
        blocks = LocalBlocks(_BenchBuilder(cfg), specs)
        quiet = lambda m: None  # noqa: E731
        try:
            drive(plan(warm), blocks, specs, resume=False, progress=False, echo=quiet)       # warm-up, untimed
            t0 = time.perf_counter()
            r = drive(plan(warm + timed), blocks, specs, resume=True, progress=False, echo=quiet)
            total = time.perf_counter() - t0
        finally:
            blocks.close()
    t = r.timings
    return {"platform": name, "walkers": R, "steps": timed, "warmup_steps": warm, "exchange_interval": every,
            "seconds": t["loop"], "ns_per_day_aggregate": r.ns_per_day_aggregate,
            "ns_per_day_per_replica": r.ns_per_day_aggregate / R,
            "ms_per_step": t["loop"] * 1e3 / timed, "exchanges": t["exchanges"],
            "exchange_overhead_ms": 1e3 * (t["advance"] - t["block_steps"] + t["exchange"]) / max(t["segments"], 1),
            "acceptance_mean": float(sum(r.acceptance) / len(r.acceptance)) if r.acceptance else None,
            "with_restore_s": total}


#: configuration kind -> the function that measures it
KINDS = {"energy_forces": energy_forces, "openmm": openmm_loop, "tempering": tempering_loop}
