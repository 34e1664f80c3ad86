"""Force matching: fit a CGSchNet to the part of the mapped forces that the priors do not explain.

Loss: mean squared error between the network's forces ``-dU_net/dR`` and the residual ``F_CG - F_prior`` over
all beads and components (kcal/mol/Angstrom)^2. Frames are split once (seeded) into training and validation
sets; each epoch runs Adam over shuffled training batches, then measures the validation loss. The best
validation model is kept (``best.pt``, our checkpoint with the priors), the last one too (``last.pt``);
training stops after ``patience`` epochs without improvement. ``history.json`` and ``loss.png`` record the
losses.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, Optional

import numpy as np
import torch

from ..atomic import atomic_write
from ..checkpoint import save_checkpoint
from ..errors import InputError
from ..config import DEFAULT_UNITS, normalize_config
from ..nn.schnet import CGSchNet
from ..priors import PriorSet, prior_energy_forces

#: a small CGSchNet for one protein (mlcg's layer types; sizes for CPU-scale training)
DEFAULT_NETWORK = {
    "hidden_channels": 64, "num_filters": 64, "num_interactions": 2, "embedding_size": 25,
    "output_hidden_layer_widths": [64, 32], "activation": "tanh",
    "rbf": {"kind": "gaussian", "num_rbf": 32, "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 12.0}},
    "cutoff": {"kind": "cosine", "cutoff_lower": 0.0, "cutoff_upper": 12.0},
}


@dataclass
class TrainSettings:
    epochs: int = 50
    batch_frames: int = 16
    learning_rate: float = 1e-3
    val_fraction: float = 0.2
    patience: int = 10
    seed: int = 1
    device: str = "cpu"                  # "cuda" trains on a GPU (positions, forces and the model moved there)
    network: Dict = field(default_factory=lambda: json.loads(json.dumps(DEFAULT_NETWORK)))


def residual_forces(priors: Optional[PriorSet], positions: np.ndarray, forces: np.ndarray) -> np.ndarray:
    """``forces - F_prior(positions)`` (kcal/mol/Angstrom, float64)."""
    if priors is None:
        return np.asarray(forces, dtype=np.float64)
    _, fp = prior_energy_forces(priors, torch.as_tensor(np.asarray(positions, dtype=np.float64)))
    return np.asarray(forces, dtype=np.float64) - fp.numpy()


def _loss(model: CGSchNet, pos: torch.Tensor, types: torch.Tensor, target: torch.Tensor, train: bool) -> torch.Tensor:
    pos = pos.clone().requires_grad_(True)
    energy = model.energy(pos, types)
    (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=train)
    return ((-grad - target) ** 2).mean()


def train_force_matching(mol, positions: np.ndarray, forces: np.ndarray, priors: Optional[PriorSet], out_dir: str,
                         settings: TrainSettings, progress: bool = True, metadata: Optional[Dict] = None,
                         echo: Callable[[str], None] = print) -> Dict:
    """Train a CGSchNet on ``positions``/``forces`` [F, N, 3] (Angstrom, kcal/mol/Angstrom) of ``mol``.

    Writes ``best.pt``, ``last.pt``, ``history.json`` and ``loss.png`` into ``out_dir``; returns the history
    (``train``, ``val`` losses per epoch, ``best_epoch``, ``best_val``, ``baseline_val``: the validation loss of
    a zero network, i.e. of the priors alone).
    """
    s = settings
    F = len(positions)
    n_val = max(1, int(round(s.val_fraction * F)))
    if F - n_val < 1:
        raise InputError(f"{F} frames leave none for training after {n_val} validation frames")
    if s.epochs < 1 or s.batch_frames < 1 or s.patience < 1 or s.learning_rate <= 0:
        raise InputError("epochs, batch frames and patience must be >= 1 and the learning rate positive")
    os.makedirs(out_dir, exist_ok=True)
    gen = torch.Generator().manual_seed(int(s.seed))
    torch.manual_seed(int(s.seed))
    order = torch.randperm(F, generator=gen)
    val_idx, train_idx = order[:n_val], order[n_val:]
    if s.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {s.device}: no CUDA device here; use --device cpu")
    pos = torch.as_tensor(np.asarray(positions), dtype=torch.float32, device=s.device)
    target = torch.as_tensor(residual_forces(priors, positions, forces), dtype=torch.float32, device=s.device)
    types = torch.as_tensor(mol.bead_types, dtype=torch.long, device=s.device)
    config = normalize_config(dict(s.network, cg_mapping=mol.mapping))
    model = CGSchNet(config, backend="reference", units=dict(DEFAULT_UNITS)).to(device=s.device, dtype=torch.float32)
    model.check_bead_types(types, mol.source or "the molecule")
    opt = torch.optim.Adam(model.parameters(), lr=s.learning_rate)

    def val_loss() -> float:
        model.eval()
        tot = 0.0
        for b in val_idx.split(s.batch_frames):
            tot += float(_loss(model, pos[b], types, target[b], train=False)) * len(b)
        return tot / len(val_idx)

    baseline = float((target[val_idx] ** 2).mean())
    history = {"train": [], "val": [], "best_epoch": None, "best_val": None, "baseline_val": baseline,
               "frames": {"train": len(train_idx), "val": len(val_idx)}, "settings": asdict(s)}
    meta = dict(metadata or {})
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=s.epochs, unit="epoch", desc="force matching", dynamic_ncols=True)
    best, stale = float("inf"), 0
    for epoch in range(1, s.epochs + 1):
        model.train()
        perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
        tot = 0.0
        for b in perm.split(s.batch_frames):
            opt.zero_grad()
            loss = _loss(model, pos[b], types, target[b], train=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(b)
        history["train"].append(tot / len(train_idx))
        v = val_loss()
        history["val"].append(v)
        if not np.isfinite(v):
            raise InputError(f"force matching diverged at epoch {epoch} (validation loss {v}); lower --learning-rate")
        if v < best:
            best, stale = v, 0
            history["best_epoch"], history["best_val"] = epoch, v
            save_checkpoint(os.path.join(out_dir, "best.pt"), model.eval(), priors=priors,
                            metadata=dict(meta, epoch=epoch, val_loss=v))
        else:
            stale += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(train=f"{history['train'][-1]:.3g}", val=f"{v:.3g}")
        if stale >= s.patience:
            echo(f"note: early stop at epoch {epoch}: no validation improvement for {s.patience} epochs")
            break
    if bar is not None:
        bar.close()
    save_checkpoint(os.path.join(out_dir, "last.pt"), model.eval(), priors=priors,
                    metadata=dict(meta, epoch=len(history["val"]), val_loss=history["val"][-1]))
    with atomic_write(os.path.join(out_dir, "history.json"), "w", what="writing the training history") as f:
        json.dump(history, f, indent=1)
    plot_history(history, os.path.join(out_dir, "loss.png"))
    return history


def plot_history(history: Dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ep = np.arange(1, len(history["train"]) + 1)
    ax.plot(ep, history["train"], label="training")
    ax.plot(ep, history["val"], label="validation")
    ax.axhline(history["baseline_val"], color="grey", ls=":", label="priors alone (validation)")
    if history["best_epoch"]:
        ax.axvline(history["best_epoch"], color="k", lw=0.8, ls="--", label="best")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("force MSE ((kcal/mol/Å)²)")
    ax.legend()
    fig.tight_layout()
    try:
        with atomic_write(path, "wb", what="writing the figure") as f:      # no truncated PNG on a full disk
            fig.savefig(f, format="png", dpi=110)
    finally:
        plt.close(fig)
