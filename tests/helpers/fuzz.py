"""What the fuzz tests (tests/fuzz/) share: their hypothesis settings."""
from __future__ import annotations

from hypothesis import HealthCheck, settings


def fuzz_settings(max_examples: int, *also_suppress: HealthCheck) -> settings:
    """``max_examples`` examples per test, no deadline, the too_slow health check (and ``also_suppress``) off;
    derandomized or not as the hypothesis profile says (tests/conftest.py)."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, *also_suppress])
