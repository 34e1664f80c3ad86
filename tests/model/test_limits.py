"""flashschnet.limits: user input the libraries underneath cannot take, refused in one line naming the option and the
limit before any work starts -- seeds, threads, finite numbers, replicas (particles and memory)."""
from __future__ import annotations

import pytest

from flashschnet import limits
from flashschnet.errors import InputError


def test_seeds_and_threads():
    for ok in (None, 1, 2**31 - 1):
        limits.check_seed(ok)
    for bad in (0, -5, 2**31):
        with pytest.raises(InputError, match=f"--seed must be between 1 and 2147483647 .*got {bad}"):
            limits.check_seed(bad)
    with pytest.raises(InputError, match="^seed must be"):
        limits.check_seed(0, option="seed")
    for ok in (None, 1, 1024):
        limits.check_threads(ok)
    for bad in (0, 1025):
        with pytest.raises(InputError, match=f"--threads must be between 1 and 1024, got {bad}"):
            limits.check_threads(bad)


def test_finite_numbers():
    limits.check_finite(-2.0, "--x")
    limits.check_finite(0.0, "--x", nonnegative=True)
    with pytest.raises(InputError, match=r"^--dt must be a positive finite number \(fs\), got 0.0$"):
        limits.check_finite(0.0, "--dt", unit="fs", positive=True)
    with pytest.raises(InputError, match="--t must be a non-negative finite number, got -1.0"):
        limits.check_finite(-1.0, "--t", nonnegative=True)
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InputError, match="--x must be a finite number"):
            limits.check_finite(bad, "--x")


def test_replicas_fit_in_a_system_and_in_memory(monkeypatch):
    limits.check_replicas(4, 97)
    with pytest.raises(InputError, match="--replicas must be >= 1, got 0"):
        limits.check_replicas(0, 97)
    with pytest.raises(InputError, match="more than an OpenMM System holds"):
        limits.check_replicas(2**26, 97)
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 2**30)        # 1 GiB free
    limits.check_replicas(1000, 97)                                            # 97,000 beads x 8 KiB < 1 GiB
    with pytest.raises(InputError) as err:
        limits.check_replicas(2000, 97)                                        # 194,000 beads x 8 KiB > 1 GiB
    assert str(err.value) == ("--replicas 2000 x 97 beads need at least 1.48 GiB of memory, more than the 1 GiB "
                              "available; use fewer replicas (or run them as several jobs)")
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: None)         # unknown: no check
    limits.check_fits_in_memory(2**60, "a huge job", "do less")


def test_available_memory_is_read_where_the_system_tells_it():
    free = limits.available_memory_bytes()
    assert free is None or 0 < free < 2**50
