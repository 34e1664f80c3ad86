"""Plans of the fused node-layer kernels (:mod:`flashschnet.kernels.nodes`): the node-level weights padded to
powers of two and laid out as the kernels read them, built once per engine, and the per-bead-type rows of the
first block (built when the bead types change, not per step).

Padded widths: ``HP`` (hidden), ``FP`` (filters; the CFConv plans' own), ``P0..P2`` (the output MLP's hidden
layers), all powers of two >= 32 (the kernels' products work in 32 x 32 blocks). Padding is zeros, so padded
channels carry exact zeros: ``tanh(0) = 0`` and a zero weight row or column adds nothing.

Per block ``t`` (the layout's ``L1 [F, H]``, ``L2 [H, F]``, ``b2 [H]``, ``L [H, H]``, ``b [H]``; ``x' = x +
tanh(m L2^T + b2) L^T + b``, ``h = x L1^T``): forward operands ``L2T [FP, HP]``, ``LT [HP, HP]``, ``L1T [HP,
FP]`` and backward ones ``L1 [FP, HP]``, ``L [HP, HP]``, ``L2 [HP, FP]`` (a product ``g @ W`` takes ``W`` as
stored). The output MLP: ``WT`` and ``W`` per hidden layer, biases ``c``, and the last layer's row ``wl``.

The first block's input ``x_0 = embedding[types]`` and ``h_0 = x_0 L1_0^T`` depend only on the bead types:
:func:`type_rows` computes them once per types tensor (one row per bead, shared by every replica: the kernels
read them with replica stride 0), so a step starts at the first CFConv.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch

from ..nn.layout import NodeWeights
from .plans import pow2

#: output MLPs with at most this many hidden layers are fused (deeper ones run the node-level PyTorch pass)
MAX_HIDDEN = 3


def _pad(w: torch.Tensor, rows: int, cols: int, dtype, device) -> torch.Tensor:
    out = torch.zeros(rows, cols, dtype=dtype, device=device)
    out[:w.shape[0], :w.shape[1]] = w.to(device, dtype)
    return out.contiguous()


def _vec(v: Optional[torch.Tensor], n: int, dtype, device) -> torch.Tensor:
    out = torch.zeros(n, dtype=dtype, device=device)
    if v is not None:
        out[:v.shape[0]] = v.to(device, dtype)
    return out


@dataclass
class BlockPlan:
    """One interaction block's node weights, padded (module docstring)."""

    L2T: torch.Tensor
    b2: torch.Tensor
    LT: torch.Tensor
    b: torch.Tensor
    L1T: torch.Tensor
    L1: torch.Tensor
    L: torch.Tensor
    L2: torch.Tensor


@dataclass
class NodePlan:
    """The node-level weights of a network for the fused kernels."""

    blocks: List[BlockPlan]
    embedding: torch.Tensor               # [types, HP]
    WT: List[torch.Tensor]                # output MLP, per hidden layer: [in_P, out_P]
    W: List[torch.Tensor]                 # [out_P, in_P]
    c: List[torch.Tensor]                 # [out_P]
    wl: torch.Tensor                      # [PL]
    widths: Tuple[int, ...]               # P0, P1, P2 (unused ones 32)
    H: int
    HP: int
    F: int
    FP: int

    @property
    def hidden(self) -> int:
        return len(self.WT)

    @property
    def widest_gradient(self) -> int:
        """PM: the widest of ``HP`` and the hidden layers' widths (the kernels' gradient rows)."""
        return max([self.HP] + [w for w in self.widths[:self.hidden]])

    @property
    def widest(self) -> int:
        """PMAX: the widest node width (a scratch region's row)."""
        return max(self.widest_gradient, self.FP, *self.widths)


def plan_nodes(weights: NodeWeights, FP: int, dtype, device) -> Optional[NodePlan]:
    """The :class:`NodePlan` of ``weights`` for filter width padded to ``FP``, or None when the output MLP has more
    than :data:`MAX_HIDDEN` hidden layers (then the node-level PyTorch pass runs)."""
    if len(weights.out) - 1 > MAX_HIDDEN:
        return None
    H = int(weights.embedding.shape[1])
    F = int(weights.blocks[0]["L1"].shape[0]) if weights.blocks else 1
    HP = pow2(H, 32)
    blocks = [BlockPlan(L2T=_pad(b["L2"].t(), FP, HP, dtype, device), b2=_vec(b["b2"], HP, dtype, device),
                        LT=_pad(b["L"].t(), HP, HP, dtype, device), b=_vec(b["b"], HP, dtype, device),
                        L1T=_pad(b["L1"].t(), HP, FP, dtype, device), L1=_pad(b["L1"], FP, HP, dtype, device),
                        L=_pad(b["L"], HP, HP, dtype, device), L2=_pad(b["L2"], HP, FP, dtype, device))
              for b in weights.blocks]
    WT, W, c, widths = [], [], [], []
    n_in = HP
    for Wl, cl in weights.out[:-1]:
        P = pow2(int(Wl.shape[0]), 32)
        WT.append(_pad(Wl.t(), n_in, P, dtype, device))
        W.append(_pad(Wl, P, n_in, dtype, device))
        c.append(_vec(cl, P, dtype, device))
        widths.append(P)
        n_in = P
    W_last = weights.out[-1][0]
    wl = _vec(W_last.reshape(-1), n_in, dtype, device)
    return NodePlan(blocks=blocks, embedding=_pad(weights.embedding, weights.embedding.shape[0], HP, dtype, device),
                    WT=WT, W=W, c=c, wl=wl, widths=tuple(widths + [32] * (MAX_HIDDEN - len(widths))), H=H, HP=HP,
                    F=F, FP=FP)


def type_rows(plan: NodePlan, bead_types: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(x_0 [N, HP], h_0 [N, FP])`` of the bead types: the embedding rows and the first block's ``x_0 L1_0^T``
    (exact products in the plan's dtype)."""
    x0 = plan.embedding.index_select(0, bead_types.to(plan.embedding.device)).contiguous()
    h0 = (x0 @ plan.blocks[0].L1T).contiguous() if plan.blocks else torch.zeros(x0.shape[0], plan.FP,
                                                                                 dtype=x0.dtype, device=x0.device)
    return x0, h0
