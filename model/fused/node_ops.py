"""The dense layers of the node pass (:mod:`flashschnet.fused.nodes`), two implementations of one set of ops.

Each op is a layer with what follows it before its output is stored (``x [M, K]``; a forward layer's ``W [N, K]``
and bias ``b [N]`` as ``torch.nn.Linear`` holds them; the backward's ``g [M, K]`` times ``W [K, N]``):

===============================  =========================================
``dense(x, W, b)``               ``x W^T + b`` (``b`` may be None)
``dense_tanh(x, W, b)``          ``tanh(x W^T + b)``
``dense_add(x, W, b, r)``        ``r + (x W^T + b)`` (a residual)
``back(g, W)``                   ``g W``
``back_dtanh(g, W, a)``          ``(g W) (1 - a^2)`` (``a`` a tanh's output)
``back_add(g, W, r)``            ``r + g W``
===============================  =========================================

* :class:`TorchNodeOps` -- PyTorch ops: the reference, and what runs on any device and in float64;
* :class:`CNodeOps` -- the fused C kernels of :mod:`flashschnet.kernels.cpu_nodes` (float32 CPU tensors): one call
  per layer, the weights packed once per model; the same bits on any thread count.

The edge engine that owns the step picks one (``engine.node_ops``, chosen with its pair loops: the torch engine's
``fused_loops``).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch


class TorchNodeOps:
    """The node pass's layers as PyTorch ops (module docstring): the reference."""

    @staticmethod
    def dense(x, W, b=None):
        return x @ W.t() if b is None else torch.addmm(b, x, W.t())

    def dense_tanh(self, x, W, b):
        return torch.tanh(self.dense(x, W, b))

    def dense_add(self, x, W, b, r):
        return r + self.dense(x, W, b)

    @staticmethod
    def back(g, W):
        return g @ W

    @staticmethod
    def back_dtanh(g, W, a):
        return (g @ W) * (1.0 - a * a)

    @staticmethod
    def back_add(g, W, r):
        return r + g @ W


#: the reference ops (stateless)
TORCH_NODE_OPS = TorchNodeOps()


class CNodeOps:
    """The node pass's layers as the fused C kernels (module docstring), for float32 CPU tensors.

    A weight matrix is packed the first time it is used (per orientation) and kept, with a reference to the
    tensor, so its storage cannot be reused by another while the pack exists; an engine holds its model's weights
    for its lifetime.
    """

    def __init__(self, lib):
        from ..kernels.cpu_nodes import EPILOGUES, PANEL, THREADED_MACS

        self.lib, self._epi, self._panel, self._macs = lib, EPILOGUES, PANEL, THREADED_MACS
        self._packs: Dict[Tuple[int, bool], Tuple[torch.Tensor, torch.Tensor, int, int]] = {}
        self._biases: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}

    def _packed(self, W: torch.Tensor, trans: bool):
        """``(packed panels, N, K)`` of ``B = W^T`` (``trans``) or ``B = W``."""
        key = (W.data_ptr(), trans)
        hit = self._packs.get(key)
        if hit is None or hit[0] is not W:
            Wc = W.detach().to(torch.float32).contiguous()
            N, K = (Wc.shape[0], Wc.shape[1]) if trans else (Wc.shape[1], Wc.shape[0])
            P = torch.empty(-(-N // self._panel) * K * self._panel, dtype=torch.float32)
            self.lib.pack_f32(K, N, Wc.data_ptr(), int(trans), P.data_ptr())
            hit = self._packs[key] = (W, P, N, K)
        return hit[1], hit[2], hit[3]

    def _bias(self, b: Optional[torch.Tensor], N: int):
        if b is None:
            return None
        hit = self._biases.get(b.data_ptr())
        if hit is None or hit[0] is not b:
            padded = torch.zeros(-(-N // self._panel) * self._panel, dtype=torch.float32)
            padded[:N] = b.detach()
            hit = self._biases[b.data_ptr()] = (b, padded)
        return hit[1].data_ptr()

    def _run(self, x, W, trans: bool, b, epi: str, S=None):
        P, N, K = self._packed(W, trans)
        x = x.contiguous()
        if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() != 2 or x.shape[1] != K:
            raise ValueError(f"flashschnet: the C node kernels take float32 CPU [M, {K}] rows, got {x.dtype} "
                             f"{x.device.type} {list(x.shape)}")
        M = x.shape[0]
        out = torch.empty(M, N, dtype=torch.float32)
        s = None
        if S is not None:
            S = S.contiguous()
            if S.dtype != torch.float32 or tuple(S.shape) != (M, N):
                raise ValueError(f"flashschnet: the C node kernels' second operand must be float32 [{M}, {N}], "
                                 f"got {S.dtype} {list(S.shape)}")
            s = S.data_ptr()
        self.lib.dense_f32(M, N, K, x.data_ptr(), P.data_ptr(), self._bias(b, N), self._epi[epi], s,
                           out.data_ptr(), torch.get_num_threads(), self._macs)
        return out

    def dense(self, x, W, b=None):
        return self._run(x, W, True, b, "none")

    def dense_tanh(self, x, W, b):
        return self._run(x, W, True, b, "tanh")

    def dense_add(self, x, W, b, r):
        return self._run(x, W, True, b, "add", r)

    def back(self, g, W):
        return self._run(g, W, False, None, "none")

    def back_dtanh(self, g, W, a):
        return self._run(g, W, False, None, "dtanh", a)

    def back_add(self, g, W, r):
        return self._run(g, W, False, None, "add", r)
