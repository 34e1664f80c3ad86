"""Accuracy of filter compression (tabulated filters) against the exact network: the error sweep behind
``python tools/benchmarks/compression_report.py`` (a maintainer's tool, not installed; imported by it).

* :func:`load_systems` -- the test systems: the mlcg oracle model on its frames, the real converted mlcg model on
  its oracle frames, the oracle model on BPTI;
* :func:`sweep` -- for each (interpolant, knots, table dtype): the error of every block's filter ``W`` and of
  ``dW/dr`` on a dense distance grid and on the distances of the frames, and of energies and forces on the
  frames, all in float64 against the exact float64 network (:func:`flashschnet.compress`'s tables, evaluated by
  the fused CPU path; the truth by the reference backend, mlcg's autograd path).

Relative errors: ``max`` = max |error| / max |exact|, ``rms`` = RMS(error) / RMS(exact), over all values (for
``W``: of the worst block, all channels). Energies in the model's unit (kcal/mol), forces kcal/mol/A.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from flashschnet.nn.table import ORDERS, TABLE_DTYPES, knot_data, table_end, table_lookup
from flashschnet.transforms import filter_function, compress

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data" / "oracles"
SHARED = REPO_ROOT.parent / "shared" / "oracles" / "mlcg"
ORACLE = "mlcg_schnet_A.pt"
PRIOR_ORACLE = "mlcg_prior_cln.pt"
REAL_MODEL = SHARED / "real" / "real_cln_ca_model.pt"
REAL_ORACLE = "real/real_cln_ca.pt"
KINDS = ("cubic", "quintic")
KNOTS = (64, 128, 256, 512)
DTYPES = ("float64", "float32", "float16", "bfloat16")
QUICK_KNOTS = (64, 128)
QUICK_DTYPES = ("float32", "float16")
#: points of the W grid on [0, r_end) (> 10 per interval of the finest table, 768 knots)
GRID_POINTS = 8192
#: at most this many of the frames' pair distances (a random subset, fixed seed) for the W errors
MAX_FRAME_PAIRS = 8192
BPTI_FRAMES, BPTI_SIGMA_A = 3, 0.05


def data_file(name: str) -> Optional[Path]:
    """``tests/data/oracles/NAME``, else ``../shared/oracles/mlcg/NAME``, else None."""
    return next((p for p in (DATA / name, SHARED / name) if p.is_file()), None)


def sweep_points(quick: bool = False) -> List[Tuple[str, int, str]]:
    """``(kind, knots, dtype)`` of the sweep: every kind x knots x dtype, plus cubic float64/float32 tables with 1.5x
    the knots of each quintic one (the same table bytes: Q = 2 vs 3 values per knot)."""
    knots, dtypes = (QUICK_KNOTS, QUICK_DTYPES) if quick else (KNOTS, DTYPES)
    points = [(k, n, d) for k in KINDS for n in knots for d in dtypes]
    return points + [("cubic", n * 3 // 2, d) for d in dtypes if d in ("float64", "float32") for n in knots]


def table_bytes(kind: str, knots: int, filters: int, dtype: str) -> int:
    """Bytes of one block's table: knots x Q x F x itemsize (16-bit tables add a float32 scale per channel and
    order, Q x F x 4 bytes, not counted)."""
    return knots * ORDERS[kind] * filters * TABLE_DTYPES[dtype].itemsize


def _rel(err: torch.Tensor, exact: torch.Tensor) -> Tuple[float, float]:
    """``(max |err| / max |exact|, RMS(err) / RMS(exact))``."""
    err, exact = err.double(), exact.double()
    tiny = 1e-300
    return (float(err.abs().max() / exact.abs().max().clamp_min(tiny)),
            float(err.pow(2).mean().sqrt() / exact.pow(2).mean().sqrt().clamp_min(tiny)))


# ----------------------------------------------------------------------------------------------- systems
def _bpti(seed: int) -> Dict[str, Any]:
    import flashschnet
    from flashschnet.openmm.benchmark.defaults import default_pdb

    with default_pdb() as pdb:
        mol = flashschnet.map_pdb(str(pdb))
        name = pdb.name
    g = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(mol.positions, dtype=torch.float64).unsqueeze(0).repeat(BPTI_FRAMES, 1, 1)
    x[1:] += BPTI_SIGMA_A * torch.randn(x[1:].shape, generator=g, dtype=torch.float64)
    return {"positions": x, "types": torch.as_tensor(mol.bead_types, dtype=torch.long),
            "frames": f"{name} mapped to 5 beads ({mol.n_beads} beads): the structure and {BPTI_FRAMES - 1} "
                      f"copies with N(0, {BPTI_SIGMA_A}^2) A displacements (seed {seed})"}


def load_real(path: Path, backend: str, dtype=torch.float64):
    """The real mlcg pickle, converted: ``(network, priors)`` (the network a CGSchNet in ``dtype``)."""
    from flashschnet.checkpoint import build_model
    from flashschnet.convert import convert_mlcg
    from flashschnet.priors import PriorSet

    ckpt = convert_mlcg(path)
    priors = PriorSet.from_dict(ckpt["priors"]) if ckpt.get("priors") is not None else None
    return build_model(ckpt, str(path), backend=backend, dtype=dtype), priors


def load_systems(quick: bool, real_model: Path = REAL_MODEL, seed: int = 7) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The systems of the sweep (``quick``: the oracle only) and notes on what is missing.

    Each system: ``name``, ``label``, ``model`` (file), ``frames`` (description), ``positions`` [F, N, 3] float64
    (A), ``types`` [N], ``load(backend)`` -> float64 CGSchNet.
    """
    import flashschnet

    systems, notes = [], []
    oracle = data_file(ORACLE)
    if oracle is None:
        raise FileNotFoundError(f"the mlcg oracle {ORACLE} is in neither {DATA} nor {SHARED}")
    fx = torch.load(oracle, weights_only=True)

    def load_oracle(backend):
        return flashschnet.load_model(oracle, backend=backend, dtype=torch.float64).network

    systems.append({"name": "oracle", "label": "mlcg oracle (chignolin, 5 beads)", "model": oracle.name,
                    "frames": f"the oracle's {fx['positions_A'].shape[0]} frames ({fx['positions_A'].shape[1]} beads)",
                    "positions": fx["positions_A"].double(), "types": fx["bead_types"].long(), "load": load_oracle})
    if quick:
        return systems, notes
    real_frames = data_file(REAL_ORACLE)
    if not Path(real_model).is_file():
        notes.append(f"the real mlcg model {real_model} was not found (../shared/ absent): the real-model rows are "
                     f"missing and the dynamics use the oracle model with the mlcg chignolin prior")
    elif real_frames is None:
        notes.append(f"the real model's oracle frames {REAL_ORACLE} were not found: the real-model rows are missing")
    else:
        o = torch.load(real_frames, weights_only=True)
        systems.append({"name": "real", "label": "real mlcg model (chignolin, CA)", "model": Path(real_model).name,
                        "frames": f"{real_frames.name}: {o['positions_A'].shape[0]} frames "
                                  f"({o['positions_A'].shape[1]} beads)",
                        "positions": o["positions_A"].double(), "types": o["bead_types"].long(),
                        "load": lambda backend: load_real(Path(real_model), backend)[0]})
    bpti = _bpti(seed)
    systems.append({"name": "bpti", "label": "mlcg oracle model on BPTI (5 beads)", "model": oracle.name,
                    "load": load_oracle, **bpti})
    return systems, notes


# ----------------------------------------------------------------------------------------------- errors
def _pair_distances(positions: torch.Tensor, r_end: float) -> Tuple[torch.Tensor, int]:
    """Distances of the bead pairs i < j of all frames that are below ``r_end`` (where the filter is not 0): at
    most :data:`MAX_FRAME_PAIRS` of them (a random subset, seed 0), and how many there are."""
    n = positions.shape[1]
    i, j = torch.triu_indices(n, n, 1)
    d = (positions[:, i] - positions[:, j]).norm(dim=-1).reshape(-1)
    d = d[d < r_end]
    if d.numel() > MAX_FRAME_PAIRS:
        keep = torch.randperm(d.numel(), generator=torch.Generator().manual_seed(0))[:MAX_FRAME_PAIRS]
        return d[keep], int(d.numel())
    return d, int(d.numel())


class ExactFilters:
    """The exact filters ``W`` and ``dW/dr`` of every block of a float64 network on given distances (cached)."""

    def __init__(self, network, distances: Dict[str, torch.Tensor]):
        self.network = network
        self.distances = distances
        with torch.no_grad():
            self.values = {where: [knot_data(filter_function(network, b), r, 2) for b in network.interaction_blocks]
                           for where, r in distances.items()}

    def errors(self, compressed) -> Dict[str, Dict[str, float]]:
        """``{where: {W_max, W_rms, dW_max, dW_rms, W_max_at}}``: the worst block's relative errors of a compressed
        copy, and the distance where the largest W error is."""
        r_end = table_end(compressed.config)
        out = {}
        for where, r in self.distances.items():
            worst = {"W_max": 0.0, "W_rms": 0.0, "dW_max": 0.0, "dW_rms": 0.0, "W_max_at": None}
            for block, exact in zip(compressed.interaction_blocks, self.values[where]):
                ft = block.conv.filter_network
                W, dW = table_lookup(r, ft.table, ft.scale, r_end)
                for key, err, ref in (("W", W - exact[:, 0], exact[:, 0]), ("dW", dW - exact[:, 1], exact[:, 1])):
                    mx, rms = _rel(err, ref)
                    if key == "W" and mx > worst["W_max"]:
                        worst["W_max_at"] = float(r[err.abs().amax(dim=1).argmax()])
                    worst[f"{key}_max"] = max(worst[f"{key}_max"], mx)
                    worst[f"{key}_rms"] = max(worst[f"{key}_rms"], rms)
            out[where] = worst
        return out


def sweep(systems: Sequence[Dict[str, Any]], points: Sequence[Tuple[str, int, str]],
          log: Callable[[str], None] = lambda m: None) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Errors of every sweep point on every system.

    Returns
    -------
    rows : list of dict
        ``system, kind, knots, dtype, block_bytes, model_bytes``, ``W`` (``{grid, frames}`` of
        :meth:`ExactFilters.errors`), ``energy_max``/``energy_rms``/``energy_max_abs``, ``force_max``/
        ``force_rms``/``force_max_abs``, ``seconds``.
    info : list of dict
        Per system: ``name, label, model, frames, beads, n_frames, r_end, blocks, filters, grid_points,
        frame_pairs`` (below r_end), ``frame_pairs_used`` (in the W errors), ``frame_r_min``/``frame_r_max`` (of
        those), ``filter_network_bytes`` (float32 bytes of one exact filter network, for scale),
        ``exact_seconds``, and ``backend_check`` (reference vs fused path of the default table: force max
        relative difference).
    """
    rows, info = [], []
    for s in systems:
        t0 = time.perf_counter()
        exact = s["load"]("reference")
        fused = s["load"]("torch")
        pos, types = s["positions"], s["types"]
        e_ref, f_ref = exact.energy_forces(pos, types)
        e_ref, f_ref = e_ref.detach(), f_ref.detach()
        r_end = table_end(exact.config)
        grid = (torch.arange(GRID_POINTS, dtype=torch.float64) + 0.5) * (r_end / GRID_POINTS)
        pairs, n_pairs = _pair_distances(pos, r_end)
        filters = ExactFilters(exact, {"grid": grid, "frames": pairs})
        blocks = len(exact.interaction_blocks)
        F = int(filters.values["grid"][0].shape[-1])
        fn_bytes = sum(p.numel() for p in exact.interaction_blocks[0].conv.filter_network.parameters()) * 4
        meta = {k: s[k] for k in ("name", "label", "model", "frames")}
        meta.update(beads=int(pos.shape[1]), n_frames=int(pos.shape[0]), r_end=r_end, blocks=blocks, filters=F,
                    grid_points=GRID_POINTS, frame_pairs=n_pairs, frame_pairs_used=int(pairs.numel()),
                    frame_r_min=float(pairs.min()), frame_r_max=float(pairs.max()),
                    filter_network_bytes=fn_bytes, exact_seconds=time.perf_counter() - t0)
        log(f"{s['name']}: exact energies/forces and filters in {meta['exact_seconds']:.1f} s")
        for kind, knots, dtype in points:
            t = time.perf_counter()
            comp = compress(fused, knots=knots, dtype=dtype, kind=kind, tolerance=float("inf"))
            e, f = comp.energy_forces(pos, types)
            e, f = e.detach(), f.detach()
            emax, erms = _rel(e - e_ref, e_ref)
            fmax, frms = _rel(f - f_ref, f_ref)
            nbytes = table_bytes(kind, knots, F, dtype)
            rows.append({"system": s["name"], "kind": kind, "knots": knots, "dtype": dtype, "block_bytes": nbytes,
                         "model_bytes": nbytes * blocks, "W": filters.errors(comp), "energy_max": emax,
                         "energy_rms": erms, "energy_max_abs": float((e - e_ref).abs().max()), "force_max": fmax,
                         "force_rms": frms, "force_max_abs": float((f - f_ref).abs().max()),
                         "seconds": time.perf_counter() - t})
        comp = compress(exact, dtype="float32", tolerance=float("inf"))           # default table, autograd path
        _, f_auto = comp.energy_forces(pos, types)
        _, f_fused = compress(fused, dtype="float32", tolerance=float("inf")).energy_forces(pos, types)
        meta["backend_check"] = _rel(f_fused.detach() - f_auto.detach(), f_auto.detach())[0]
        meta["seconds"] = time.perf_counter() - t0
        log(f"{s['name']}: {len(points)} tables in {meta['seconds']:.1f} s")
        info.append(meta)
    return rows, info
