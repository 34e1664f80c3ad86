"""The triton engine's tile-pair flags and work list: rebuilt on the device, per replica, when one of its beads
moved more than half the Verlet skin since the replica's last build -- by the flag kernel (``_tile_flags_kernel``
of :mod:`flashschnet.kernels.tiles`), or, beyond :data:`MAX_FLAG_KERNEL_TILES`, by the same decisions in PyTorch
ops (:func:`update_tiles_torch`). Either also writes the step's positions in the model's length unit into the
workspace. Neither reads the device back to the host.
"""
from __future__ import annotations

import torch

from .launches import flags_launch, run
from .workspace import Workspace

#: the flag kernel holds a replica's [T, T] sphere tests in one program: above this many tiles (2,048 beads)
#: the same decision is made by PyTorch ops on the device (:func:`update_tiles_torch`)
MAX_FLAG_KERNEL_TILES = 128


def update_tiles(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float, length_scale: float = 1.0) -> None:
    """``ws.pos = pos * length_scale``; then rebuild, on the device, the flags and work list of every replica some
    bead of which moved more than ``skin / 2`` since its last build (``ws.ref``); other replicas keep theirs. No
    host synchronisation."""
    if ws.R * ws.N == 0:
        return
    if ws.T > MAX_FLAG_KERNEL_TILES:
        update_tiles_torch(ws, pos, cutoff, skin, length_scale)
    else:
        run(flags_launch(ws, pos, cutoff, skin, length_scale))


def update_tiles_torch(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float,
                       length_scale: float = 1.0) -> None:
    """:func:`update_tiles` in PyTorch ops (for many tiles): the same sphere tests, staleness (NaN included),
    work lists (active slots in slot order) and per-replica commit by ``torch.where`` -- still no host
    synchronisation, at O(R T^2) memory."""
    R, N, T, B, S = ws.R, ws.N, ws.T, ws.block, ws.S
    torch.mul(pos.detach(), length_scale, out=ws.pos)
    p = ws.pos
    stale = ~(((p - ws.ref) ** 2).sum(-1) <= 0.25 * skin * skin).all(dim=1)             # [R]; NaN -> stale
    pad = T * B - N
    valid = torch.ones(R, T * B, dtype=p.dtype, device=p.device)
    if pad:
        p = torch.cat([p, p[:, -1:, :].expand(R, pad, 3)], dim=1)
        valid[:, N:] = 0.0
    tiles = p.reshape(R, T, B, 3)
    vm = valid.reshape(R, T, B, 1)
    center = (tiles * vm).sum(2) / vm.sum(2)                                               # [R, T, 3]
    radius = (((tiles - center[:, :, None, :]) ** 2).sum(-1).sqrt() * vm[..., 0]).amax(2)  # [R, T]
    dc = (center[:, :, None, :] - center[:, None, :, :]).norm(dim=-1)
    near = (dc - radius[:, :, None] - radius[:, None, :] < cutoff + skin) | torch.isnan(dc)
    I, J = torch.triu_indices(T, T, device=p.device)                                       # slot order
    act = near[:, I, J]                                                                    # [R, S]
    flags = ws.flags[:R * S].view(R, S)
    flags.copy_(torch.where(stale[:, None], act.to(torch.int8), flags))
    # the work list: the active slots' (I, J), compacted in slot order (inactive ones go past the count)
    at = torch.where(act, act.to(torch.int32).cumsum(1) - 1, S - 1)
    entries = torch.zeros(R, S, dtype=torch.int32, device=p.device)
    entries.scatter_(1, at.long(), torch.where(act, (I * 65536 + J).to(torch.int32)[None, :].expand(R, S), 0))
    worklist = ws.worklist[:R * S].view(R, S)
    worklist.copy_(torch.where(stale[:, None], entries, worklist))
    ws.counts[:R].copy_(torch.where(stale, act.sum(1).to(torch.int32), ws.counts[:R]))
    ws.ref.copy_(torch.where(stale[:, None, None], ws.pos, ws.ref))
    ws.builds[:R] += stale.to(torch.int32)
