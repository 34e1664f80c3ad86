"""The torch engine's whole step as one C call (:mod:`flashschnet.kernels.cpu_step`): float32, every block's filter
a table, on a CPU.

:class:`CStep` lays a model out for ``step_f32`` once per engine -- the dense layers' weights packed in both
orientations by the engine's :class:`~flashschnet.fused.node_ops.CNodeOps` (the same packs the composed path
multiplies with), the blocks' polynomial tables from its
:class:`~flashschnet.fused.torch_engine.TableFilter` objects -- and keeps the step's buffers (grown when a step has
more pairs than they hold). A call: the positions scaled, the engine's Verlet list brought up to date (its
displacement check in C), one C call (the pairs within the cutoff, their order and the network), the energies
summed as PyTorch sums them. What it computes is
:func:`flashschnet.fused.nodes.energy_forces_scaled` over the C kernels, bit for bit (tested).
"""
from __future__ import annotations

import ctypes
from typing import List, Sequence, Tuple

import torch

from ..kernels.cpu_step import StepModel, StepWork
from ..nn.layout import NodeWeights
from .pair_loops import DISTANCE_BUCKETS, bucket_scale


def _addresses(tensors: Sequence[torch.Tensor]):
    return (ctypes.c_void_p * max(1, len(tensors)))(*[t.data_ptr() for t in tensors])


class CStep:
    """One engine's step as one C call (module docstring).

    Parameters
    ----------
    lib : ctypes.CDLL
        :func:`flashschnet.kernels.cpu_step.library`.
    ops : CNodeOps
        The engine's node kernels: their packed weights and padded biases are the ones the C step reads.
    weights : NodeWeights
        The model's node-level weights (float32).
    tables : list of TableFilter
        Every block's filter (float32, CPU).
    seg : Segments
        The step's segments (:func:`~flashschnet.fused.pair_loops.segments` of ``R`` replicas of ``N`` beads: fixed
        per engine, whose key holds the positions' shape).
    rc : float
        The graph cutoff (model length).
    skin : float
        The engine's Verlet skin (the list is rebuilt when a bead moved more than half of it).
    """

    def __init__(self, lib, ops, weights: NodeWeights, tables: List, seg, rc: float, skin: float):
        self.lib, self.ops, self.weights, self.tables = lib, ops, weights, tables
        self.R, self.N = int(seg.R), int(seg.N)
        keep: list = []          # everything a pointer in the C structs points into

        def arr(ts):
            a = _addresses(ts)
            keep.append((ts, a))
            return ctypes.cast(a, ctypes.c_void_p)

        def ints(values):
            t = torch.tensor(list(values), dtype=torch.int64)
            keep.append(t)
            return t.data_ptr()

        def floats(values):
            t = torch.tensor(list(values), dtype=torch.float32)
            keep.append(t)
            return t.data_ptr()

        blocks = weights.blocks
        H = int(weights.embedding.shape[1])
        F = int(blocks[0]["L1"].shape[0]) if blocks else H
        packed = lambda W, trans: ops._packed(W, trans)[0]       # noqa: E731
        bias = lambda b, n: ops._bias(b, n)                      # noqa: E731 (an address, or None)
        knots: list = []
        for src in tables:
            if src.knots not in knots:
                knots.append(src.knots)
        first = {k: next(s for s in tables if s.knots == k) for k in knots}
        mats = [W for W, _ in weights.out]
        dims = [int(mats[0].shape[1])] + [int(W.shape[0]) for W in mats]
        self.dims, self.H, self.F, self.M = dims, H, F, self.R * self.N
        self.nknots = len(knots)
        emb = weights.embedding.detach().to(torch.float32).contiguous()
        keep.append(emb)

        def biases(bs, widths):
            addrs = [bias(b, n) or 0 for b, n in zip(bs, widths)]
            a = (ctypes.c_void_p * max(1, len(addrs)))(*addrs)
            keep.append(a)
            return ctypes.cast(a, ctypes.c_void_p)

        self.model = StepModel(
            R=self.R, N=self.N, H=H, F=F, nblocks=len(blocks), nout=len(mats), nknots=len(knots), pcap=0,
            ntypes=int(emb.shape[0]), emb=emb.data_ptr(),
            L1f=arr([packed(b["L1"], True) for b in blocks]), L2f=arr([packed(b["L2"], True) for b in blocks]),
            b2=biases([b["b2"] for b in blocks], [H] * len(blocks)),
            Lf=arr([packed(b["L"], True) for b in blocks]), b=biases([b["b"] for b in blocks], [H] * len(blocks)),
            L1b=arr([packed(b["L1"], False) for b in blocks]), L2b=arr([packed(b["L2"], False) for b in blocks]),
            Lb=arr([packed(b["L"], False) for b in blocks]),
            rows=arr([s.rows for s in tables]), Q=ints(s.Q for s in tables),
            knot=ints(knots.index(s.knots) for s in tables),
            inv_h=floats(first[k].inv_h for k in knots), r_end=floats(first[k].r_end for k in knots),
            nint=ints(first[k].n - 1 for k in knots),
            dims=ints(dims), Wf=arr([packed(W, True) for W in mats]),
            c=biases([c for _, c in weights.out], dims[1:]), Wb=arr([packed(W, False) for W in mats]))
        self._keep = keep
        self._work = None
        self._pcap = -1
        self.seg, self._rc = seg, float(rc)
        self._inv_w = float(bucket_scale(rc, torch.float32))
        self._half_skin2 = (0.5 * skin) ** 2

    def _buffers(self, L: int):
        """The step's buffers, (re)made when the Verlet list holds more pairs than they do."""
        if L <= self._pcap:
            return
        M, H, F, dims, seg = self.M, self.H, self.F, self.dims, self.seg
        pcap = max(L, int(self._pcap * 1.25) + 1, 16)
        nb, parts, nseg = len(self.weights.blocks), seg.partial_rows, seg.R * seg.NS
        e = lambda n: torch.empty(max(1, n), dtype=torch.float32)      # noqa: E731
        i = lambda n: torch.empty(max(1, n), dtype=torch.int64)        # noqa: E731
        wide = M * max(dims + [H])
        self._bufs = dict(
            x0=e(M * H), x1=e(M * H), h=e(nb * M * F), a=e(nb * M * H), m=e(M * F),
            z=e(sum(M * n for n in dims[1:-1])), g0=e(wide), g1=e(wide), gv=e(M * H), gm=e(M * F), gh=e(M * F),
            gp=e(M * 3), gpos=e(M * 3), part=e(parts * F), ppos=e(parts * 3), ks=i(self.nknots * pcap),
            ts=e(self.nknots * pcap), wi=i(pcap), wj=i(pcap), wd=e(pcap), oi=i(pcap), oj=i(pcap),
            od=e(pcap), key=i(pcap), count=i(nseg * DISTANCE_BUCKETS + 1), start=i(nseg + 1))
        self._work = StepWork(**{k: v.data_ptr() for k, v in self._bufs.items()})
        self.model.pcap = pcap
        self._pcap = pcap

    def energy_forces(self, engine, positions: torch.Tensor, bead_types: torch.Tensor,
                      scales: Sequence[float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:func:`flashschnet.fused.nodes.energy_forces_scaled` of ``engine`` (a torch engine whose filters are
        this step's tables) as one C call: ``(energies [R], forces [R, N, 3], total [])``. The engine's Verlet
        list is brought up to date here (its displacement check in C); the pairs within the cutoff and their
        order are the C step's."""
        length_scale, energy_scale, force_scale = (float(s) for s in scales)
        pos = positions * length_scale if length_scale != 1.0 else positions
        pos = pos.contiguous()
        R, N = self.R, self.N
        verlet = engine.verlet
        ref = verlet.ref
        fresh = (verlet.current is not None and ref is not None and ref.shape == pos.shape
                 and ref.dtype == pos.dtype and ref.device == pos.device and ref.is_contiguous()
                 and not self.lib.moved_f32(R * N, pos.data_ptr(), ref.data_ptr(), self._half_skin2))
        nl = verlet.get(pos, moved=not fresh)
        L = int(nl.i.shape[0])
        self._buffers(L)
        types = bead_types if bead_types.dtype == torch.int64 else bead_types.to(torch.int64)
        types = types.contiguous()
        if types.numel() != N:
            raise ValueError(f"flashschnet: bead_types must hold the {N} beads of a replica, got {types.numel()}")
        y = torch.empty(R * N, dtype=torch.float32)
        forces = torch.empty(R, N, 3, dtype=torch.float32)
        seg = self.seg
        bad = self.lib.step_f32(ctypes.byref(self.model), ctypes.byref(self._work), L, nl.i.data_ptr(),
                                nl.j.data_ptr(), self._rc, seg.SB, seg.NS, DISTANCE_BUCKETS, self._inv_w,
                                pos.data_ptr(), types.data_ptr(), y.data_ptr(), forces.data_ptr(), force_scale,
                                torch.get_num_threads(), self.ops._macs)
        if bad:
            raise IndexError(f"flashschnet: bead {bad - 1} has type {int(types[bad - 1])}, outside the model's "
                             f"{self.model.ntypes} bead types")
        e = y.reshape(R, N).sum(1)
        total = e.sum()
        if energy_scale != 1.0:
            e, total = e * energy_scale, total * energy_scale
        return e, forces, total
