"""The torch engine's pair order and its fused C pair loops: the step's pairs cut into :class:`Segments` of their
first bead and ordered by distance bucket within each (:func:`order_key`, a function of the positions alone), and
:class:`PairLoops`, the kernels of :mod:`flashschnet.kernels.cpu_pairs` on tensors of one dtype, which run over
those segments on any number of threads with the same bits."""
from __future__ import annotations

import ctypes
from typing import NamedTuple, Optional

import torch


#: distance buckets of the step's pair order (within a segment, pairs sorted by ``floor(d / rc * NB)``: the
#: pairs that read the same table rows come one after another, so those rows stay in L1)
DISTANCE_BUCKETS = 256


class Segments(NamedTuple):
    """The step's pairs cut by their first bead ``i`` into ``NS`` segments of ``SB`` beads per replica
    (:func:`segments`), a function of the system's size alone -- not of the thread count, so the fused table
    loops (a segment adds into its own beads' rows and into partial rows for the others, added in segment
    order) give the same bits on any number of threads. ``start [R NS + 1]``: each segment's first pair."""
    R: int
    N: int
    SB: int
    NS: int
    start: Optional[torch.Tensor] = None

    @property
    def partial_rows(self) -> int:
        """Rows of the segments' partial buffers: segment ``s`` of a replica keeps beads ``s SB .. N``."""
        return self.R * (self.NS * self.N - self.SB * self.NS * (self.NS - 1) // 2)


def segments(R: int, N: int) -> Segments:
    """At most 8 segments of at least 32 beads per replica: enough work items for 8 threads on one protein;
    the partial buffers cost ``<= NS / 2 + 1`` copies of a replica's rows."""
    NS = min(8, max(1, -(-N // 32)))
    SB = -(-N // NS)
    return Segments(R, N, SB, -(-N // SB))


def bucket_scale(rc: float, dtype: torch.dtype) -> torch.Tensor:
    """``DISTANCE_BUCKETS / rc`` in the step's dtype: a distance times it is its bucket (before the clamp)."""
    return torch.tensor(DISTANCE_BUCKETS / rc, dtype=dtype)


def order_key(i: torch.Tensor, d: torch.Tensor, seg: Segments, inv_w: torch.Tensor) -> torch.Tensor:
    """The step's pair order as PyTorch ops (what ``order_pairs`` of :mod:`~flashschnet.kernels.cpu_pairs` sorts
    by, stably): segment of ``i``, then distance bucket."""
    r = torch.div(i, seg.N, rounding_mode="floor")
    bucket = torch.clamp((d * inv_w).to(torch.int64), max=DISTANCE_BUCKETS - 1)
    return (r * seg.NS + torch.div(i - r * seg.N, seg.SB, rounding_mode="floor")) * DISTANCE_BUCKETS + bucket


class PairLoops:
    """The fused C pair loops (:mod:`flashschnet.kernels.cpu_pairs`) on tensors of one dtype (``src``: a block's
    :class:`~flashschnet.fused.torch_engine.TableFilter`). The table loops run
    on ``torch.get_num_threads()`` OpenMP threads (PyTorch's own pool), over :class:`Segments`: the same bits on
    any thread count; the exact filter's loops (given ``W`` from PyTorch's threaded products) run on one."""

    def __init__(self, lib, dtype: torch.dtype):
        suffix = "f64" if dtype == torch.float64 else "f32"
        self.fwd, self.bwd = getattr(lib, f"msg_fwd_{suffix}"), getattr(lib, f"msg_bwd_{suffix}")
        self.tfwd, self.tbwd = getattr(lib, f"table_fwd_{suffix}"), getattr(lib, f"table_bwd_{suffix}")
        self.tintervals = getattr(lib, f"table_intervals_{suffix}")
        self.within = getattr(lib, f"pairs_within_{suffix}")
        self.order = getattr(lib, f"order_pairs_{suffix}")
        self.lib, self.dtype = lib, dtype
        self._scratch: dict = {}

    @staticmethod
    def _p(t: torch.Tensor):
        return ctypes.c_void_p(t.data_ptr())

    def _part(self, rows: int, width: int) -> torch.Tensor:
        """Scratch for the segments' partial rows (each segment zeroes its own), kept between calls."""
        buf = self._scratch.get(width)
        if buf is None or buf.numel() < rows * width:
            buf = self._scratch[width] = torch.empty(rows * width, dtype=self.dtype)
        return buf

    def msg_fwd(self, i, j, W, h, m):
        self.fwd(i.shape[0], h.shape[1], self._p(i), self._p(j), self._p(W), self._p(h), self._p(m))

    def msg_bwd(self, i, j, W, dW, h, gm, pos, d, gh, gpos):
        self.bwd(i.shape[0], h.shape[1], self._p(i), self._p(j), self._p(W), self._p(dW), self._p(h), self._p(gm),
                 self._p(pos), self._p(d), self._p(gh), self._p(gpos))

    def pairs_within(self, i, j, pos, rc: float):
        """``(i, j, d)`` of the pairs ``(i, j)`` closer than ``rc``, in list order: what the engine's ``prepare``
        computes as PyTorch ops, bitwise."""
        P = i.shape[0]
        oi, oj = torch.empty(P, dtype=torch.int64), torch.empty(P, dtype=torch.int64)
        od = torch.empty(P, dtype=pos.dtype)
        n = self.within(P, self._p(i), self._p(j), self._p(pos), rc, self._p(oi), self._p(oj), self._p(od))
        return oi[:n], oj[:n], od[:n]

    def order_pairs(self, i, j, d, seg: Segments, inv_w: float):
        """``(i, j, d, seg)`` in the step's order (:func:`order_key`, a stable counting sort), ``seg.start`` set."""
        P, nseg = i.shape[0], seg.R * seg.NS
        oi, oj = torch.empty(P, dtype=torch.int64), torch.empty(P, dtype=torch.int64)
        od, start = torch.empty(P, dtype=d.dtype), torch.empty(nseg + 1, dtype=torch.int64)
        count, key = torch.empty(nseg * DISTANCE_BUCKETS + 1, dtype=torch.int64), torch.empty(P, dtype=torch.int64)
        self.order(P, self._p(i), self._p(j), self._p(d), seg.N, seg.SB, seg.NS, DISTANCE_BUCKETS, inv_w, nseg,
                   self._p(count), self._p(key), self._p(oi), self._p(oj), self._p(od), self._p(start))
        return oi, oj, od, seg._replace(start=start)

    def table_intervals(self, src, d):
        """``(ks [P] int64, ts [P])``: every pair's table interval (-1: beyond the table) and its place in it,
        once per step for all the blocks whose tables share ``src``'s knots (:attr:`TableFilter.knots`)."""
        P = d.shape[0]
        ks = torch.empty(P, dtype=torch.int64)
        ts = torch.empty(P, dtype=d.dtype)
        self.tintervals(P, src.n - 1, self._p(d), src.inv_h, src.r_end, self._p(ks), self._p(ts),
                        torch.get_num_threads())
        return ks, ts

    def table_fwd(self, src, seg: Segments, ks, ts, i, j, h, m):
        F = h.shape[1]
        part = self._part(seg.partial_rows, F)
        self.tfwd(seg.R, seg.N, seg.SB, seg.NS, self._p(seg.start), F, src.Q, self._p(ks), self._p(ts), self._p(i),
                  self._p(j), self._p(src.rows), self._p(h), self._p(m), self._p(part), torch.get_num_threads())

    def table_bwd(self, src, seg: Segments, ks, ts, i, j, d, h, gm, pos, gh, gpos):
        F = h.shape[1]
        part, ppos = self._part(seg.partial_rows, F), self._part(seg.partial_rows, 3)
        self.tbwd(seg.R, seg.N, seg.SB, seg.NS, self._p(seg.start), F, src.Q, self._p(ks), self._p(ts), src.inv_h,
                  self._p(i), self._p(j), self._p(d), self._p(src.rows), self._p(h), self._p(gm), self._p(pos),
                  self._p(gh), self._p(gpos), self._p(part), self._p(ppos), torch.get_num_threads())
