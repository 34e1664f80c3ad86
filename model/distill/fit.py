"""Distillation as linear least squares: the inner model's coefficients that best reproduce a network's forces.

The inner energy is linear in its coefficients ``c`` (:mod:`flashschnet.distill.inner`), so its forces are
``F(x) = -G(x) c`` with ``G`` the gradients of the basis functions: sparse, each column touching the 2-4 beads of
one tuple. Given frames ``x_f`` and the network's forces ``F_f`` (force matching, as CGSchNet itself is trained)
and, optionally, perturbed frames ``x_f + delta_f`` with their forces, ``c`` minimises

    sum_f |G(x_f) c + F_f|^2  +  w sum_f |(G(x_f + delta_f) - G(x_f)) c + (F(x_f + delta_f) - F_f)|^2  +  ridge

The second sum weighs the *change* of the force under small displacements: the stiffness along the fast bonded
coordinates, which is what the outer step's stability depends on (the mean force can stay in the outer group).
The normal equations are assembled sparsely (scipy) and solved directly; ``ridge`` is relative to the diagonal.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import torch

from ..priors.geometry import compute_angle_cos, compute_distances, compute_torsions
from .inner import InnerModel


def _local(pos: torch.Tensor, idx: torch.Tensor, coordinate) -> Tuple[torch.Tensor, torch.Tensor]:
    """A coordinate of every tuple and its gradient with respect to the tuple's own beads: ``q`` [F, n],
    ``g`` [F, n, order, 3]."""
    F = pos.shape[0]
    n, order = idx.shape
    local = pos[:, idx].detach().clone().requires_grad_(True)              # [F, n, order, 3]
    q = coordinate(local.reshape(F, n * order, 3), torch.arange(n * order).reshape(n, order))
    (g,) = torch.autograd.grad(q.sum(), local)
    return q.detach(), g


def design(model: InnerModel, pos) -> "scipy.sparse.csr_matrix":  # noqa: F821
    """``G`` [F * 3N, P] for positions [F, N, 3] (model length unit), rows frame-major then bead, xyz; columns
    ``bond_c``, ``angle_c``, ``dihedral_cos``, ``dihedral_sin`` flattened in that order. The network's forces
    ``F`` are matched by ``G c = -F``."""
    import scipy.sparse as sp

    pos = torch.as_tensor(pos, dtype=torch.float64)
    F, N = pos.shape[0], pos.shape[1]
    rows, cols, vals = [], [], []
    col0 = 0

    def put(idx: torch.Tensor, g: torch.Tensor, dfeat: torch.Tensor, columns: torch.Tensor) -> None:
        # column c of tuple t gets dfeat[f, t, k] * g[f, t, a, :] at bead idx[t, a]
        K = dfeat.shape[2]
        for a in range(idx.shape[1]):
            contrib = g[:, :, a, :, None] * dfeat[:, :, None, :]                     # [F, n, 3, K]
            r = (idx[:, a, None] * 3 + torch.arange(3)[None, :])[:, :, None].expand(-1, -1, K)
            c = columns[:, None, :].expand(-1, 3, -1)
            frame_rows = (torch.arange(F)[:, None] * 3 * N + r.reshape(1, -1)).reshape(-1)
            rows.append(frame_rows)
            cols.append(c.reshape(1, -1).expand(F, -1).reshape(-1))
            vals.append(contrib.reshape(-1))

    def block(n: int, K: int) -> torch.Tensor:
        nonlocal col0
        out = col0 + torch.arange(n)[:, None] * K + torch.arange(K)[None, :]
        col0 += n * K
        return out

    for idx, x0, deg, coordinate in ((model.bonds, model.bond_x0, model.bond_degree, compute_distances),
                                     (model.angles, model.angle_x0, model.angle_degree, compute_angle_cos)):
        columns = block(len(idx), deg)
        if len(idx) and deg:
            q, g = _local(pos, idx, coordinate)
            d = q - x0
            put(idx, g, torch.stack([k * d ** (k - 1) for k in range(1, deg + 1)], -1), columns)
    K = model.harmonics
    cos_cols, sin_cols = block(len(model.dihedrals), K), block(len(model.dihedrals), K)
    if len(model.dihedrals) and K:
        phi, g = _local(pos, model.dihedrals, compute_torsions)
        n = torch.arange(1, K + 1, dtype=torch.float64)
        put(model.dihedrals, g, -n * torch.sin(phi[..., None] * n), cos_cols)
        put(model.dihedrals, g, n * torch.cos(phi[..., None] * n), sin_cols)
    if not rows:
        return sp.csr_matrix((F * 3 * N, col0))
    return sp.csr_matrix((torch.cat(vals).numpy(), (torch.cat(rows).numpy(), torch.cat(cols).numpy())),
                         shape=(F * 3 * N, col0))


def with_coefficients(model: InnerModel, c: np.ndarray, **meta) -> InnerModel:
    """A copy of ``model`` with the flat coefficient vector ``c`` (the order of :func:`design`)."""
    c = torch.as_tensor(np.asarray(c, dtype=np.float64))
    sizes = [model.bond_c.numel(), model.angle_c.numel(), model.dihedral_cos.numel(), model.dihedral_sin.numel()]
    parts = torch.split(c, sizes)
    d = model.to_dict()
    d.update(bond_c=parts[0].reshape(model.bond_c.shape), angle_c=parts[1].reshape(model.angle_c.shape),
             dihedral_cos=parts[2].reshape(model.dihedral_cos.shape),
             dihedral_sin=parts[3].reshape(model.dihedral_sin.shape), meta=dict(model.meta, **meta))
    return InnerModel.from_dict(d)


def fit(template: InnerModel, frames, forces, perturbed=None, perturbed_forces=None, weight: float = 10.0,
        ridge: float = 1e-6, chunk: int = 32) -> InnerModel:
    """The coefficients of ``template``'s terms fitted to a network's forces (see the module docstring).

    Parameters
    ----------
    template : InnerModel
        Its tuples and ``x0``; coefficients ignored.
    frames : array [F, N, 3]
        Positions, model length unit (Angstrom).
    forces : array [F, N, 3]
        The network's forces there, model units (kcal/mol/Angstrom).
    perturbed, perturbed_forces : array [F, N, 3] or None
        ``frames`` displaced slightly and the network's forces there (the stiffness term, weight ``weight``).
    ridge : float
        Tikhonov regularisation relative to each coefficient's diagonal entry.
    """
    import scipy.sparse as sp
    import scipy.sparse.linalg as spl

    frames, forces = np.asarray(frames, dtype=np.float64), np.asarray(forces, dtype=np.float64)
    P = template.n_parameters
    if P == 0:                        # no terms: the inner group holds the priors alone
        return with_coefficients(template, np.zeros(0))
    A = sp.csr_matrix((P, P))
    b = np.zeros(P)
    for i in range(0, len(frames), chunk):
        G0 = design(template, frames[i:i + chunk])
        y0 = -forces[i:i + chunk].reshape(-1)
        A = A + (G0.T @ G0)
        b += G0.T @ y0
        if perturbed is not None and weight:
            dG = design(template, np.asarray(perturbed[i:i + chunk], dtype=np.float64)) - G0
            dy = -np.asarray(perturbed_forces[i:i + chunk], dtype=np.float64).reshape(-1) - y0
            A = A + weight * (dG.T @ dG)
            b += weight * (dG.T @ dy)
    diag = A.diagonal()
    scale = np.where(diag > 0, diag, 1.0)
    c = spl.spsolve((A + sp.diags(ridge * scale)).tocsc(), b)
    return with_coefficients(template, c)


def force_error(model: InnerModel, frames, forces) -> Dict[str, float]:
    """How well ``model`` reproduces ``forces`` [F, N, 3] at ``frames`` [F, N, 3]: the relative RMS error
    ``|F_inner - F| / |F|`` and the RMS of both (model units)."""
    pos = torch.as_tensor(np.asarray(frames), dtype=torch.float64)
    _, f = model.energy_forces(pos)
    ref = torch.as_tensor(np.asarray(forces), dtype=torch.float64)
    err = float((f - ref).norm() / ref.norm()) if float(ref.norm()) > 0 else float("nan")
    return {"relative_rms_error": err, "rms_force": float(ref.pow(2).mean().sqrt()),
            "rms_residual": float((f - ref).pow(2).mean().sqrt())}


def template_for(priors, frames, n_beads: int, bond_degree: int = 2, angle_degree: int = 2, harmonics: int = 3,
                 **kw) -> InnerModel:
    """An all-zero inner model on the bonded tuples of ``priors`` with ``x0`` = each tuple's mean over ``frames``
    [F, N, 3] (Angstrom)."""
    from .inner import tuples_of, zero_model

    tuples = tuples_of(priors)
    pos = torch.as_tensor(np.asarray(frames), dtype=torch.float64)
    x0 = (compute_distances(pos, tuples["bonds"]).mean(0), compute_angle_cos(pos, tuples["angles"]).mean(0))
    return zero_model(tuples, x0, n_beads, bond_degree, angle_degree, harmonics, **kw)
