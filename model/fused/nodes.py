"""Energies and exact forces of CGSchNet without autograd: the fused backends' node-level pass (forward and backward).

The network's node-level part (embedding, ``lin1``, ``lin2``, ``lin``, output MLP; all ``[R*N, H]``
tensors) runs here with a hand-written backward. The edge-level part -- distances, basis,
filter network, filter x features, reduction -- is delegated to an *edge engine* with two calls per block
(:class:`flashschnet.fused.engine.EdgeEngine`): :class:`~flashschnet.fused.torch_engine.TorchPairEngine`
(``"torch"``) or :class:`~flashschnet.fused.triton_engine.TritonTileEngine` (``"triton"``).

Node-level backward, per block ``x' = x + tanh(m L2^T + b2) L^T + b`` with ``h = x L1^T``::

    gv = (gx' L) (1 - a^2);  gm = gv L2;  (gh, gpos) = engine.backward(t, h, gm);  gx = gx' + gh L1

The dense layers are ops of the engine's choosing (:mod:`flashschnet.fused.node_ops`: PyTorch's, the reference,
or fused C kernels on a CPU).
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch

from ..nn.layout import NodeWeights
from .node_ops import TORCH_NODE_OPS


def energy_forces_fused(weights: NodeWeights, positions: torch.Tensor, bead_types: torch.Tensor,
                        engine) -> Tuple[torch.Tensor, torch.Tensor]:
    """Energies ``[R]`` and forces ``[R, N, 3]`` (model units) with a hand-written backward.

    ``engine`` is an :class:`~flashschnet.fused.engine.EdgeEngine` (``prepare``, ``aggregate``, ``backward``);
    its ``node_ops`` (:mod:`flashschnet.fused.node_ops`; PyTorch's ops if it has none) run the dense layers.
    """
    R, N = positions.shape[0], positions.shape[1]
    engine.prepare(positions)
    ops = getattr(engine, "node_ops", None) or TORCH_NODE_OPS
    types = bead_types if R == 1 else bead_types.expand(R, N).reshape(-1)      # (not .repeat: ~15 us a call)
    x = weights.embedding.index_select(0, types)
    saved = []
    for t, blk in enumerate(weights.blocks):
        h = ops.dense(x, blk["L1"])
        m = engine.aggregate(t, h)
        a = ops.dense_tanh(m, blk["L2"], blk["b2"])
        x = ops.dense_add(a, blk["L"], blk["b"], x)
        saved.append((h, a))
    zs = []
    z = x
    for W, c in weights.out[:-1]:
        z = ops.dense_tanh(z, W, c)
        zs.append(z)
    W_last, _ = weights.out[-1]
    y = ops.dense(z, W_last)                                 # [M, 1]
    energy = y.reshape(R, N).sum(1)
    # backward: dE/dy = 1 per row (a [M, 1] column of ones: times the [1, n] last layer, its rows exactly),
    # then each layer's input gradient, times its input's tanh derivative where the input is a tanh's output
    mats = [W for W, _ in weights.out[:-1]] + [W_last]
    g = x.new_ones(R * N, 1)
    for k in range(len(mats) - 1, -1, -1):
        g = ops.back_dtanh(g, mats[k], zs[k - 1]) if k > 0 else ops.back(g, mats[k])
    gx = g
    gpos = torch.zeros(R * N, 3, dtype=positions.dtype, device=positions.device)
    for t in range(len(weights.blocks) - 1, -1, -1):
        blk = weights.blocks[t]
        h, a = saved[t]
        gv = ops.back_dtanh(gx, blk["L"], a)
        gm = ops.back(gv, blk["L2"])
        gh, gp = engine.backward(t, h, gm)
        gpos = gpos + gp
        gx = ops.back_add(gh, blk["L1"], gx)
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
