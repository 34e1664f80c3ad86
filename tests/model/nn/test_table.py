"""Tabulated filters (flashschnet.nn.table): the Hermite interpolant reproduces its knot data, is C1 (cubic) /
C2 (quintic) across knots, its derivative is the exact derivative of the tabulated value, it converges at the
interpolant's order, and the storage format (float / 16-bit with per-channel scales) round-trips."""
from __future__ import annotations

import math

import pytest
import torch

from flashschnet.nn.table import (ORDERS, TABLE_DTYPES, FilterTable, encode, knot_data, table_lookup)


def smooth(r: torch.Tensor) -> torch.Tensor:
    """A smooth [P, 3] test filter with a cosine envelope that vanishes at 6."""
    env = 0.5 * (torch.cos(r * (math.pi / 6.0)) + 1.0)
    return torch.stack([torch.sin(1.3 * r), torch.exp(-0.5 * (r - 2.0) ** 2), torch.tanh(r - 3.0)], 1) * env.unsqueeze(1)


def make(Q: int, n: int, dtype_name: str = "float64", r_end: float = 6.0):
    h = r_end / (n - 1)
    r = torch.arange(n, dtype=torch.float64) * h
    return encode(knot_data(smooth, r, Q), h, dtype_name)


@pytest.mark.parametrize("Q", [2, 3], ids=["cubic", "quintic"])
def test_knots_are_reproduced_and_derivative_is_that_of_the_value(Q):
    n, r_end = 33, 6.0
    table, scale = make(Q, n)
    h = r_end / (n - 1)
    r = torch.arange(n - 1, dtype=torch.float64) * h            # the knots (the last is a right end: below)
    W, dW = table_lookup(r, table, scale, r_end)
    exact = knot_data(smooth, r, 2)
    assert float((W - exact[:, 0]).abs().max()) < 1e-13
    assert float((dW - exact[:, 1]).abs().max()) < 1e-12
    # dW is the derivative of W itself (central differences of the tabulated value, inside intervals)
    x = (torch.arange(n - 1, dtype=torch.float64) + 0.37) * h
    e = 1e-6
    fd = (table_lookup(x + e, table, scale, r_end)[0] - table_lookup(x - e, table, scale, r_end)[0]) / (2 * e)
    assert float((fd - table_lookup(x, table, scale, r_end)[1]).abs().max()) < 1e-7
    # and by autograd through the lookup (what the reference backend differentiates)
    xa = x.clone().requires_grad_(True)
    g = torch.autograd.grad(table_lookup(xa, table, scale, r_end)[0].sum(), xa)[0]
    assert float((g - table_lookup(x, table, scale, r_end)[1].sum(1)).abs().max()) < 1e-12


@pytest.mark.parametrize("Q", [2, 3], ids=["cubic", "quintic"])
def test_continuity_across_knots(Q):
    n, r_end = 17, 6.0
    table, scale = make(Q, n)
    h = r_end / (n - 1)
    knots = torch.arange(1, n - 1, dtype=torch.float64) * h
    e = 1e-9
    lo, hi = table_lookup(knots - e, table, scale, r_end), table_lookup(knots + e, table, scale, r_end)
    assert float((lo[0] - hi[0]).abs().max()) < 1e-7           # value continuous
    assert float((lo[1] - hi[1]).abs().max()) < 1e-6           # derivative continuous (C1 and C2 interpolants)


@pytest.mark.parametrize("Q,order", [(2, 3), (3, 5)], ids=["cubic", "quintic"])
def test_derivative_error_converges_at_the_interpolant_order(Q, order):
    r_end = 6.0
    x = torch.linspace(0.0, r_end * 0.999, 4001, dtype=torch.float64)
    exact = knot_data(smooth, x, 2)[:, 1]
    errs = []
    for n in (33, 65):
        table, scale = make(Q, n)
        errs.append(float((table_lookup(x, table, scale, r_end)[1] - exact).abs().max()))
    # halving h divides the derivative's error by ~2^order (h^(order) for a C^(order+1) function)
    assert errs[0] / errs[1] > 2 ** (order - 0.7), errs


def test_beyond_the_last_knot_is_zero():
    table, scale = make(3, 17)
    W, dW = table_lookup(torch.tensor([6.0, 6.5, 100.0], dtype=torch.float64), table, scale, 6.0)
    assert torch.equal(W, torch.zeros_like(W)) and torch.equal(dW, torch.zeros_like(dW))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_tables_round_within_their_unit_per_channel(name):
    table64, _ = make(3, 33)
    table, scale = make(3, 33, name)
    assert table.dtype == TABLE_DTYPES[name] and scale.dtype == torch.float32 and scale.shape == (3, 3)
    back = table.to(torch.float64) * scale.to(torch.float64).unsqueeze(0)
    unit = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[name]
    amax = table64.abs().amax(0, keepdim=True)
    assert bool(((back - table64).abs() <= unit * amax * (1 + 1e-6)).all())


def test_filter_table_keeps_its_storage_format_when_moved():
    t = FilterTable(9, 3, 4, "float16", 6.0)
    t = t.double()
    assert t.table.dtype == torch.float16 and t.scale.dtype == torch.float32
    assert FilterTable(9, 2, 4, "float32", 6.0).double().table.dtype == torch.float32
    assert t(torch.tensor([1.0], dtype=torch.float64)).dtype == torch.float64


def test_the_table_dtypes_and_orders_are_the_names_of_the_config():
    from flashschnet import names

    assert ORDERS == names.TABLE_ORDERS and tuple(TABLE_DTYPES) == names.TABLE_DTYPES
