"""Geometry of bead tuples, exactly as mlcg computes it: pair distances, cosines of bond angles and
mlcg/mdtraj (IUPAC) dihedral angles, batched over replicas and differentiable (plain PyTorch).

All functions take positions ``pos`` [R, N, 3] (float32 or float64, any length unit; Angstrom in this package)
and 0-based ``torch.long`` bead indices ``idx`` [n, order], and return a tensor [R, n] of the dtype of ``pos``.
"""
from __future__ import annotations

import torch

__all__ = ["compute_distances", "compute_angle_cos", "compute_torsions"]


def compute_distances(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """|r_j - r_i| [R, n] of the pairs ``idx`` [n, 2] in positions [R, N, 3]."""
    return (pos[:, idx[:, 1]] - pos[:, idx[:, 0]]).norm(dim=-1)


def compute_angle_cos(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """cos(theta) [R, n] at the middle bead ``j`` of the triples ``idx`` [n, 3] = (i, j, k)."""
    v1 = pos[:, idx[:, 0]] - pos[:, idx[:, 1]]
    v2 = pos[:, idx[:, 2]] - pos[:, idx[:, 1]]
    return (v1 * v2).sum(-1) / (v1.norm(dim=-1) * v2.norm(dim=-1))


def compute_torsions(pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """mlcg/mdtraj (IUPAC) dihedral angles.

    Parameters
    ----------
    pos : torch.Tensor, float, shape [R, N, 3]
        Positions (any length unit).
    idx : torch.LongTensor, shape [n, 4]

    Returns
    -------
    torch.Tensor, shape [R, n], radians in (-pi, pi]
        ``phi = atan2(-m . n2, n1 . n2)`` with ``b1 = r_j - r_i``, ``b2 = r_k - r_j``, ``b3 = r_l - r_k``
        normalised, ``n1 = b1 x b2``, ``n2 = b2 x b3``, ``m = n1 x b2`` (mlcg ``compute_torsions``); trans = pi.
        Same sign as OpenMM's torsion angle.
    """
    p0, p1, p2, p3 = (pos[:, idx[:, a]] for a in range(4))
    b1 = p1 - p0
    b2 = p2 - p1
    b3 = p3 - p2
    b1 = b1 / b1.norm(dim=-1, keepdim=True)
    b2 = b2 / b2.norm(dim=-1, keepdim=True)
    b3 = b3 / b3.norm(dim=-1, keepdim=True)
    n1 = torch.cross(b1, b2, dim=-1)
    n2 = torch.cross(b2, b3, dim=-1)
    m = torch.cross(n1, b2, dim=-1)
    x = (n1 * n2).sum(-1)
    y = -(m * n2).sum(-1)
    return torch.atan2(y, x)

