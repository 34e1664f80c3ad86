"""Tabulated filters (filter compression): piecewise Hermite polynomials of the pair distance.

A leaf module (torch only). In CGSchNet a block's filter is a function of the pair distance alone,
``W(r) = MLP(rbf(r)) * C(r)`` ([F] values). :func:`flashschnet.compress` replaces the filter network by a
table from which every backend gets ``W(r)`` and ``dW/dr`` (after DeePMD-kit's ``dp compress``; the
interpolant was chosen by measurement, ``docs/compression.md``).

The table format (shared by the reference backend, the ``torch`` engine and the Triton kernels):

* knots ``r_k = k h``, ``k = 0 .. n-1``, ``h = r_end / (n - 1)`` (model length unit), the first at 0, the
  last at ``r_end`` (:func:`table_end`: the filter envelope's cutoff when it is a cosine that ends inside the
  graph cutoff, else the graph cutoff);
* ``table [n, Q, F]``: entry ``q`` of knot ``k`` is ``h^q d^qW/dr^q (r_k) / scale[q]`` -- ``Q = 2`` (value and
  first derivative: cubic Hermite, C1) or ``Q = 3`` (also the second derivative: quintic Hermite, C2); the
  knot data come from the exact network by forward-mode autograd in float64;
* ``scale [Q, F]`` float32: 1 for a float32 (or float64) table; for a 16-bit table one scale per channel and
  derivative order, from its range (the scheme of :mod:`flashschnet.nn.quant`).

Evaluation at a distance ``d`` (:func:`table_lookup`): ``x = d / h``, ``k = min(floor(x), n - 2)``,
``t = x - k``, ``W = sum_q scale[q] (a_q(t) table[k, q] + b_q(t) table[k+1, q])`` with the Hermite basis
(:data:`HERMITE`, as a matrix on the powers of ``t``: :func:`hermite_matrix`), and ``dW/dd`` the exact derivative of that polynomial, so forces are the exact gradient
of the tabulated energy and dynamics stay conservative. ``W = 0`` for ``d >= r_end``, as in the exact
network (beyond ``r_end`` the cosine envelope is exactly zero, or the pair is not an edge). No pair is closer
than the first knot (0).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import torch
from torch import nn

from ..errors import InputError
from ..names import TABLE_ORDERS
from .quant import QDTYPES, TARGET

#: interpolant name -> values per knot (Q) (:data:`flashschnet.names.TABLE_ORDERS`)
ORDERS: Dict[str, int] = dict(TABLE_ORDERS)
#: table storage dtypes by name
TABLE_DTYPES: Dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32, **QDTYPES}


#: Hermite basis per order: for each q, (coefficients of a_q(t), coefficients of b_q(t)) in powers of t;
#: ``a_q`` weighs the left knot's entry q, ``b_q`` the right knot's.
HERMITE = {
    2: (((1.0, 0.0, -3.0, 2.0), (0.0, 0.0, 3.0, -2.0)),                     # value
        ((0.0, 1.0, -2.0, 1.0), (0.0, 0.0, -1.0, 1.0))),                    # h W'
    3: (((1.0, 0.0, 0.0, -10.0, 15.0, -6.0), (0.0, 0.0, 0.0, 10.0, -15.0, 6.0)),          # value
        ((0.0, 1.0, 0.0, -6.0, 8.0, -3.0), (0.0, 0.0, 0.0, -4.0, 7.0, -3.0)),             # h W'
        ((0.0, 0.0, 0.5, -1.5, 1.5, -0.5), (0.0, 0.0, 0.0, 0.5, -1.0, 0.5))),             # h^2 W''
}


def hermite_matrix(Q: int) -> torch.Tensor:
    """``[2Q, 2, 2Q]`` float64: ``M[i, 0, c]`` = coefficient of ``t^i`` in the weight of entry ``c`` of an
    interval's *difference row* ``[p_k, h W'_k, (h^2 W''_k), p_{k+1} - p_k, h W'_{k+1}, (h^2 W''_{k+1})]``
    (``p`` = the value entries), ``M[i, 1, c]`` that of its ``d/dt``; a pair's weights are
    ``[t^0 .. t^(2Q-1)] @ M``. The value basis functions sum to 1 (``a_0 + b_0 = 1``), so
    ``a_0 p_k + b_0 p_{k+1} = p_k + b_0 (p_{k+1} - p_k)``: the left value's weight is the constant 1 and the
    derivative sees the difference of neighbouring values, not two large terms that cancel (in float32 that
    cancellation cost an order of magnitude of the derivative's accuracy)."""
    polys = [a for a, _ in HERMITE[Q]] + [b for _, b in HERMITE[Q]]
    polys[0] = (1.0,)
    M = torch.zeros(2 * Q, 2, 2 * Q, dtype=torch.float64)
    for col, p in enumerate(polys):
        for i, c in enumerate(p):
            M[i, 0, col] = c
            if i:
                M[i - 1, 1, col] = i * c
    return M


def difference_rows(tab: torch.Tensor) -> torch.Tensor:
    """``[n - 1, 2Q, F]``: each interval's difference row (:func:`hermite_matrix`) of a table ``[n, Q, F]``
    (scales applied, in the compute dtype)."""
    Q = tab.shape[1]
    rows = torch.cat([tab[:-1], tab[1:]], dim=1)
    rows[:, Q] = tab[1:, 0] - tab[:-1, 0]
    return rows


def polynomial_rows(tab: torch.Tensor) -> torch.Tensor:
    """``[n - 1, 2Q, F]`` float64: each interval's Hermite polynomial in ``t`` as coefficients, lowest power
    first -- ``W(t) = sum_e A_e t^e`` on interval ``k`` (``t = d / h - k``) -- of a table ``[n, Q, F]`` (scales
    applied). The CPU kernels evaluate it by Horner's rule, the value and its derivative together
    (:mod:`flashschnet.kernels.cpu_pairs`). Computed in float64 from :func:`difference_rows` and
    :func:`hermite_matrix`'s value columns; a caller rounds once to its compute dtype. ``A_0`` is the left knot's
    value and the higher coefficients are the polynomial's own (small for a smooth filter), so rounding them
    costs each about its own ulp, not the values' (the cancellation :func:`hermite_matrix` avoids)."""
    rows = difference_rows(tab.to(torch.float64))                               # [n - 1, 2Q (entry), F]
    C = hermite_matrix(int(tab.shape[1]))[:, 0]                                                 # [2Q (power), 2Q (entry)]
    return torch.einsum("ec,kcf->kef", C, rows)


def table_end(cfg) -> float:
    """``r_end`` of a normalized config: where a table ends (module docstring)."""
    rc_graph = float(cfg["rbf"]["cutoff"]["cutoff_upper"])
    env = cfg["cutoff"]
    if env["kind"] == "cosine":
        return min(rc_graph, float(env["cutoff_upper"]))
    return rc_graph


def table_lookup(d: torch.Tensor, table: torch.Tensor, scale: torch.Tensor, r_end: float,
                 coeffs: Optional[torch.Tensor] = None, need_derivative: bool = True):
    """``W(d)`` and ``dW/dd`` from a table: the plain-PyTorch reference of every table lookup (the arguments of
    :func:`lookup`; ``coeffs`` default :func:`hermite_matrix`; ``need_derivative=False`` returns ``(W, None)``)."""
    if coeffs is None:
        coeffs = hermite_matrix(int(table.shape[1]))
    W, dW = lookup(d, table, scale, r_end, coeffs)
    return W, (dW if need_derivative else None)


def lookup(d: torch.Tensor, table: torch.Tensor, scale: torch.Tensor, r_end: float,
           coeffs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``W(d)`` and ``dW/dd`` from a table (TorchScript-able: :class:`FilterTable` calls it).

    Parameters
    ----------
    d : Tensor, [P], float32/float64
        Pair distances (model length unit), >= 0.
    table : Tensor, [n, Q, F]
        As stored (float64/float32/float16/bfloat16); computed in ``d``'s dtype.
    scale : Tensor, [Q, F], float32
    r_end : float
        The last knot.
    coeffs : Tensor, [2Q, 2, 2Q]
        :func:`hermite_matrix` of the table's order.

    Returns
    -------
    W, dW : Tensor, [P, F] in ``d``'s dtype; zero for ``d >= r_end``. Differentiable in ``d`` (autograd
    through ``t``: the reference backend gets its forces by autograd).
    """
    n, Q = table.shape[0], table.shape[1]
    h = r_end / (n - 1)
    dt = d.dtype
    x = d * (1.0 / h)
    k = torch.clamp(torch.floor(x.detach()), 0, n - 2).to(torch.int64)
    t = x - k.to(dt)
    powers = torch.arange(2 * Q, dtype=dt, device=d.device)
    w = (torch.pow(t.unsqueeze(1), powers) @ coeffs.to(dt).reshape(2 * Q, 4 * Q)).reshape(-1, 2, 2 * Q)
    w = w * (d < r_end).to(dt).reshape(-1, 1, 1)
    tab = table.to(dt) * scale.to(dt).unsqueeze(0)                                      # [n, Q, F]
    rows = difference_rows(tab).index_select(0, k)                                     # [P, 2Q, F]
    both = torch.bmm(w, rows)                                                          # [P, 2, F]
    return both[:, 0], both[:, 1] * (1.0 / h)


def knot_data(filter_fn: Callable[[torch.Tensor], torch.Tensor], r: torch.Tensor, Q: int) -> torch.Tensor:
    """``[len(r), Q, F]``: ``d^qW/dr^q`` at ``r`` (float64) by nested forward-mode autograd of ``filter_fn``
    (distances [P] -> filters [P, F], elementwise in the pair)."""
    from torch.func import jvp

    ones = torch.ones_like(r)

    def first(x):
        return jvp(filter_fn, (x,), (ones,))

    W, dW = first(r)
    out = [W, dW]
    if Q == 3:
        out.append(jvp(lambda x: first(x)[1], (r,), (ones,))[1])
    return torch.stack(out, dim=1)


def encode(data: torch.Tensor, h: float, dtype_name: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Knot data ``[n, Q, F]`` (float64, plain derivatives) -> ``(table, scale)`` in the storage format."""
    n, Q, F = data.shape
    powers = torch.tensor([h ** q for q in range(Q)], dtype=torch.float64).view(1, Q, 1)
    scaled = data * powers
    if not bool(torch.isfinite(scaled).all()):
        raise InputError("the filter network gives NaN or infinite values or derivatives on [0, cutoff]; "
                         "it cannot be tabulated")
    if dtype_name in QDTYPES:
        amax = scaled.abs().amax(dim=0)                                      # [Q, F]
        scale = torch.where(amax > 0, amax / TARGET[dtype_name], torch.ones_like(amax))
        table = (scaled / scale.unsqueeze(0)).to(QDTYPES[dtype_name])
        return table, scale.to(torch.float32)
    return scaled.to(TABLE_DTYPES[dtype_name]), torch.ones(Q, F, dtype=torch.float32)


class FilterTable(nn.Module):
    """A block's tabulated filter, in place of the filter network (``conv.filter_network``).

    Buffers ``table`` [n, Q, F] (storage dtype: float32, float64, float16 or bfloat16) and ``scale`` [Q, F]
    float32; ``r_end`` (model length unit). Moving the module (``.to(dtype)``, ``.double()``) keeps the stored
    format; lookups compute in the distances' dtype. ``forward(d [P]) -> W [P, F]`` (zero for ``d >= r_end``),
    differentiable in ``d``.
    """

    def __init__(self, knots: int, order: int, filters: int, dtype_name: str, r_end: float):
        super().__init__()
        self.dtype_name = str(dtype_name)
        self.r_end = float(r_end)
        self.register_buffer("table", torch.zeros(int(knots), int(order), int(filters),
                                                  dtype=TABLE_DTYPES[self.dtype_name]))
        self.register_buffer("scale", torch.ones(int(order), int(filters), dtype=torch.float32))
        self.register_buffer("coeffs", hermite_matrix(int(order)), persistent=False)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        self.table = self.table.to(TABLE_DTYPES[self.dtype_name])
        self.scale = self.scale.to(torch.float32)
        return self

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return lookup(d, self.table, self.scale, self.r_end, self.coeffs)[0]

    def extra_repr(self) -> str:
        n, Q, F = self.table.shape
        return f"knots={n}, order={'quintic' if Q == 3 else 'cubic'}, filters={F}, dtype={self.dtype_name}, " \
               f"r_end={self.r_end}"
