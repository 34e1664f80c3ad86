"""The process-wide TorchScript settings a run needs: set, and restored, here only.

TorchScript decides at a module's first calls how it runs it. With the profiling executor's default fusion
strategy it specialises the module to the shapes it saw after a few profiling calls; a specialised plan may round
differently in the last bit from the profiling calls, so the forces at a given state would depend on how many
times the module had run -- and a resumed run would not repeat the uninterrupted one bitwise. :data:`ONE_PLAN`
(no static or dynamic fusion) runs every call of a module with one plan. The setting is process-wide and decides a
module's plan at its first call, so it must be in force from then on:

* :func:`one_plan` -- a context manager (also a decorator): :data:`ONE_PLAN` inside, the previous strategy
  restored when the block ends (``flashschnet.openmm.simulate.run``);
* :func:`keep_one_plan` -- :data:`ONE_PLAN` for the rest of the process (a Dask worker that only runs walker
  blocks, whose modules are first called after the builder returns).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

#: :func:`torch.jit.set_fusion_strategy`'s argument: no shape-specialised plans
ONE_PLAN = [("STATIC", 0), ("DYNAMIC", 0)]


@contextlib.contextmanager
def one_plan() -> Iterator[None]:
    """TorchScript runs every call of a module first called in the block with one plan (module docstring); the
    previous fusion strategy is restored when the block ends, whatever happens."""
    old = torch.jit.set_fusion_strategy(ONE_PLAN)
    try:
        yield
    finally:
        torch.jit.set_fusion_strategy(old)


def keep_one_plan() -> None:
    """:data:`ONE_PLAN` for the rest of the process (not restored: for processes that only run such modules)."""
    torch.jit.set_fusion_strategy(ONE_PLAN)
