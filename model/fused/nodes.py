"""Energies and exact forces of CGSchNet without autograd: the fused backends' node-level pass (forward and backward).

The network's node-level part (embedding, ``lin1``, ``lin2``, ``lin``, output MLP; all ``[R*N, H]``
tensors) runs here in PyTorch with a hand-written backward. The edge-level part -- distances, basis,
filter network, filter x features, reduction -- is delegated to an *edge engine* with two calls per block
(:class:`flashschnet.fused.engine.EdgeEngine`): :class:`~flashschnet.fused.torch_engine.TorchPairEngine`
(``"torch"``) or :class:`~flashschnet.fused.triton_engine.TritonTileEngine` (``"triton"``).

Node-level backward, per block ``x' = x + tanh(m L2^T + b2) L^T + b`` with ``h = x L1^T``::

    ga = gx' L;  gv = ga (1 - a^2);  gm = gv L2;  (gh, gpos) = engine.backward(t, h, gm);  gx = gx' + gh L1
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch

from ..nn.layout import NodeWeights


def energy_forces_fused(weights: NodeWeights, positions: torch.Tensor, bead_types: torch.Tensor,
                        engine) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` (model units) with a hand-written backward.

    ``engine`` is an :class:`~flashschnet.fused.engine.EdgeEngine` (``prepare``, ``aggregate``, ``backward``).
    """
    R, N = positions.shape[0], positions.shape[1]
    engine.prepare(positions)
    tanh = getattr(engine, "tanh", torch.tanh)        # an engine may bring a faster activation for its device
    types = bead_types if R == 1 else bead_types.expand(R, N).reshape(-1)      # (not .repeat: ~15 us a call)
    x = weights.embedding.index_select(0, types)
    saved = []
    for t, blk in enumerate(weights.blocks):
        h = x @ blk["L1"].t()
        m = engine.aggregate(t, h)
        a = tanh(torch.addmm(blk["b2"], m, blk["L2"].t()))
        x = x + torch.addmm(blk["b"], a, blk["L"].t())
        saved.append((h, a))
    zs = []
    z = x
    for W, c in weights.out[:-1]:
        z = tanh(torch.addmm(c, z, W.t()))
        zs.append(z)
    W_last, _ = weights.out[-1]
    y = z @ W_last.t()                                       # [M, 1]
    energy = y.reshape(R, N).sum(1)
    # backward: dE/dy = 1
    g = W_last.expand(R * N, W_last.shape[1]).clone()        # dE/dz_last
    for (W, _), z in zip(reversed(weights.out[:-1]), reversed(zs)):
        g = (g * (1.0 - z * z)) @ W
    gx = g
    gpos = torch.zeros(R * N, 3, dtype=positions.dtype, device=positions.device)
    for t in range(len(weights.blocks) - 1, -1, -1):
        blk = weights.blocks[t]
        h, a = saved[t]
        gv = (gx @ blk["L"]) * (1.0 - a * a)
        gm = gv @ blk["L2"]
        gh, gp = engine.backward(t, h, gm)
        gpos = gpos + gp
        gx = gx + gh @ blk["L1"]
    return energy, (-gpos).reshape(R, N, 3)


def energy_forces_scaled(weights: NodeWeights, positions: torch.Tensor, bead_types: torch.Tensor, engine,
                         scales: Sequence[float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`energy_forces_fused` in a caller's units: positions in a unit of ``length_scale`` model lengths,
    ``(energies [R] x energy_scale, forces [R, N, 3] x force_scale, total = sum(energies) x energy_scale)`` for
    ``scales = (length_scale, energy_scale, force_scale)`` (a factor of 1 is not applied)."""
    length_scale, energy_scale, force_scale = (float(s) for s in scales)
    pos = positions * length_scale if length_scale != 1.0 else positions
    e, f = energy_forces_fused(weights, pos, bead_types, engine)
    total = e.sum()
    if energy_scale != 1.0:
        e, total = e * energy_scale, total * energy_scale
    if force_scale != 1.0:
        f = f * force_scale
    return e, f, total
